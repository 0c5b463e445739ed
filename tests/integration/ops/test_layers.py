"""tests/layers.py, the include layering of gatling/: it passes on the tree,
and fails on a copy where a handler includes the connection's header, a
lower folder includes a higher one (or its README allows one), or two files
call each other (directly, or round a longer circle, through a call or an
include; in gatling/, io/ or bench/lg), or a folder's README leaves out one of
its files."""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "tests", "layers.py")


def layers(root):
    return subprocess.run([sys.executable, SCRIPT, root], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60, text=True)


def copy_tree(tmp_path):
    dst = tmp_path / "tree"
    for d in ("gatling", "io", os.path.join("bench", "lg")):
        shutil.copytree(os.path.join(ROOT, d), dst / d,
                        ignore=shutil.ignore_patterns("gatling", "*.o", "*.d"))
    return dst


def add_include(path, inc):
    text = path.read_text()
    first = text.index("#include")
    path.write_text(text[:first] + '#include "%s"\n' % inc + text[first:])


def test_tree_passes():
    r = layers(ROOT)
    assert r.returncode == 0, r.stdout


def test_handler_including_conn_h_fails(tmp_path):
    tree = copy_tree(tmp_path)
    assert layers(str(tree)).returncode == 0
    for inc in ("conn.h", "conn/conn.h"):
        static = tree / "gatling" / "handlers" / "static.c"
        saved = static.read_text()
        add_include(static, inc)
        r = layers(str(tree))
        assert r.returncode == 1, r.stdout
        assert "handlers/static.c" in r.stdout and "connection's header" in r.stdout
        static.write_text(saved)


def test_upward_include_fails(tmp_path):
    tree = copy_tree(tmp_path)
    add_include(tree / "gatling" / "http" / "hbuf.c", "site/site.h")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "http/hbuf.c" in r.stdout and "site/site.h" in r.stdout


def test_rule_naming_a_higher_folder_fails(tmp_path):
    """HTTP/2 is below the connection (conn.c drives it): its README may not
    allow conn/, even while no file of it includes one."""
    tree = copy_tree(tmp_path)
    readme = tree / "gatling" / "h2" / "README"
    readme.write_text(readme.read_text().replace("May include: ", "May include: conn, "))
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "gatling/h2/README" in r.stdout and "conn" in r.stdout


def test_layers_list_is_the_order(tmp_path):
    """The order is gatling/LAYERS' alone: with h3/ listed above quic/ (which
    drives it), quic/README's rule names a folder that is no longer below it."""
    tree = copy_tree(tmp_path)
    lst = tree / "gatling" / "LAYERS"
    lines = lst.read_text().splitlines(True)
    iq = next(i for i, l in enumerate(lines) if l.startswith("quic "))
    ih = next(i for i, l in enumerate(lines) if l.startswith("h3 "))
    lines[iq], lines[ih] = lines[ih], lines[iq]
    lst.write_text("".join(lines))
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "gatling/quic/README: May include names h3" in r.stdout, r.stdout


def test_makefile_folders_agree_with_layers(tmp_path):
    """make layers hands the folders gatling.mk compiles to the check: one
    more or one fewer than gatling/LAYERS lists fails, naming both; and the
    makefile, asked, compiles exactly the list's."""
    r = subprocess.run([sys.executable, SCRIPT, "--make-dirs",
                        "acme ftp conn quic h1 h2 h3 codec handlers site http", ROOT],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, text=True)
    assert r.returncode == 1, r.stdout
    assert "gatling/gatling.mk compiles" in r.stdout and "gatling/LAYERS lists" in r.stdout
    m = subprocess.run(["make", "--no-print-directory", "-s", "-n", "layers"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, text=True)
    assert m.returncode == 0, m.stdout
    line = next(l for l in m.stdout.splitlines() if "layers.py" in l)
    dirs = line.split("--make-dirs", 1)[1].strip().split('"')[1].split()
    names = [l.split()[0] for l in open(os.path.join(ROOT, "gatling", "LAYERS"))
             if l.split() and not l.startswith("#")]
    assert dirs == [n for n in names if n not in ("gatling", "io")], (dirs, names)


def append(path, text):
    path.write_text(path.read_text() + text)


def test_circle_by_a_call_fails(tmp_path):
    """The generic proxy calls the backends' helpers (proxy_be.c): a helper
    calling back into proxy.c closes a circle, named with both arrows."""
    tree = copy_tree(tmp_path)
    be = tree / "gatling" / "handlers" / "proxy_be.c"
    append(be, "\nint proxy_streams(exchange_t *ex);\nint px_back(exchange_t *ex)\n"
               "{\n    return proxy_streams(ex);\n}\n")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "a circle between" in r.stdout, r.stdout
    assert "proxy_be.c -> gatling/handlers/proxy.c: proxy_be.c names proxy_streams()" in r.stdout
    assert "proxy.c -> gatling/handlers/proxy_be.c" in r.stdout


def test_circle_by_a_call_without_an_include_fails(tmp_path):
    """FTP's data half naming the control half's function, declared by hand
    (no include to give it away): still a circle (ftp.c calls ftp_xfer.c)."""
    tree = copy_tree(tmp_path)
    xfer = tree / "gatling" / "ftp" / "ftp_xfer.c"
    append(xfer, "\nvoid ftp_refuse(int fd);\nvoid ftp_back(int fd)\n{\n    ftp_refuse(fd);\n}\n")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "ftp_xfer.c -> gatling/ftp/ftp.c: ftp_xfer.c names ftp_refuse()" in r.stdout


def test_circle_by_an_include_fails(tmp_path):
    """io/gio.c calls the batches; a batch file including the loop's header
    again (as it once did for GIO_AGAIN) is a circle."""
    tree = copy_tree(tmp_path)
    add_include(tree / "io" / "gio_batch.c", "gio.h")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "io/gio_batch.c -> io/gio.c: gio_batch.c includes gio.h" in r.stdout


def test_a_longer_circle_fails(tmp_path):
    """Three files round: router.c -> static.c -> target.c -> router.c."""
    tree = copy_tree(tmp_path)
    target = tree / "gatling" / "handlers" / "target.c"
    add_include(target, "router.h")
    append(target, "\nint target_back(exchange_t *ex)\n{\n    return router_streams(ex);\n}\n")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "router.c" in r.stdout and "static.c" in r.stdout and "target.c" in r.stdout



def test_handler_choosing_a_site_fails(tmp_path):
    """The site is the route's, chosen once (issue 86, handlers/host.h): a
    handler that opens its vhost again (vhost_open) or reads Host to decide
    fails make layers; so does a stage that names a producer (the cache
    calling the proxy, not the router)."""
    tree = copy_tree(tmp_path)
    append(tree / "gatling" / "handlers" / "static.c",
           "\nint static_again(exchange_t *ex);\nint static_again(exchange_t *ex)\n{\n"
           "    return vhost_open(ex->site->rootfd, \"x\", 0, NULL, NULL) +\n"
           "           (http_header(ex->req, \"Host\") != NULL);\n}\n")
    append(tree / "gatling" / "route" / "cache.c",
           "\nint cache_asks_proxy(exchange_t *ex);\nint cache_asks_proxy(exchange_t *ex)\n{\n"
           "    return proxy_streams(ex);\n}\n")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "gatling/handlers/static.c: calls vhost_open" in r.stdout, r.stdout
    assert re.search(r"gatling/handlers/static.c:\d+: reads Host", r.stdout), r.stdout
    assert "gatling/route/cache.c names a producer, gatling/handlers/proxy.c" in r.stdout


def test_readme_leaving_out_a_file_fails(tmp_path):
    """Each folder's README names its files: a new file nobody mapped, and a
    file whose line went from the README (mime.c, with its mime.h), are
    both named in the failure."""
    tree = copy_tree(tmp_path)
    (tree / "gatling" / "http" / "newpart.c").write_text("int newpart_x;\n")
    readme = tree / "gatling" / "site" / "README"
    text = readme.read_text()
    assert "  mime.c " in text
    readme.write_text(text.replace("  mime.c ", "  mime   "))
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "gatling/http/README does not name newpart.c" in r.stdout, r.stdout
    assert "gatling/site/README does not name mime.c, mime.h" in r.stdout, r.stdout


def test_bench_lg_including_gatling_fails(tmp_path):
    """The load generators measure the server; they never share its code."""
    tree = copy_tree(tmp_path)
    add_include(tree / "bench" / "lg" / "lg_http.c", "http/http_parse.h")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "bench/lg/lg_http.c" in r.stdout and "http/http_parse.h" in r.stdout, r.stdout


def copy_bench(tmp_path):
    """copy_tree's (which has bench/lg), with some of bench/'s Python (drivers, bench/benchkit)."""
    dst = copy_tree(tmp_path)
    shutil.copytree(os.path.join(ROOT, "bench", "benchkit"), dst / "bench" / "benchkit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("compare-h3", "netlab"):
        shutil.copy(os.path.join(ROOT, "bench", f), dst / "bench" / f)
    return dst


def test_bench_lg_circle_fails(tmp_path):
    """bench/lg is held to no circle: bench_common.c calling back into a loop makes one."""
    tree = copy_bench(tmp_path)
    assert layers(str(tree)).returncode == 0
    common = tree / "bench" / "lg" / "bench_common.c"
    common.write_text(common.read_text() + "\nint back(void) { return bench_run(0, 0, 0); }\n")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    circle = re.search(r"a circle between (.*):", r.stdout)
    assert circle and {"bench/lg/bench_common.c", "bench/lg/bench_run.c"} <= \
        set(circle.group(1).split(", ")), r.stdout


def test_bench_driver_loading_a_driver_fails(tmp_path):
    """A driver shares code through bench/benchkit only: loading another driver, or importing
    a module of benchkit as if it were beside the drivers (bench/benchlib.py once was), fails."""
    tree = copy_bench(tmp_path)
    h3 = tree / "bench" / "compare-h3"
    saved = h3.read_text()
    for line, what in (('h2 = bl.load_driver("compare-h2")\n', "loads code by load_driver"),
                       ("import importlib\n", "loads code by importlib"),
                       ("import benchlib\n", "imports benchlib from bench/")):
        h3.write_text(saved.replace("import argparse\n", "import argparse\n" + line, 1))
        r = layers(str(tree))
        assert r.returncode == 1, r.stdout
        assert "bench/compare-h3:" in r.stdout and what in r.stdout, r.stdout


def test_bench_driver_importing_a_test_module_fails(tmp_path):
    """Of tests/integration a driver imports the labs (acmelab, clusterlab) only: a test
    module (test_lb's Gatling, imported past clusterlab) fails, and so does a lab
    importing a driver back, or benchkit importing a lab."""
    tree = copy_bench(tmp_path)
    suite = tree / "tests" / "integration"
    (suite / "ops").mkdir(parents=True)
    (suite / "conftest.py").write_text("import os\n")
    (suite / "acmelab.py").write_text("import os\n")
    (suite / "clusterlab.py").write_text("import acmelab\nfrom benchkit import netlab\n")
    (suite / "ops" / "test_lb.py").write_text("class Gatling:\n    pass\n")
    h3 = tree / "bench" / "compare-h3"
    saved = h3.read_text()
    h3.write_text(saved.replace("import argparse\n", "import argparse\nimport acmelab\n", 1))
    r = layers(str(tree))
    assert r.returncode == 0, r.stdout
    h3.write_text(saved.replace("import argparse\n", "import argparse\nfrom test_lb import "
                                "Gatling\n", 1))
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "bench/compare-h3:" in r.stdout and "imports test_lb of tests/integration" in r.stdout
    h3.write_text(saved)
    lab = suite / "clusterlab.py"
    lab.write_text(lab.read_text() + "import netlab\n")  # bench/netlab, the driver
    r = layers(str(tree))
    assert r.returncode == 1 and "a lab imports netlab of bench/" in r.stdout, r.stdout
    lab.write_text("import acmelab\n")
    kit = tree / "bench" / "benchkit" / "__init__.py"
    kit.write_text(kit.read_text() + "\nimport clusterlab\n")
    r = layers(str(tree))
    assert r.returncode == 1 and "imports clusterlab of tests/integration" in r.stdout, r.stdout


FILELEN = os.path.join(ROOT, "tests", "filelen.sh")


def filelen(*args):
    return subprocess.run(["sh", FILELEN] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60, text=True)


def test_files_within_length():
    """The tree's C files are all 900 lines or fewer, and make layers runs the check."""
    r = filelen()
    assert r.returncode == 0, r.stdout
    m = subprocess.run(["make", "--no-print-directory", "-s", "-n", "layers"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, text=True)
    assert "tests/filelen.sh" in m.stdout, m.stdout


def test_filelen_covers_the_tree():
    """The length guard reads every C file: io/, gatling/, the load generators
    of bench/ and the tests' own (with a limit of 1 line, each is named)."""
    r = filelen("-n", 1)
    assert r.returncode == 1, r.stdout
    for path in ("io/gio.c", "gatling/process/main.c", "bench/lg/bench.c", "bench/lg/bench_conn.c",
                 "tests/unit/t_counters.c"):
        assert path + ":" in r.stdout, (path, r.stdout[:2000])


def test_over_long_file_fails(tmp_path):
    """No C file of gatling/ or io/ over 900 lines (tests/filelen.sh, beside
    funclen.sh's rule for functions): a copy of a file grown past it is named
    with its length, beside one that is not; at 900 it passes."""
    tree = copy_tree(tmp_path)
    static = tree / "gatling" / "handlers" / "static.c"
    other = tree / "gatling" / "http" / "hbuf.c"
    assert filelen(static, other).returncode == 0
    text = static.read_text()
    n = text.count("\n")
    static.write_text(text + "/* padding */\n" * (901 - n))
    r = filelen(static, other)
    assert r.returncode == 1, r.stdout
    assert "gatling/handlers/static.c: 901 lines" in r.stdout, r.stdout
    assert r.stdout.count("\n") == 1, r.stdout
    static.write_text(text + "/* padding */\n" * (900 - n))
    assert filelen(static, other).returncode == 0
    r = filelen("-n", n - 1, static)
    assert r.returncode == 1 and "static.c: 900 lines" in r.stdout, r.stdout
