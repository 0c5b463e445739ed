"""tests/setup.sh's levels: `make run` (setup.sh run) asks for the server's
own packages and nothing else, exactly the run set the README lists; the
default level (make check) asks for those and the test stack; a level that
does not exist is a usage error.  Run on a machine where nothing is
installed: dpkg-query and id are stand-ins on PATH, which answer "not
installed" and "not root", so setup.sh only names what it would install."""
import os
import re
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
