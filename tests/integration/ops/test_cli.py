"""Command-line interface: -V, -h, bad options, startup line."""
import re
import subprocess

import pytest

from conftest import Client


def run(build, *args, timeout=20):
    try:
        return subprocess.run([build.binary] + list(args), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              cwd="/")
    except subprocess.TimeoutExpired:
        pytest.fail("gatling %s did not exit within %d s" % (" ".join(args), timeout))


def test_version(build):
    p = run(build, "-V")
    assert p.returncode == 0, p
    out = p.stdout.decode()
    lines = out.splitlines()
    assert len(lines) == 1, "-V must print one line, got %r" % out
    m = re.fullmatch(r"gatling \d+(\.\d+)+\S* \((\w+)\)( h3)?", lines[0])
    assert m, "-V line %r is not 'gatling VERSION (BACKEND)[ h3]'" % lines[0]
    assert m.group(2) == build.backend, "-V says backend %r, build is %r" % (
        m.group(2), build.name)
    # " h3": HTTP/3 is built in (make H3=0 leaves it out, into build/<backend>-noh3)
    if build.name.endswith("-noh3"):
        assert not m.group(3), "an H3=0 build says h3: %r" % lines[0]


def test_help(build):
    p = run(build, "-h")
    assert p.returncode == 0, p
    out = p.stdout.decode()
    assert "usage" in out.lower(), "no usage text on stdout: %r" % out
    assert not p.stderr, "-h wrote on stderr: %r" % p.stderr
    for opt in ("-i", "-p", "-T", "-n", "-c", "-W", "-V", "-h"):
        assert re.search(r"(^|\W)%s\b" % re.escape(opt), out), "-h does not mention %s" % opt


@pytest.mark.parametrize("args", [("-p", "abc"), ("-p", "70000"), ("-p", "-1"), ("-p", ""),
                                  ("-T", "-1"), ("-T", "x"), ("-W", "abc"), ("-x",),
                                  ("-p",), ("-i", "not-an-address"), ("-p", "80x"),
                                  ("-F", "-1"), ("-F", "1048577"), ("-F", "16k"), ("-a", "x"),
                                  ("-a", "3601"), ("--status-from", "10.0.0.0/33"),
                                  ("--status-from", "example.org"), ("--status-from",),
                                  ("--status-from", ",".join(["10.0.0.%d" % i for i in range(33)])),
                                  ("--flood-memory", "-1"), ("--flood-memory", "3601"),
                                  ("--flood-memory", "10s"), ("--flood-memory",),
                                  ("--h3-retry", "sometimes"), ("--h3-retry",)],
                         ids=lambda a: " ".join(a) if isinstance(a, tuple) else a)
def test_bad_option_exit_2(build, args):
    # never let a wrongly accepted option leave a server on a fixed port
    base = [] if args[0] == "-i" else ["-i", "127.0.0.1"]
    base += [] if args[0] == "-p" else ["-p", "0"]
    p = run(build, *(base + list(args)), timeout=20)
    assert p.returncode == 2, "gatling %s: exit status %d (want 2)\nstderr %r\nstdout %r" % (
        " ".join(args), p.returncode, p.stderr, p.stdout)
    assert p.stderr.strip(), "gatling %s: no message on stderr" % " ".join(args)


@pytest.mark.parametrize("args,names", [(("-p", "abc"), "-p"), (("-T", "-1"), "-T"),
                                        (("-y",), "-y"), (("-j",), "-j"),
                                        (("--status-from", "1.2.3"), "--status-from"),
                                        (("--flood-memory", "x"), "--flood-memory"),
                                        (("--h3-retry", "x"), "--h3-retry"),
                                        (("leftover",), "leftover")],
                         ids=lambda a: " ".join(a) if isinstance(a, tuple) else a)
def test_bad_option_is_short(build, args, names):
    """The error, naming the option, and a pointer to -h and gatling(8), not the whole usage."""
    p = run(build, "-i", "127.0.0.1", "-p", "0", *args, timeout=20)
    err = p.stderr.decode()
    assert p.returncode == 2, "gatling %s: exit status %d (want 2)\nstderr %r" % (
        " ".join(args), p.returncode, err)
    lines = err.splitlines()
    assert 1 <= len(lines) <= 3, "gatling %s: %d lines on stderr (want at most 3):\n%s" % (
        " ".join(args), len(lines), err)
    assert names in lines[0], "gatling %s: the error does not name %s: %r" % (
        " ".join(args), names, err)
    assert "-h" in err and "gatling(8)" in err, "no pointer to -h and gatling(8): %r" % err
    assert not p.stdout, "a bad option printed on stdout: %r" % p.stdout


def test_c_bad_dir_fails(build, tmp_path):
    p = run(build, "-i", "127.0.0.1", "-p", "0", "-c", str(tmp_path / "no-such-dir"))
    assert p.returncode != 0, "-c to a missing directory must fail"
    assert p.stderr.strip()


def test_startup_line_names_backend(gatling, build):
    srv = gatling()
    text = srv.stderr_text()
    assert build.backend in text, "startup output does not name the backend %r:\n%s" % (
        build.backend, text)
    assert srv.listeners and srv.listeners[0][0] in ("127.0.0.1",), srv.listeners
    assert 0 < srv.port < 65536


def test_port_0_gives_distinct_ports(gatling):
    a = gatling()
    b = gatling()
    assert a.port != b.port
    for s in (a, b):
        with Client(s.port) as c:
            assert c.request("/f.txt").status == 200


def test_c_changes_root(gatling, build, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "g.txt").write_bytes(b"from -c\n")
    # as root, -c also chroots: LeakSanitizer cannot read /proc there and
    # would fail the exit, so leak checking is off for this one server
    env = {"ASAN_OPTIONS": "detect_leaks=0"} if build.sanitized else None
    srv = gatling({"f.txt": "cwd\n"}, args=("-T", "10", "-c", str(other)), env=env)
    with Client(srv.port) as c:
        r = c.request("/g.txt")
        assert r.status == 200 and r.body == b"from -c\n", "-c dir not served: %r" % r
        assert c.request("/f.txt").status == 404, "-c: still serving the cwd"


def test_listen_address_respected(gatling, build):
    srv = gatling()
    # bound to 127.0.0.1 only: 127.0.0.2 is loopback too but must be refused
    import socket
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.2", srv.port))
        connected = True
    except OSError:
        connected = False
    finally:
        s.close()
    assert not connected, "-i 127.0.0.1 but 127.0.0.2:%d accepts connections" % srv.port
