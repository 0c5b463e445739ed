"""-W n: worker processes on one port, supervised: restarted when they die,
and told about TERM, HUP and USR1."""
import os
import signal
import socket
import time

from conftest import wait_for, gone
from conftest import assert_status, fetch


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return sorted(int(x) for x in f.read().split())


def test_workers_serve_and_are_restarted(gatling):
    srv = gatling(args=("-W", "2", "-n", "-T", "10"), check_fds=False)
    kids = wait_for(lambda: len(children(srv.pid)) == 2 and children(srv.pid), 10, "2 workers")
    for _ in range(40):  # new connections: SO_REUSEPORT spreads them
        assert_status(fetch(srv.port, "/f.txt"), 200, "through -W 2")
    os.kill(kids[0], signal.SIGKILL)
    new = wait_for(lambda: (lambda c: len(c) == 2 and kids[0] not in c and c)(children(srv.pid)),
                   10, "a replacement for the killed worker")
    assert kids[1] in new, "the surviving worker was replaced too: %s -> %s" % (kids, new)
    for _ in range(20):
        assert_status(fetch(srv.port, "/f.txt"), 200, "after the restart")
    assert any("restarting" in line for line in srv.errlog), srv.errlog


def test_term_stops_every_worker(gatling):
    srv = gatling(args=("-W", "3", "-n"), check_fds=False)
    kids = wait_for(lambda: len(children(srv.pid)) == 3 and children(srv.pid), 10, "3 workers")
    srv.finish()  # SIGTERM to the supervisor: exit status 0 is checked there
    for k in kids:
        assert gone(k), "worker %d outlived the supervisor" % k


def test_hup_closes_listeners(gatling):
    srv = gatling(args=("-W", "2", "-n"), check_fds=False)
    wait_for(lambda: len(children(srv.pid)) == 2, 10, "2 workers")
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: not srv.alive(), 15, "exit after SIGHUP with no connections")
    assert srv.process.returncode == 0, srv.stderr_text()
    s = socket.socket()
    try:
        assert s.connect_ex(("127.0.0.1", srv.port)) != 0, "still accepting after SIGHUP"
    finally:
        s.close()
