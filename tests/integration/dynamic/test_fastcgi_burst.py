"""Idle FastCGI connections never starve php-fpm (issue 78, item 7).  php-fpm gives a
connection one of its children until it closes; a burst of 1,000 clients against 16
children opens more connections than there are children (the rest wait in its backlog),
and the connections gatling then keeps idle each hold a child.  A request whose new
connection sits in the backlog behind them waited out -Q (19-22 of 1,000 got 504, while
nginx answered all).  bench (the real load generator) sends two bursts of 1,000 clients,
one request each, a second apart: every request is answered, none waits for -Q, and the
idle connections left afterwards are fewer than the children; a pool's idle= caps them."""
import json
import os
import subprocess
import threading
import time

import pytest

import appservers
from appservers import stop
from conftest import fetch, http_only

# the head and a first line at once (an answered request is off gatling's list of new
# connections waiting), the rest after ms milliseconds
PHP = (b"<?php while (ob_get_level()) ob_end_flush(); echo \"start\\n\"; flush();\n"
       b"usleep(1000 * (int)($_GET['ms'] ?? 20)); echo 'ok';\n")
CHILDREN = 16


@pytest.fixture(scope="module")
def fpm16(tmp_path_factory):
    d = tmp_path_factory.mktemp("fpm16")
    proc = appservers.php_fpm(d, pool="pm = static\npm.max_children = %d\n"
                              "listen.backlog = 4096\npm.status_path = /fpm-status\n" % CHILDREN)
    try:
        yield str(d / "fpm.sock")
    finally:
        stop(proc)


def burst(build, port, n=1000):
    p = subprocess.run([os.path.join(build.dir, "bench"), "-J", "-q", "-c", str(n), "-n",
                        str(n), "-t", "30", "http://127.0.0.1:%d/slow.php" % port],
                       capture_output=True, text=True, timeout=120)
    assert p.stdout.strip(), p.stderr
    return json.loads(p.stdout)


def counters(srv):
    return json.loads(fetch(srv.port, "/server-status?json").body)


@http_only  # the load is bench's HTTP/1.1: one pass is enough
@pytest.mark.parametrize("pool", ["", ";idle=4"], ids=["default", "idle4"])
def test_burst_of_slow_clients_all_answered(build, gatling, fpm16, pool):
    args = ["-T", "30", "-S", "-Q", "10", "-N", "4000"]
    if pool:
        args += ["--pool", "fpm=F/unix:%s%s" % (fpm16, pool), "-P", r"@fpm/\.php$",
                 "-P", "@fpm/^/fpm-status$"]
    else:
        args += ["-P", r"F/unix:%s:\.php$" % fpm16]
    srv = gatling({".proxy": "", "slow.php": PHP}, args=tuple(args), check_fds=False)
    for wave in range(2):
        r = burst(build, srv.port)
        assert r["responses"] == 1000 and r["errors_total"] == 0, (wave, r["errors"], r)
        assert r["status"]["2xx"] == 1000, (wave, r["status"])
        # 1,000 x 20 ms on 16 children: ~1.3 s; a starved request would wait -Q (10 s)
        assert r["latency_us"]["max"] < 8e6, (wave, r["latency_us"])
    st = counters(srv)
    assert st.get("backend_504", 0) == 0, st
    if pool:  # the connections to php-fpm's socket left open: the idle ones, at most 4
        def open_ones():
            """php-fpm's ends whose peer is still open (ss's peer inode 0: a
            connection gatling closed that the child has not closed yet, as
            make check-all saw beside the previous test's)."""
            p = subprocess.run(["ss", "-xH", "state", "connected", "src", fpm16],
                               capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            return [ln for ln in p.stdout.splitlines() if ln.split()[-1] != "0"]
        end = time.monotonic() + 5
        while len(open_ones()) > 4 and time.monotonic() < end:
            time.sleep(0.1)
        assert len(open_ones()) <= 4, ("idle=4", open_ones())


@http_only
def test_request_just_behind_the_children_is_answered(gatling, fpm16):
    """The window itself: every child busy with a 600 ms request (answered at once, its
    body ending after 600 ms), one more request comes 30 ms before they end, on a new connection that waits in php-fpm's backlog; when the
    16 end, their connections must not all be kept idle (each holding its child) while it
    waits: it is answered in about 600 ms, not after -Q (8 s)."""
    srv = gatling({".proxy": "", "slow.php": PHP},
                  args=("-T", "30", "-S", "-Q", "8", "-P", r"F/unix:%s:\.php$" % fpm16),
                  check_fds=False)
    fetch(srv.port, "/slow.php?ms=1")  # php-fpm warm
    out = []

    def one(ms):
        t0 = time.monotonic()
        r = fetch(srv.port, "/slow.php?ms=%d" % ms, timeout=20)
        out.append((ms, r.status, time.monotonic() - t0))
    busy = [threading.Thread(target=one, args=(600,)) for _ in range(CHILDREN)]
    for t in busy:
        t.start()
    time.sleep(0.57)
    last = threading.Thread(target=one, args=(1,))
    last.start()
    for t in busy + [last]:
        t.join(30)
    assert sorted(st for _, st, _ in out) == [200] * (CHILDREN + 1), out
    took = [t for ms, _, t in out if ms == 1][0]
    assert took < 4, ("the request behind the children waited", took, out)
