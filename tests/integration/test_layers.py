"""tests/layers.py, the include layering of gatling/: it passes on the tree,
and fails on a copy where a handler includes the connection's header, a
lower folder includes a higher one (or its README allows one), or two files
call each other (directly, or round a longer circle, through a call or an
include; in gatling/, io/ or bench/lg), or a folder's README leaves out one of
its files."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
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


def test_circle_in_bench_lg_fails(tmp_path):
    """bench.c picks the worker loops; bench_run.c handing a worker to the
    surge loop again (as it once did) closes a circle with bench_surge.c,
    which calls bench_run.c's helpers."""
    tree = copy_tree(tmp_path)
    assert layers(str(tree)).returncode == 0
    run = tree / "bench" / "lg" / "bench_run.c"
    add_include(run, "bench_surge.h")
    append(run, "\nint bench_back(const bench_cfg_t *cfg, bench_stats_t *all)\n"
                "{\n    return bench_surge(cfg, 0, all);\n}\n")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "a circle between" in r.stdout and "bench/lg/bench_surge.c" in r.stdout, r.stdout


def test_bench_lg_including_gatling_fails(tmp_path):
    """The load generators measure the server; they never share its code."""
    tree = copy_tree(tmp_path)
    add_include(tree / "bench" / "lg" / "lg_http.c", "http/http_parse.h")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "bench/lg/lg_http.c" in r.stdout and "http/http_parse.h" in r.stdout, r.stdout
