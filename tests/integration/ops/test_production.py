"""Running in production: listeners handed over by systemd (socket activation,
sd_listen_fds), readiness (sd_notify), the binary upgrade on SIGUSR2 under a
continuous load, and the drain that a restart relies on."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import end_upgrades, gone, tcp_listening, wait_for
from conftest import (http_only, IO_TIMEOUT, assert_status, client_tls_context, fetch,
                      free_port, make_docroot, recv_to_eof, running_server, start_server)
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it


def has_ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def v6_also_takes_v4():
    """Whether a socket bound to [::] without IPV6_V6ONLY (what
    systemd-socket-activate makes) also accepts IPv4: net.ipv6.bindv6only."""
    try:
        with open("/proc/sys/net/ipv6/bindv6only") as f:
            return f.read().strip() == "0"
    except OSError:
        return False


def get(port, path="/f.txt", host="127.0.0.1", family=socket.AF_INET):
    with socket.socket(family) as s:
        s.settimeout(IO_TIMEOUT)
        s.connect((host, port))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
        return recv_to_eof(s)


def get_once_listening(port, timeout=15, **kw):
    """get(), retried while the port refuses connections: whoever listens
    (systemd-socket-activate) may not have bound it yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return get(port, **kw)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                ss = shutil.which("ss") and subprocess.run(
                    ["ss", "-ltn"], capture_output=True, text=True).stdout
                raise AssertionError("nothing listens on port %d within %d s; listeners:\n%s"
                                     % (port, timeout, ss or "(no ss to show them)"))
            time.sleep(0.05)


def san_env(build):
    e = dict(os.environ)
    if build.sanitized:
        e.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1")
    return e


# --------------------------------------------------------------------------
# Socket activation

# What systemd-socket-activate listens on (-l), where the test connects, and how
# many sockets gatling is handed.  "dual-stack" is one [::] socket that takes
# IPv4 too, as gatling.socket makes (BindIPv6Only=both).
ACTIVATION = {
    "ipv4": (["127.0.0.1:%d"], [("127.0.0.1", socket.AF_INET)], 1),
    "ipv4+ipv6": (["127.0.0.1:%d", "[::1]:%d"],
                  [("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)], 2),
    "dual-stack": (["[::]:%d"], [("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)], 1),
}


@pytest.mark.skipif(not shutil.which("systemd-socket-activate"),
                    reason="systemd-socket-activate (Debian: systemd) is not installed")
@pytest.mark.parametrize("listen", sorted(ACTIVATION))
def test_socket_activation(build, tmp_path, listen):
    addrs, clients, nsockets = ACTIVATION[listen]
    if listen != "ipv4" and not has_ipv6_loopback():
        pytest.skip("no IPv6 loopback (::1) on this host")
    if listen == "dual-stack" and not v6_also_takes_v4():
        pytest.skip("net.ipv6.bindv6only=1: a [::] socket takes no IPv4 here")
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "activated\n"})
    port = free_port()
    cmd = ["systemd-socket-activate"]
    for a in addrs:
        cmd += ["-l", a % port]
    cmd += [build.binary, "-n", "-p", "1"]  # -p is ignored: the sockets are passed
    proc = subprocess.Popen(cmd, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=san_env(build))
    try:
        # systemd-socket-activate listens first and starts gatling on the first connection
        for host, family in clients:
            r = get_once_listening(port, host=host, family=family)
            assert r.startswith(b"HTTP/1.1 200") and r.endswith(b"activated\n"), (host, r)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        err = proc.stderr.read().decode(errors="replace")
        assert err.count("listening on a passed socket, port %d" % port) == nsockets, err
        assert "AddressSanitizer" not in err and "runtime error" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not shutil.which("systemd-socket-activate"),
                    reason="systemd-socket-activate (Debian: systemd) is not installed")
@pytest.mark.parametrize("named", [False, True], ids=["by-port", "by-name"])
def test_socket_activation_with_workers_https_first(build, tmp_path, named):
    """-W 2 handed an HTTPS socket before the plain one (a socket unit may
    list 443 first): the supervisor knows each socket by its own port (-e),
    or by its name (FileDescriptorName=https, LISTEN_FDNAMES) with -e 0, and
    each serves what its line says."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "activated\n"})
    http, https = free_port(), free_port()
    while https == http:
        https = free_port()
    cmd = ["systemd-socket-activate", "-l", "127.0.0.1:%d" % https, "-l", "127.0.0.1:%d" % http]
    cmd += ["--fdname=https:http"] if named else []
    cmd += [build.binary, "-n", "-W", "2", "-C", os.path.join(pki_dir(), "certs"),
            "-e", "0" if named else str(https)]
    proc = subprocess.Popen(cmd, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=san_env(build))
    try:
        r = get_once_listening(http)
        assert r.startswith(b"HTTP/1.1 200") and r.endswith(b"activated\n"), r
        with socket.create_connection(("127.0.0.1", https), timeout=IO_TIMEOUT) as raw:
            with client_tls_context().wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                data = recv_to_eof(s)
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"activated\n"), data
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        err = proc.stderr.read().decode(errors="replace")
        lines = [l for l in err.splitlines() if "workers listening" in l]
        want = ["2 workers listening on a passed socket, port %d (https) (-i and -p ignored)" % https,
                "2 workers listening on a passed socket, port %d (-i and -p ignored)" % http]
        assert [l.split("): ", 1)[1] for l in lines] == want, err
        assert "AddressSanitizer" not in err and "runtime error" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_listen_pid_of_another_process_is_ignored(gatling):
    # LISTEN_FDS meant for someone else (sd_listen_fds(3)): bind our own port
    srv = gatling(env={"LISTEN_PID": "1", "LISTEN_FDS": "1"})
    assert_status(fetch(srv.port, "/f.txt"), 200, "with a foreign LISTEN_PID")
    assert not any("passed socket" in line for line in srv.errlog), srv.errlog


@pytest.mark.parametrize("fd3,why", [("</dev/null", "not a listening stream socket"),
                                     ("", "not a listening stream socket")])
def test_passed_descriptor_that_is_no_listener(build, tmp_path, fd3, why):
    # LISTEN_PID=$$ then exec: the pid is gatling's own
    sh = 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -n -p 0 -i 127.0.0.1 3%s' % (fd3 or ">&-")
    r = subprocess.run(["sh", "-c", sh, build.binary], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=10, env=san_env(build))
    assert r.returncode == 1 and why in r.stderr, (r.returncode, r.stderr)


@pytest.mark.parametrize("env,why", [
    ("LISTEN_FDS=1000", "LISTEN_FDS=too many: between 1 and"),
    ("LISTEN_FDS=abc", "LISTEN_FDS=?: between 1 and"),
    ("LISTEN_FDS=2x", "LISTEN_FDS=?: between 1 and"),
    ("LISTEN_FDS=-1", "LISTEN_FDS=?: between 1 and"),
    ("LISTEN_FDS=99999999999999999999", "LISTEN_FDS=?: between 1 and"),
    ("LISTEN_FDS=1 GATLING_LISTEN_GROUPS=x", "GATLING_LISTEN_GROUPS does not divide"),
    ("LISTEN_FDS=3 GATLING_LISTEN_GROUPS=2", "GATLING_LISTEN_GROUPS does not divide LISTEN_FDS=3"),
])
def test_bad_listen_fds_value(build, tmp_path, env, why):
    """LISTEN_FDS that is no count of listeners, or groups that do not divide
    it: exit 1 naming it, before any descriptor is looked at."""
    sh = 'LISTEN_PID=$$ %s exec "$0" -n -p 0 -i 127.0.0.1' % env
    r = subprocess.run(["sh", "-c", sh, build.binary], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=10, env=san_env(build))
    assert r.returncode == 1 and "gatling: " + why in r.stderr, (r.returncode, r.stderr)


@pytest.mark.parametrize("kind", ["udp", "unlistened"])
def test_passed_socket_that_does_not_listen(build, tmp_path, kind):
    """A datagram socket, or a stream socket never put to listen, as fd 3:
    not a listening stream socket, exit 1 (accept on it would fail forever)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        sh = 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -n -p 0 -i 127.0.0.1'
        r = subprocess.run(["sh", "-c", sh, build.binary], cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=10, env=san_env(build),
                           close_fds=False, preexec_fn=lambda: os.dup2(s.fileno(), 3))
    finally:
        s.close()
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "descriptor 3 (of LISTEN_FDS=1) is not a listening stream socket" in r.stderr, r.stderr


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
@pytest.mark.parametrize("workers", [1, 2])
def test_readiness_notification(gatling, tmp_path, abstract, workers):
    name = ("@gatling-test-%d-%d" % (os.getpid(), time.monotonic_ns()) if abstract
            else str(tmp_path / "notify"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name[1:] if abstract else name)
    sock.settimeout(15)
    try:
        srv = gatling(args=("-n", "-W", str(workers)), env={"NOTIFY_SOCKET": name},
                      check_fds=False)
        msg = sock.recv(4096).decode()
        assert msg == "READY=1\nMAINPID=%d" % srv.pid, msg
    finally:
        sock.close()


# --------------------------------------------------------------------------
# The binary upgrade

def bench_bg(build, port, extra, secs):
    out = open(os.devnull, "w")
    return subprocess.Popen([os.path.join(build.dir, "bench"), "-q", "-J", "-d", str(secs),
                             "-t", "5"] + extra + ["http://127.0.0.1:%d/f.txt" % port],
                            stdout=subprocess.PIPE, stderr=out, text=True)


def bench_result(p):
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, (p.returncode, out)
    return json.loads(out)


def new_pid(srv, after):
    for line in srv.errlog[after:]:
        if "binary upgrade: started pid" in line:
            return int(line.rsplit(" ", 1)[1])
    return None


def kill_upgraded(srv, pid):
    """After an upgrade test, pass or fail: SIGKILL the old process and the new
    one (pid, or None) if still running, and reap the old."""
    for p in (srv.pid, pid):
        if p and not gone(p):
            os.kill(p, signal.SIGKILL)
    srv.process.wait()
    srv.join()


@http_only
@pytest.mark.parametrize("proto", ["http/1.1", "h2c"])
@pytest.mark.parametrize("workers", [1, 2])
def test_upgrade_under_load_loses_nothing(build, tmp_path, workers, proto):
    """SIGUSR2 twice while two bench loads run (keep-alive, and a connection per
    request; over HTTP/2 ten streams at a time on each keep-alive connection):
    zero errors, each old process drains and exits 0, the last new one serves
    and stops on SIGTERM.  Over HTTP/2 the draining process sends GOAWAY and
    finishes the streams it took; bench sends the ones it refused again on a
    new connection (RFC 9113 8.7: they were never processed)."""
    h2 = ["--h2"] if proto == "h2c" else []
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "upgrade me\n"})
    srv = start_server(build, root, ("-n", "-T", "10", "-W", str(workers)))
    pids = [srv.pid]
    try:
        ka = bench_bg(build, srv.port, ["-c", "20", "-k"] + (h2 + ["--streams", "10"] if h2 else []), 4)
        one = bench_bg(build, srv.port, ["-c", "10"] + h2, 4)
        time.sleep(1)
        for round in range(2):
            mark = len(srv.errlog)
            os.kill(pids[-1], signal.SIGUSR2)
            pid = wait_for(lambda: new_pid(srv, mark), 15, "the new process")
            wait_for(lambda: any("pid %d serves" % pid in l for l in srv.errlog[mark:]), 10,
                     "the new process serving")
            old = pids[-1]
            pids.append(pid)
            wait_for(lambda: gone(old), 15, "the old process (pid %d) draining and exiting" % old)
            time.sleep(0.5)
        assert srv.process.wait(1) == 0, "the first process's exit status"
        r1, r2 = bench_result(ka), bench_result(one)
        for name, r in (("keep-alive", r1), ("one per connection", r2)):
            assert r["errors_total"] == 0 and r["responses"] > 100, (name, r["errors"], r["responses"])
            assert r["status"]["2xx"] == r["responses"], (name, r["status"])
            assert r["protocol"] == ("h2" if h2 else "http/1.1"), (name, r["protocol"])
        assert_status(fetch(srv.port, "/f.txt"), 200, "from the last new process")
        os.kill(pids[-1], signal.SIGTERM)
        wait_for(lambda: gone(pids[-1]), 15, "the last process stopping on SIGTERM")
        text = "\n".join(srv.errlog)
        assert "AddressSanitizer" not in text and "runtime error" not in text, text
    finally:
        end_upgrades(srv, pids)


def test_failed_upgrade_keeps_the_old_one(build, tmp_path):
    """The binary at the start path is broken: the old process says so and goes on."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "still here\n"})
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = str(bindir / "gatling")
    shutil.copy(build.binary, exe)

    class B:  # a Build whose binary is the copy
        pass
    b = B()
    b.__dict__.update(build.__dict__)
    b.binary = exe
    with running_server(b, root, ("-n", "-T", "10"), check_fds=False) as srv:
        os.rename(exe, exe + ".old")
        with open(exe, "w") as f:
            f.write("#!/bin/sh\necho 'broken binary' >&2\nexit 3\n")
        os.chmod(exe, 0o755)
        srv.send_signal(signal.SIGUSR2)
        wait_for(lambda: any("the new process failed" in l for l in srv.errlog), 15,
                 "the old process noticing")
        assert any("broken binary" in l for l in srv.errlog), srv.errlog
        assert_status(fetch(srv.port, "/f.txt"), 200, "after a failed upgrade")


@http_only
def test_upgrade_keeps_relative_paths(build, tmp_path):
    """-c, -l and -q relative to where gatling was started still work in the new
    process (it starts in the start directory, not the document root).  As
    root, -c chroots, and the upgrade is refused with a message instead."""
    make_docroot(str(tmp_path / "site"), {"f.txt": "relative\n"})
    env = None
    if build.sanitized and os.geteuid() == 0:  # LeakSanitizer cannot read /proc in a chroot
        env = {"ASAN_OPTIONS": "abort_on_error=0:detect_leaks=0"}
    srv = start_server(build, str(tmp_path), ("-c", "site", "-l", "access.log", "-q", "error.log",
                                              "-T", "10"), env=env)
    try:
        mark = len(srv.errlog)
        os.kill(srv.pid, signal.SIGUSR2)
        if os.geteuid() == 0:  # -c as root chroots: the binary is out of sight
            wait_for(lambda: any("impossible: chrooted" in l for l in srv.errlog[mark:]), 15,
                     "the refusal")
            r = get(srv.port)
            assert r.endswith(b"relative\n"), r
            os.kill(srv.pid, signal.SIGTERM)
            assert srv.process.wait(5) == 0
            return
        pid = wait_for(lambda: new_pid(srv, mark), 15, "the new process")
        wait_for(lambda: gone(srv.pid), 15, "the old process exiting")
        r = get(srv.port)
        assert r.endswith(b"relative\n"), r
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: gone(pid), 15, "the new process stopping")
        with open(tmp_path / "access.log") as f:
            assert "GET /f.txt" in f.read()
    finally:
        for p in (srv.pid, new_pid(srv, 0) or 0):
            if p and not gone(p):
                os.kill(p, signal.SIGKILL)
        srv.process.wait()


# --------------------------------------------------------------------------
# The drain (SIGHUP, SIGTERM, and the old process of an upgrade)

@pytest.mark.serial
@http_only
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_drain_answers_a_request_already_on_its_way(gatling, sig):
    """An idle keep-alive connection gets one second from the drain's start
    for a request its client may have sent already (gatling.8, SIGNALS): the
    request is sent right after the signal, so that it is in the socket when
    the drain begins or comes the moment after, and is answered, then the
    connection closed.  Waiting for the listener's close before sending it
    raced that second: the serial phase beside two busy loops sent it too
    late for both signals (b'').  Still serial: the second is wall-clock."""
    srv = gatling(args=("-n", "-T", "10"), check_fds=False)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=IO_TIMEOUT)
    s.sendall(b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200") and b"Connection: close" not in first, first
    srv.send_signal(sig)
    s.sendall(b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    data = recv_to_eof(s)
    # one answer, then the close: with Connection: close if the drain had begun when the
    # request was read, without it if the read came first (the grace then closed it)
    assert data.startswith(b"HTTP/1.1 200") and data.count(b"HTTP/1.1 ") == 1, data
    wait_for(lambda: not tcp_listening(srv.port), 10, "the drain begun (listener closed)")
    s.close()
    wait_for(lambda: not srv.alive(), 15, "exit after the drain")


@http_only
def test_drain_closes_idle_connections_after_a_grace(gatling):
    srv = gatling(args=("-n", "-T", "30"), check_fds=False)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=IO_TIMEOUT)
    s.sendall(b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(65536).startswith(b"HTTP/1.1 200")
    t0 = time.monotonic()
    srv.send_signal(signal.SIGHUP)
    s.settimeout(15)
    assert s.recv(100) == b"", "an idle connection is closed, without a response"
    took = time.monotonic() - t0
    # the grace is 1 s; -T 30 would be the alternative (8: a busy machine)
    assert 0.5 < took < 8, "closed after %.2f s, want about 1 s" % took
    s.close()
    wait_for(lambda: not srv.alive(), 15, "exit after the drain")
