"""The orders a person types make's commands in, in one clone (issue 55):
objects record the flags they were built with (build/obj.flags,
build/<backend>.flags, see the GNUmakefile), so a change of configuration
rebuilds what it changes, and the user's gatling/gatling is the build asked
for last.  Each runs in a copy of the tree (the sources make needs, no
build/) with OPT=-O0, so that it neither touches make check's own builds nor
takes long: two builds of gatling/ (with and without HTTP/3), then only
copies and the few objects a test changes.

  - make run's build then make check's: make run installs no HTTP/3 library,
    so gatling/h3/ was compiled empty (no HAVE_H3) into build/obj, and make
    check, which installs them, linked those objects into its HTTP/3 build:
    t_quic_retry failed to link (undefined quic_retry_new).  A pkg-config
    that finds nothing stands for the machine before make check's setup;
  - make H3=0 then make, make then make H3=0: gatling -V says what was asked
    (make H3=0 gatling/gatling after make check left the HTTP/3 binary: the
    copy rule saw gatling/gatling newer than build/epoll-noh3/gatling);
  - a changed CFLAGS rebuilds its tree's objects, and only those."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# what `make gatling/gatling` and the unit programs need: no bench/ (the
# GNUmakefile -includes bench.mk), no www/, no build/
SOURCES = ("GNUmakefile", "io", "gatling", "tests/tests.mk", "tests/fuzz/fuzz.mk",
           "tests/unit", "tests/backends.sh")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    dst = tmp_path_factory.mktemp("orders") / "gatling"
    for src in SOURCES:
        s, d = os.path.join(ROOT, src), dst / src
        if os.path.isdir(s):
            shutil.copytree(s, d, ignore=shutil.ignore_patterns("gatling", "*.o", "*.d"))
        else:
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, d)
    # a pkg-config that finds nothing: a machine where only make run's packages are
    nolibs = dst.parent / "nolibs"
    nolibs.mkdir()
    (nolibs / "pkg-config").write_text("#!/bin/sh\nexit 1\n")
    (nolibs / "pkg-config").chmod(0o755)
    return dst


def make(tree, *args, pkg_config=True, **env_vars):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "CFLAGS",
                        "CPPFLAGS", "LDFLAGS", "LDLIBS", "H3", "SAN", "IO")}
    env["OPT"] = "-O0"  # a third of -O2's compile time; what is tested is which files build
    env.update(env_vars)
    if not pkg_config:
        env["PATH"] = "%s:%s" % (tree.parent / "nolibs", env["PATH"])
    before = flags(tree)
    r = subprocess.run(["make", "--no-print-directory", "-j2"] + list(args), cwd=str(tree),
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, "make %s:\n%s%s" % (" ".join(args), r.stdout[-3000:],
                                                   r.stderr[-3000:])
    after = flags(tree)
    # what a changed flags file held before and after: the assertions' messages
    # say why make rebuilt (CI once saw build/epoll.flags change between two
    # identical makes)
    return r.stdout + "".join("\n[%s was: %s\n now: %s]" % (k, before.get(k), after[k])
                              for k in sorted(after) if before.get(k) != after[k])


def flags(tree):
    d = tree / "build"
    return {f: (d / f).read_text() for f in os.listdir(d) if f.endswith(".flags")} \
        if d.is_dir() else {}


def version(tree, binary="gatling/gatling"):
    """What gatling -V says after its version: '(epoll)', '(epoll) h3'."""
    r = subprocess.run([str(tree / binary), "-V"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("gatling "), r
    return r.stdout.strip().split(" ", 2)[2]


def compiled(out):
    """The sources make compiled, from its output."""
    return sorted(ln.rsplit(" ", 1)[1] for ln in out.splitlines() if " -c -o " in ln)


def test_make_run_then_make_check(tree):
    # make run: setup.sh run, then make gatling/gatling, with no HTTP/3 library
    make(tree, "gatling/gatling", pkg_config=False)
    assert version(tree) == "(epoll)"
    # make check's build, once setup.sh has installed HTTP/3's libraries: the
    # unit program that failed to link, and the server, now with HTTP/3
    make(tree, "gatling/gatling", "build/epoll/tests/t_quic_retry")
    assert version(tree) == "(epoll) h3"
    r = subprocess.run([str(tree / "build/epoll/tests/t_quic_retry")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "not ok" not in r.stdout, r.stdout + r.stderr


def test_h3_off_then_on_then_off(tree):
    # both builds exist now (the test above): each make only copies what was asked for
    for args, want in ((["H3=0"], "(epoll)"), ([], "(epoll) h3"),
                       (["H3=0"], "(epoll)")):
        out = make(tree, "gatling/gatling", *args)
        assert compiled(out) == [], out
        assert version(tree) == want, (args, out)


def test_changed_flags_rebuild_their_tree_only(tree):
    make(tree, "gatling/gatling")
    # io/ with other flags: build/epoll.flags changes, build/obj.flags does not
    out = make(tree, "OPT=-O1", "build/epoll/io/gio.o")
    assert compiled(out) == ["io/gio.c"], out
    # back to the first flags: io/'s objects again and a link, none of gatling/'s
    out = make(tree, "gatling/gatling")
    assert compiled(out) == ["io/gio.c", "io/gio_batch.c", "io/gio_os.c", "io/gio_tls.c",
                             "io/gio_udp.c"], out
    assert version(tree) == "(epoll) h3"
    # and with nothing changed, nothing is built
    assert compiled(make(tree, "gatling/gatling")) == []
    # a define for every object (from the environment, as a packager's
    # CPPFLAGS comes): build/obj's are compiled again
    out = make(tree, "build/obj/srv/http/path.o", CPPFLAGS="-DGATLING_TEST_ORDERS")
    assert compiled(out) == ["gatling/http/path.c"], out
