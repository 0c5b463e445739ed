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
    for test_tool in ("curl", "haproxy", "php-fpm", "clang", "lintian", "python3-pip"):
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
    env = offline_machine(tmp_path, '[ "$1" = -c ] && exit 1\nexec %s "$@"\n')
    tree, r = setup_in_a_tree(tmp_path, env)
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


# Debian 12's python3 as a fresh machine has it: an import finds only what is in the
# first folder of PYTHONPATH; pip refuses to install into the system's site-packages
# (PEP 668, "externally-managed-environment") and installs with --target DIR (a folder
# a module, logged in pip.log)
DEBIAN_PYTHON = r'''case $1 in
-c) m=${2#import }; [ -n "$PYTHONPATH" ] && [ -d "${PYTHONPATH%%%%:*}/$m" ]; exit ;;
-m) [ "$2 $3" = "pip install" ] || exit 1; shift 3 ;;
*) exit 1 ;;
esac
t=
while [ $# -gt 0 ]; do
    case $1 in
    --target) t=$2; shift ;;
    -*) ;;
    *) [ -n "$t" ] || { echo "error: externally-managed-environment" >&2; exit 1; }
       echo "$t ${1%%%%==*}" >>%s/pip.log; mkdir -p "$t/${1%%%%==*}" ;;
    esac
    shift
done
'''


def test_pip_installs_into_the_trees_own_folder_on_debians_python(tmp_path):
    """Issue 91: in a pristine Debian 12 tree make check's h3 pass had no aioquic: Debian's
    python3 has no pip unless python3-pip is installed, and its pip refuses to install
    into the system (PEP 668), where aioquic's newer cryptography and pyOpenSSL would
    shadow Debian's for certbot.  setup.sh asks for python3-pip and pip installs aioquic
    and ziglang into the tree's build/python (conftest.py and make cross look there);
    a second run finds them there and asks pip for nothing."""
    env = offline_machine(tmp_path, DEBIAN_PYTHON % tmp_path)
    tree, r = setup_in_a_tree(tmp_path, env)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "could not pip install" not in r.stderr, r.stderr
    pydir = tree / "build" / "python"
    assert (pydir / "aioquic").is_dir() and (pydir / "ziglang").is_dir(), r.stderr
    assert (tmp_path / "pip.log").read_text() == "%s aioquic\n%s ziglang\n" % (pydir, pydir)
    r = subprocess.run(["sh", str(tree / "tests" / "setup.sh")], env=env, cwd=str(tree),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "could not pip install" not in r.stderr, r.stderr
    assert (tmp_path / "pip.log").read_text().count("\n") == 2


def offline_machine(tmp_path, python3):
    """bare_machine's PATH with python3 a script of the test's (python3's body: %s is
    the real python3), pip's, npm's and Go's registries a closed port, and HOME, GOPATH
    and the caches the test's."""
    env = bare_machine(tmp_path)
    real = subprocess.run(["sh", "-c", "command -v python3"], capture_output=True, text=True,
                          env=env).stdout.strip()
    py = tmp_path / "bin" / "python3"
    py.write_text("#!/bin/sh\n" + (python3 % real if "%s" in python3 else python3))
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
    return env


def setup_in_a_tree(tmp_path, env):
    """Runs a copy of setup.sh in a tree of the test's (tmp_path/tree, its build/ there):
    (the tree, the finished process)."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    shutil.copy(SETUP, str(tree / "tests" / "setup.sh"))
    return tree, subprocess.run(["sh", str(tree / "tests" / "setup.sh")], env=env,
                                cwd=str(tree), capture_output=True, text=True, timeout=600)


def closed_port():
    """A loopback TCP port nothing listens on (bound, never listened, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
