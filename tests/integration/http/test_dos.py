"""A Slashdotting, in small: descriptor exhaustion and slow clients degrade
service, they never kill the server or starve the clients that behave."""
import os
import resource
import socket
import time

from conftest import MARGIN, assert_status, fetch, figure, serial


def connect_many(port, n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(2)
        s.connect(("127.0.0.1", port))  # completes in the kernel's backlog
        socks.append(s)
    return socks


def wait_ok(port, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fetch(port, "/f.txt")
            if last is not None and last.status == 200:
                return last
        except OSError as e:
            last = e
        time.sleep(0.05)
    raise AssertionError("no 200 within %.1f s; last: %r" % (timeout, last))


def test_out_of_descriptors_then_recovers(gatling):
    srv = gatling(args=("-T", "10", "-n"), check_fds=False)
    # 40 descriptors: the server has ~8 open, so about 30 connections fit
    resource.prlimit(srv.pid, resource.RLIMIT_NOFILE, (40, 40))
    socks = connect_many(srv.port, 60)
    time.sleep(0.5)  # the server meets EMFILE and must pause, not spin or die
    assert srv.alive(), "gatling died when it ran out of descriptors"
    cpu0 = srv_cpu(srv.pid)
    time.sleep(0.5)
    busy = srv_cpu(srv.pid) - cpu0
    assert busy < 0.3, "gatling spins while out of descriptors (%.2f s CPU in 0.5 s)" % busy
    for s in socks:
        s.close()
    r = wait_ok(srv.port, 10.0)
    assert r.body == b"hello\n"


def srv_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@serial
def test_slow_clients_do_not_starve_others(gatling):
    srv = gatling(args=("-T", "1", "-n"))
    slow = connect_many(srv.port, 200)
    for s in slow:  # slowloris: a head that never ends
        s.sendall(b"GET /f.txt HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n")
    t0 = time.monotonic()
    for _ in range(20):
        r = fetch(srv.port, "/f.txt")
        assert_status(r, 200, "a normal client among 200 slow ones")
    took = time.monotonic() - t0
    figure("20 requests beside 200 stalled clients", took, "s", hi=2.0,
           kind=MARGIN)  # 0.02-0.05 s measured at a load of 20
    time.sleep(2.2)  # -T 1: every stalled connection must be closed by now
    closed = 0
    for s in slow:
        s.settimeout(0.5)
        try:  # a 408 (the head's deadline passed), then the close
            got = s.recv(200)
            closed += got == b"" or (got.startswith(b"HTTP/1.1 408 ") and s.recv(100) == b"")
        except ConnectionResetError:
            closed += 1  # closed with unread input: a reset is a close too
        except socket.timeout:
            pass  # still open
        s.close()
    assert closed == len(slow), "%d of %d stalled connections still open after -T" % (
        len(slow) - closed, len(slow))


def test_connection_flood_open_and_drop(gatling):
    srv = gatling(args=("-T", "5", "-n"))
    for _ in range(5):
        socks = connect_many(srv.port, 300)
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()  # RST: the server may see errors on accept or read
    r = wait_ok(srv.port, 10.0)
    assert r.body == b"hello\n"
