"""tests/setup.sh's levels: `make run` (setup.sh run) asks for the server's
own packages and nothing else, exactly the run set the README lists; the
default level (make check) asks for those and the test stack; a level that
does not exist is a usage error.  Run on a machine where nothing is
installed: dpkg-query and id are stand-ins on PATH, which answer "not
installed" and "not root", so setup.sh only names what it would install."""
import os
import re
import shutil
import socket
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SETUP = os.path.join(ROOT, "tests", "setup.sh")


def bare_machine(tmp_path):
    """A PATH whose dpkg-query knows no package and whose id is a user's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("dpkg-query", "exit 1"), ("id", "echo 1000")):
        f = bin_dir / name
        f.write_text("#!/bin/sh\n%s\n" % body)
        f.chmod(0o755)
    return dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]))


def asked_for(tmp_path, *level):
    r = subprocess.run(["sh", SETUP, *level], env=bare_machine(tmp_path), cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"missing Debian packages \(run as root to install\):(.*)", r.stderr)
    assert m, (r.returncode, r.stdout, r.stderr)
    return r, set(m.group(1).split())


def readme_run_set():
    with open(os.path.join(ROOT, "README")) as f:
        m = re.search(r"^    run set: (.*)$", f.read(), re.M)
    assert m, "the README lists make run's packages on a line '    run set: ...'"
    return set(m.group(1).split())


def test_make_run_asks_for_the_run_set_only(tmp_path):
    r, pkgs = asked_for(tmp_path, "run")
    assert r.returncode == 0, r
    assert pkgs == readme_run_set(), pkgs ^ readme_run_set()
    for test_tool in ("curl", "haproxy", "php-fpm", "clang", "python3-pytest", "lintian"):
        assert test_tool not in pkgs


def test_make_check_asks_for_the_test_stack_too(tmp_path):
    # only the package list: as a user without apt-get, setup.sh goes on to
    # pip and npm steps, which this test leaves out by stopping at the list
    with open(SETUP) as f:
        text = f.read()
    assert '[ "$level" = run ] && exit 0' in text
    env = bare_machine(tmp_path)
    head = text[:text.index('[ "$level" = run ] && exit 0')] + "exit 0\n"
    script = tmp_path / "setup-head.sh"
    script.write_text(head)
    r = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=60)
    m = re.search(r"missing Debian packages \(run as root to install\):(.*)", r.stderr)
    assert m, r
    pkgs = set(m.group(1).split())
    assert readme_run_set() < pkgs
    for test_tool in ("curl", "haproxy", "php-fpm", "clang", "lintian"):
        assert test_tool in pkgs, test_tool


def test_unknown_level_is_a_usage_error(tmp_path):
    r = subprocess.run(["sh", SETUP, "everything"], env=bare_machine(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage: sh tests/setup.sh [run|check|bench]" in r.stderr, r


def test_optional_downloads_that_do_not_come_are_skipped_with_a_message(tmp_path):
    """Issue 91: every optional download (pip's aioquic and ziglang, go's
    h2spec, Pebble and grpc-go's interop programs, npm's caching suite and
    the dictionary tests' JavaScript) that cannot reach its registry is a
    message naming what will be skipped, and setup.sh ends 0: in a pristine
    tree without the machine's registry settings, the dictionary data's
    clean-up (rm of build/dictdata/tmp/ when npm pack gave no file) ended it
    with an error.  The registries are a closed port here (pip, npm and Go's
    module proxy each told so by its environment variable), the Python
    modules are "missing" (a python3 whose `-c import` fails; pip installs
    into a --target of its own, where none is), HOME, GOPATH
    and the tree are the test's (a copy of setup.sh: build/ is under
    tmp_path), and the machine is a user's, so apt-get is not run."""
    env = bare_machine(tmp_path)
    real = subprocess.run(["sh", "-c", "command -v python3"], capture_output=True, text=True,
                          env=env).stdout.strip()
    py = tmp_path / "bin" / "python3"
    py.write_text('#!/bin/sh\n[ "$1" = -c ] && exit 1\nexec %s "$@"\n' % real)
    py.chmod(0o755)
    closed = "http://127.0.0.1:%d" % closed_port()
    home = tmp_path / "home"
    home.mkdir()
    env.update(HOME=str(home), GOPATH=str(home / "go"), GOMODCACHE=str(home / "gomod"),
               GOCACHE=str(home / "gocache"), GOPROXY=closed, GOSUMDB="off",
               GOTOOLCHAIN="local", GOFLAGS="", PIP_INDEX_URL=closed + "/simple",
               PIP_FIND_LINKS="", PIP_NO_INDEX="", PIP_DEFAULT_TIMEOUT="5",
               PIP_RETRIES="0", PIP_CONFIG_FILE=os.devnull, PIP_TARGET=str(home / "pip"),
               npm_config_registry=closed + "/", npm_config_userconfig=os.devnull,
               npm_config_fetch_retry_mintimeout="100", npm_config_fetch_retry_maxtimeout="200",
               npm_config_cache=str(home / "npm-cache"))
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    shutil.copy(SETUP, str(tree / "tests" / "setup.sh"))
    r = subprocess.run(["sh", str(tree / "tests" / "setup.sh")], env=env, cwd=str(tree),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert all(ln.startswith("setup: ") for ln in lines), r.stderr  # no stray error
    said = "\n".join(lines)
    for skipped in ("test_h3.py skips its aioquic tests", "make cross will be skipped",
                    "the HTTP caching test suite will be skipped",
                    "the dictionary tests on real data skip"):
        assert skipped in said, (skipped, said)
    if shutil.which("go", path=env["PATH"]) and not shutil.which("h2spec", path=env["PATH"]):
        assert "could not go install h2spec" in said, said
    assert not (tree / "build" / "dictdata" / "tmp").exists()
    assert not any(f.name.endswith(".js") for f in (tree / "build" / "dictdata").iterdir())


def closed_port():
    """A loopback TCP port nothing listens on (bound, never listened, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
