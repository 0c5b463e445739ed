"""Backend pools for -P (issue 45; gatling.8, "Backend pools"): a rule names a
list of backends or a pool defined by --pool, and gatling spreads requests by
weight, least outstanding or a hash, takes a failing member out (passive
failures, active checks), tries a request again elsewhere when RFC 9110 9.2.2
allows, drains a member that leaves a file: pool, and counts it all per
member in /metrics and /server-status.

The backends are real and count what reaches them: two gunicorn applications
(App: the WSGI program below, which writes one line per request it receives
to a log file before it answers, so a killed one's count survives it; it
sleeps on ?sleep=S, holds its answer on ?hold=1 while its directory holds a
file `hold`, answers ?status=N, is cacheable on ?cache=S, answers 503
to everything but its /health while its directory holds a file `sick`, and
to every second request while it holds `flap`)
and two php-fpm masters (Fpm: one on a unix socket, pm static, one on a TCP
port, pm dynamic, each with ping.path=/fpm-ping and an access log).  Which
member answered a client is the X-Backend field each sets.

Load-proof: what is counted is counted exactly (sequential requests under
round robin are deterministic) and waits are for events (a member's state in
/server-status?json); the test that floods and times slow start is serial.
"""
import concurrent.futures
import contextlib
import os
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import threading
import time

import pytest

import appservers
from conftest import (ALARMING, fetch, first_backend_only, free_port, http_only, serial, url,
                      wait_for)
from test_metrics import scrape
from test_proxy import scgi_server, status_counters  # noqa: F401 (a fixture)

POOL_APP = r'''
import itertools, os, time

NAME = os.environ["POOL_NAME"]
LOG = os.environ["POOL_LOG"]
SICK = os.path.join(os.path.dirname(LOG), "sick")
FLAP = os.path.join(os.path.dirname(LOG), "flap")
HOLD = os.path.join(os.path.dirname(LOG), "hold")
TURN = itertools.count()  # next() is atomic under the GIL


def note(environ, n):
    """One line a request, written (O_APPEND, one write) once its body
    (n bytes) is in."""
    line = "%s %s %s %s %d\n" % (environ["REQUEST_METHOD"], environ["PATH_INFO"],
                                 environ.get("QUERY_STRING") or "-",
                                 environ.get("HTTP_X_ID", "-"), n)
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def application(environ, start_response):
    q = dict(p.split("=", 1) for p in environ.get("QUERY_STRING", "").split("&") if "=" in p)
    n = 0
    if environ["REQUEST_METHOD"] in ("POST", "PUT"):
        n = len(environ["wsgi.input"].read())
    note(environ, n)
    sick = os.path.exists(SICK)
    status = "200 OK"
    if environ["PATH_INFO"] == "/health":
        status = "503 Sick" if sick else "200 OK"
    elif sick or (os.path.exists(FLAP) and next(TURN) % 2):
        status = "503 Service Unavailable"
    else:
        if "sleep" in q:
            time.sleep(float(q["sleep"]))
        if "hold" in q:  # until the test removes the file (60 s at most)
            end = time.monotonic() + 60
            while os.path.exists(HOLD) and time.monotonic() < end:
                time.sleep(0.02)
        if "status" in q:
            status = q["status"] + " Chosen"
    body = ("%s %s\n" % (NAME, environ["PATH_INFO"])).encode()
    cc = "max-age=" + q["cache"] if "cache" in q else "no-store"
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body))),
                            ("X-Backend", NAME), ("Cache-Control", cc)])
    return [body]
'''

PHP_WHO = r'''<?php
header("X-Backend: " . getenv("POOL"));
if (isset($_GET["sleep"])) usleep((int)(1000000 * (float)$_GET["sleep"]));
echo getenv("POOL"), "\n";
'''


class App:
    """A gunicorn running POOL_APP on a port of its own."""

    def __init__(self, d, name):
        self.d, self.name = d, name
        d.mkdir(parents=True, exist_ok=True)
        (d / "app.py").write_text(POOL_APP)
        self.logfile = d / "requests.log"
        self.port = free_port()
        self.addr = "127.0.0.1/%d" % self.port  # as a -P member, and as /metrics labels it
        self.proc = None
        self.start()

    def start(self):
        self.proc = appservers.gunicorn(self.d, self.port, env={"POOL_NAME": self.name,
                                                                "POOL_LOG": str(self.logfile)})

    def kill(self):
        appservers.kill(self.proc)

    def hold(self, on):
        """While on, a request with ?hold=1 waits (the test decides when it
        ends, not a sleep the loaded machine may outrun)."""
        self.sick(on, "hold")

    def stop(self):
        """Gone, at a fixture's end: SIGQUIT, gunicorn's quick shutdown.  On
        SIGTERM its gthread worker finishes the connections gatling keeps
        alive and notices its own end at its next 1 s poll: 1.0-1.4 s an app,
        two apps a test, ~30 s of waiting a pass (0.3 s an app with SIGQUIT)."""
        appservers.stop(self.proc, signal.SIGQUIT)

    def sick(self, on, how="sick"):
        if on:
            (self.d / how).write_text("")
        elif (self.d / how).exists():
            (self.d / how).unlink()

    def lines(self):
        """(method, path, query, x-id, body length) of each request received,
        in order."""
        try:
            text = self.logfile.read_text()
        except FileNotFoundError:
            return []
        return [tuple(ln.split(" ")) for ln in text.splitlines()]

    def count(self, since=0, prefix="/p/", xid=None, method=None, length=None):
        return sum(1 for m, p, _, x, n in self.lines()[since:] if p.startswith(prefix)
                   and (xid is None or x == xid) and (method is None or m == method)
                   and (length is None or int(n) == length))

    def mark(self):
        return len(self.lines())


class Fpm:
    """A php-fpm master of its own, pool `name` (its env[POOL]), with
    ping.path=/fpm-ping and an access log of the scripts it ran."""

    def __init__(self, d, name, listen, pm):
        self.d, self.name, self.listen = d, name, listen
        d.mkdir(parents=True, exist_ok=True)
        self.accesslog = d / "access.log"
        self.addr = ("127.0.0.1/%d" % listen if isinstance(listen, int) else "unix:" + listen)
        self.pool = pm + ("ping.path = /fpm-ping\nenv[POOL] = %s\naccess.log = %s\n"
                          "access.format = \"%%m %%r\"\n" % (name, self.accesslog))
        self.proc = None
        self.start()

    def start(self):
        self.proc = appservers.php_fpm(self.d, self.listen, self.pool, name=self.name)

    def stop(self):
        appservers.stop(self.proc)

    def pause(self, on):
        """SIGSTOP (or SIGCONT) to the master and its children: it accepts
        nothing and answers nothing, a hung host."""
        os.killpg(self.proc.pid, signal.SIGSTOP if on else signal.SIGCONT)

    def count(self, suffix=".php"):
        try:
            text = self.accesslog.read_text()
        except FileNotFoundError:
            return 0
        return sum(1 for ln in text.splitlines() if ln.split(" ")[1].split("?")[0].endswith(suffix))


# The pool's policies -- how it picks a member (weights, least outstanding, a
# hash), when a member is down and comes back (passive failures, slow start,
# backup, a file's drain and weights), which request goes again, what it
# counts, what --pool accepts -- are decided in gatling/handlers/proxy_pool.c
# and proxy_be.c, above io/, the same code on every backend: they run on the
# first backend and its sanitizer build (and in the TLS passes), ~65 s a
# backend less.  What the loop delivers to a pool runs on every backend: its
# connect that is refused or cut (a dead member, a POST cut mid-way, a unix
# path with nothing behind it), a held body written again to another member
# (a spooled body's writes once a backend is attached were sigio's bug in
# 84a659a), a body streamed past the hold, and the active checks
# (connections and timers of the pool's own); test_proxy.py's single-backend
# tests of timeouts, streaming and dead backends run on every backend too.
POLICY = ("test_single_backends_as_today", "test_lone_backend_answers_as_it_came",
          "test_spread_by_weight_gunicorn", "test_spread_by_weight_php_fpm",
          "test_least_outstanding_goes_to_the_idle_member",
          "test_hash_keeps_a_url_and_moves_a_third_when_one_comes", "test_hash_on_a_header",
          "test_killed_member_down_after_fails_then_one_probe_then_slow_start",
          "test_failures_within_the_window_not_only_in_a_row",
          "test_cache_fill_goes_again_when_its_member_dies",
          "test_timeout_is_a_504_and_not_tried_again",
          "test_retries_end_at_the_deadline_of_the_first_attempt", "test_failon_statuses",
          "test_member_that_dies_between_head_and_body_is_tried_again",
          "test_drain_by_file", "test_file_weight_change_keeps_the_member",
          "test_backup_only_when_the_primaries_are_down",
          "test_metrics_and_server_status_per_member", "test_workers_each_find_a_dead_member",
          "test_bad_pools_exit_2_with_a_message", "test_good_pools_start")


@pytest.fixture(autouse=True)
def _policies_on_the_first_backend(request):
    first_backend_only(request, POLICY, "the pool's policies sit above io/: on the first backend")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two gunicorn apps, a and b, for the tests that kill nothing."""
    d = tmp_path_factory.mktemp("pair")
    apps = []
    try:
        for n in ("a", "b"):
            apps.append(App(d / n, n))
        yield apps
    finally:
        for a in apps:
            a.stop()


@pytest.fixture
def apps(tmp_path):
    """make(*names): gunicorn apps of this test's own, which it may kill."""
    made = []

    def make(*names):
        for name in names:
            made.append(App(tmp_path / ("app-" + name), name))
        return made[-len(names):]
    try:
        yield make
    finally:
        for a in made:
            a.stop()


@pytest.fixture(scope="module")
def fpms(tmp_path_factory):
    """Two php-fpm pools: fpm-a on a unix socket (pm static, 2 children),
    fpm-b on a TCP port (pm dynamic, up to 3)."""
    d = tmp_path_factory.mktemp("fpms")
    made = []
    try:
        made.append(Fpm(d / "a", "fpm-a", str(d / "a" / "fpm.sock"),
                        "pm = static\npm.max_children = 2\n"))
        made.append(Fpm(d / "b", "fpm-b", free_port(),
                        "pm = dynamic\npm.max_children = 3\npm.start_servers = 1\n"
                        "pm.min_spare_servers = 1\npm.max_spare_servers = 2\n"))
        yield made
    finally:
        for f in made:
            with_cont = f.proc.poll() is None
            if with_cont:
                os.killpg(f.proc.pid, signal.SIGCONT)
            f.stop()


def pooled(gatling, rules, extra=(), pools=(), tree=None):
    """A gatling whose docroot holds .proxy and who.php, with these --pool
    definitions and -P rules, /server-status and /metrics on."""
    args = ["-T", "10", "-S"]
    for p in pools:
        args += ["--pool", p]
    for r in rules:
        args += ["-P", r]
    t = {".proxy": "", "index.html": "static\n", "who.php": PHP_WHO}
    t.update(tree or {})
    return gatling(t, args=tuple(args) + tuple(extra), check_fds=False)


def get(srv, path="/p/x", **kw):
    r = fetch(srv.port, path, timeout=20, **kw)
    return r


def who(srv, path="/p/x", want=200, **kw):
    """The member that answered a GET (its X-Backend), which must be a `want`."""
    r = get(srv, path, **kw)
    assert r.status == want, r
    return r.header("X-Backend")


def members(srv):
    """/server-status?json's "backends", by (pool, backend)."""
    st = status_counters(srv)
    assert "backends" in st, "no \"backends\" in /server-status?json: %s" % sorted(st)
    return {(b["pool"], b["backend"]): b for b in st["backends"]}


def wait_state(srv, pool, addr, states, timeout=15.0):
    """The member's entry once its state is one of states."""
    def now():
        m = members(srv).get((pool, addr))
        return m if m and m["state"] in states else None
    return wait_for(now, timeout, "%s %s in state %s" % (pool, addr, "|".join(states)))


def metric(srv, name, pool, addr):
    return scrape(srv.port)[1].get(name, backend=addr, pool=pool)


def burst(srv, paths, width=8, **kw):
    """The paths fetched `width` at a time; the responses in order."""
    with concurrent.futures.ThreadPoolExecutor(width) as ex:
        return list(ex.map(lambda p: get(srv, p, **kw), paths))


def in_background(fn, *args, **kw):
    """fn(*args, **kw) on a thread; box["r"] its result, box["e"] its exception."""
    box = {}

    def run():
        try:
            box["r"] = fn(*args, **kw)
        except BaseException as e:  # reported by the test that joins
            box["e"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def connections_to(port):
    """Established TCP connections of this host to 127.0.0.1:port (their
    client side: gatling's, towards a backend)."""
    n = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            rem, st = line.split()[2], line.split()[3]
            n += st == "01" and int(rem.rsplit(":", 1)[1], 16) == port
    return n


def write_pool_file(path, lines):
    """Write a file: pool's members; its mtime moves on by a second or more
    each time, so that a rewrite within one second is still a change."""
    old = os.stat(path).st_mtime if os.path.exists(path) else 0
    with open(path, "w") as f:
        f.write("# members\n\n" + "".join(ln + "\n" for ln in lines))
    t = max(time.time(), old + 1)
    os.utime(path, (t, t))


# --------------------------------------------------------------------------
# The fixtures themselves, behind today's single-backend rules

def test_single_backends_as_today(gatling, pair, fpms):
    """Each backend alone behind one rule, as before pools: it answers, and
    its own count (the app's log, php-fpm's access log) sees each request."""
    a, b = pair
    fa, fb = fpms
    srv = pooled(gatling, ["%s/^/p/" % a.addr, "%s/^/q/" % b.addr,
                           "F/%s/^/b/.*\\.php$" % fb.addr, "F/%s:\\.php$" % fa.addr],
                 tree={"b": {"who.php": PHP_WHO}})
    ma, mb, ca, cb = a.mark(), b.mark(), fa.count(), fb.count()
    assert [who(srv, "/p/1") for _ in range(3)] == ["a"] * 3
    r = fetch(srv.port, "/p/post", method="POST", body=b"x" * 10,
              headers=[("Content-Length", "10"), ("X-Id", "single-post")])
    assert r.status == 200 and r.header("X-Backend") == "a", r
    assert who(srv, "/q/1", headers=[("X-Id", "q1")]) == "b"
    assert who(srv, "/who.php") == "fpm-a"
    assert a.count(ma) == 4 and a.count(ma, xid="single-post", method="POST") == 1
    assert b.count(mb, prefix="/q/") == 1 and b.count(mb, prefix="/q/", xid="q1") == 1
    assert who(srv, "/b/who.php") == "fpm-b"
    wait_for(lambda: fa.count() == ca + 1 and fb.count() == cb + 1, 5,
             "a line in each php-fpm's access log")
    r = fetch(srv.port, "/p/s?status=404")
    assert r.status == 404 and r.header("X-Backend") == "a", r
    assert who(srv, "/p/x?cache=5") == "a"


def test_lone_backend_answers_as_it_came(gatling, pair):
    """A rule with one backend "behaves as it always did" (gatling.8 POOLS,
    pool-design.md: "one backend (as today)"): the application's own 503,
    502 or 504 reaches the client with its body and fields (a maintenance
    page, Retry-After), as before pools, not gatling's page for the status."""
    a, _ = pair
    srv = pooled(gatling, ["%s/^/p/" % a.addr])
    for code in (503, 502, 504):
        r = fetch(srv.port, "/p/s?status=%d" % code)
        assert r.status == code and r.header("X-Backend") == "a", r
        assert r.body == b"a /p/s\n", r
    a.sick(True)
    try:
        r = fetch(srv.port, "/p/x")
        assert r.status == 503 and r.header("X-Backend") == "a", r
    finally:
        a.sick(False)


# --------------------------------------------------------------------------
# Balancing

def test_spread_by_weight_gunicorn(gatling, pair):
    """An anonymous list a*1,b*3: 40 GETs, 10 at a and 30 at b by the apps'
    own counts, and /metrics (pool P1) says the same."""
    a, b = pair
    srv = pooled(gatling, ["%s*1,%s*3/^/p/" % (a.addr, b.addr)])
    ma, mb = a.mark(), b.mark()
    seen = [who(srv, "/p/w%d" % i) for i in range(40)]
    assert a.count(ma) == 10 and b.count(mb) == 30, (a.count(ma), b.count(mb), seen)
    assert seen.count("a") == 10
    for app, n in ((a, 10), (b, 30)):
        assert metric(srv, "gatling_backend_requests_total", "P1", app.addr) == n


def test_spread_by_weight_php_fpm(gatling, fpms):
    """Two php-fpm masters (a unix socket and a TCP port) in one FastCGI
    pool, 2:1 by weight, smooth round robin: every 3 requests two at fpm-a
    and one at fpm-b, counted in their access logs."""
    fa, fb = fpms
    srv = pooled(gatling, ["@php/\\.php$"],
                 pools=["php=F/%s*2,%s;slowstart=0" % (fa.addr, fb.addr)])
    ca, cb = fa.count(), fb.count()
    seen = [who(srv, "/who.php?i=%d" % i) for i in range(30)]
    for i in range(0, 30, 3):
        assert sorted(seen[i:i + 3]) == ["fpm-a", "fpm-a", "fpm-b"], seen
    wait_for(lambda: fa.count() - ca == 20 and fb.count() - cb == 10, 5,
             "20 requests in fpm-a's access log and 10 in fpm-b's (%d, %d)"
             % (fa.count() - ca, fb.count() - cb))


def test_least_outstanding_goes_to_the_idle_member(gatling, pair):
    """balance=least: while one member holds a request, every other
    request goes to the idle one."""
    a, b = pair
    srv = pooled(gatling, ["@l/^/p/"], pools=["l=%s,%s;balance=least" % (a.addr, b.addr)])
    ma, mb = a.mark(), b.mark()
    xid = "least-slow-%d" % time.monotonic_ns()  # pair's logs hold other builds' runs
    for x in pair:
        x.hold(True)
    try:
        t, box = in_background(get, srv, "/p/slow?hold=1", headers=[("X-Id", xid)])
        busy = wait_for(lambda: next((x for x in pair if x.count(xid=xid)), None), 10,
                        "the slow request at a member")
        idle = b if busy is a else a
        idle.hold(False)
        seen = [who(srv, "/p/f%d" % i) for i in range(6)]
        assert t.is_alive(), "the slow request ended before the others were sent"
    finally:
        for x in pair:
            x.hold(False)
    t.join(20)
    assert box.get("r") is not None and box["r"].status == 200, box
    assert box["r"].header("X-Backend") == busy.name
    assert seen == [idle.name] * 6, (busy.name, seen)
    assert busy.count(ma if busy is a else mb) == 1


def test_hash_keeps_a_url_and_moves_a_third_when_one_comes(gatling, pair, apps, tmp_path):
    """balance=hash over a file: pool of a and b: each of 150 URLs always at
    the same member; c added to the file (no restart): the keys that move
    all move to c, and about a third of them (rendezvous hashing); b leaves
    the file: its keys, and only they, move."""
    a, b = pair
    (c,) = apps("c")
    listing = str(tmp_path / "h.pool")
    write_pool_file(listing, [a.addr, b.addr])
    srv = pooled(gatling, ["@h/^/p/"], pools=["h=file:%s;balance=hash;slowstart=0" % listing])
    keys = ["/p/k%d?q=%d" % (i, i * 7) for i in range(150)]
    first = [r.header("X-Backend") for r in burst(srv, keys)]
    assert set(first) == {"a", "b"}, "both members hold keys"
    again = [r.header("X-Backend") for r in burst(srv, keys)]
    assert again == first, "a URL moved with nothing changed"
    write_pool_file(listing, [a.addr, b.addr, c.addr])
    wait_state(srv, "h", c.addr, ("up", "slowstart"))
    after = [r.header("X-Backend") for r in burst(srv, keys)]
    moved = [(k, f, t) for k, f, t in zip(keys, first, after) if f != t]
    assert all(t == "c" for _, _, t in moved), "a key moved between old members: %s" % moved
    assert 25 <= len(moved) <= 75, "%d of 150 keys moved to a third member" % len(moved)
    assert [r.header("X-Backend") for r in burst(srv, keys)] == after
    write_pool_file(listing, [a.addr, c.addr])  # b goes: only its keys move
    wait_for(lambda: members(srv).get(("h", b.addr), {"state": "gone"})["state"]
             in ("draining", "gone"), 15, "b draining")
    gone = [r.header("X-Backend") for r in burst(srv, keys)]
    for k, f, t in zip(keys, after, gone):
        assert t == f if f != "b" else t in ("a", "c"), (k, f, t)


def test_hash_on_a_header(gatling, pair):
    """balance=hash:X-User: one user's requests, whatever the path, at one
    member; the path decides without the field."""
    a, b = pair
    srv = pooled(gatling, ["@u/^/p/"], pools=["u=%s,%s;balance=hash:X-User" % (a.addr, b.addr)])
    owners = {}
    for user in ("u%d" % i for i in range(16)):
        got = {who(srv, "/p/page%d" % i, headers=[("X-User", user)]) for i in range(5)}
        assert len(got) == 1, (user, got)
        owners[user] = got.pop()
    assert set(owners.values()) == {"a", "b"}, owners
    assert len({who(srv, "/p/same") for _ in range(5)}) == 1


# --------------------------------------------------------------------------
# Passive health and retries

def test_killed_member_down_after_fails_then_one_probe_then_slow_start(gatling, apps):
    """fails=2: a killed member takes two failures (each GET tried again on
    the other: all 200) and is down; no request reaches it then; after
    down=4 s one request of a burst tries it (one failure more, down again);
    restarted, it comes back on a probe and under slow start (slowstart=60:
    a tenth of its weight at first, so few of the next requests)."""
    a, b = apps("a", "b")
    srv = pooled(gatling, ["@p/^/p/"], pools=["p=%s,%s;fails=2;window=60;down=4;slowstart=60"
                                              % (a.addr, b.addr)])
    assert sorted(who(srv, "/p/%d" % i) for i in range(10)) == ["a"] * 5 + ["b"] * 5
    socks = srv.fds(sockets_only=True)
    b.kill()
    # its kept-alive connections closed (their EOF seen) first: the failures
    # counted below are then the GETs', not a pooled connection's race
    with contextlib.suppress(AssertionError):
        wait_for(lambda: srv.fds(sockets_only=True) < socks, 5, "b's connections closed")
    assert [who(srv, "/p/k%d" % i) for i in range(10)] == ["a"] * 10, "0 errors"
    st = wait_state(srv, "p", b.addr, ("down",), 5)
    assert metric(srv, "gatling_backend_failures_total", "p", b.addr) == 2, st
    assert metric(srv, "gatling_backend_downs_total", "p", b.addr) == 1
    assert metric(srv, "gatling_backend_up", "p", b.addr) == 0
    tried = metric(srv, "gatling_backend_requests_total", "p", b.addr)
    assert [who(srv, "/p/d%d" % i) for i in range(10)] == ["a"] * 10
    assert metric(srv, "gatling_backend_requests_total", "p", b.addr) == tried, "sent to a down one"
    time.sleep(4.5)  # past down=4: the next request tries it (the burst takes far less)
    n = len(srv.errlog)
    assert all(r.status == 200 for r in burst(srv, ["/p/b%d" % i for i in range(8)]))
    assert metric(srv, "gatling_backend_failures_total", "p", b.addr) == 3, "one probe, not 8"
    # out again: still the one time it went down, and one line that says so
    assert metric(srv, "gatling_backend_downs_total", "p", b.addr) == 1
    assert members(srv)[("p", b.addr)]["state"] == "down"
    wait_for(lambda: [ln for ln in srv.errlog[n:] if b.addr in ln], 5, "a line for the probe")
    assert len([ln for ln in srv.errlog[n:] if b.addr in ln]) == 1, srv.errlog[n:]
    b.start()
    time.sleep(4.5)
    seen = [who(srv, "/p/r%d" % i) for i in range(20)]
    assert 1 <= seen.count("b") <= 5, "slow start: %s" % seen
    assert members(srv)[("p", b.addr)]["state"] == "slowstart"
    assert metric(srv, "gatling_backend_up", "p", b.addr) == 1


def test_retries_past_a_dead_member(gatling, apps):
    """A pool with a member that refuses every connection: 40 GETs all 200
    (each second one tried at the dead one first, then at a), its failures
    and retries counted; POSTs too (the connect failed: nothing reached an
    application), each at a once; with tries=1 the same GETs fail."""
    (a,) = apps("a")
    dead = "127.0.0.1/%d" % free_port()
    srv = pooled(gatling, ["@r/^/p/", "@one/^/q/"],
                 pools=["r=%s,%s;fails=1000;window=3600" % (a.addr, dead),
                        "one=%s,%s;fails=1000;window=3600;tries=1" % (a.addr, dead)])
    m = a.mark()
    assert [get(srv, "/p/g%d" % i).status for i in range(40)] == [200] * 40
    assert a.count(m) == 40
    failed = metric(srv, "gatling_backend_failures_total", "r", dead)
    assert 10 <= failed <= 30, "the dead member tried %d times in 40" % failed
    assert metric(srv, "gatling_backend_retries_total", "r", dead) == failed
    assert metric(srv, "gatling_backend_requests_total", "r", dead) == failed
    assert metric(srv, "gatling_backend_retries_total", "r", a.addr) == 0
    for i in range(10):
        r = fetch(srv.port, "/p/post", method="POST", body=b"p" * 100, timeout=20,
                  headers=[("Content-Length", "100"), ("X-Id", "cpost%d" % i)])
        assert r.status == 200, r
        assert a.count(xid="cpost%d" % i, method="POST") == 1
    m = a.mark()
    statuses = [get(srv, "/q/g%d" % i).status for i in range(20)]
    refused = metric(srv, "gatling_backend_failures_total", "one", dead)
    assert 5 <= refused <= 15 and statuses.count(502) == refused, (refused, statuses)
    assert statuses.count(200) == a.count(m, prefix="/q/") == 20 - refused
    assert metric(srv, "gatling_backend_retries_total", "one", dead) == 0


def test_post_to_a_member_that_dies_is_a_502_sent_once(gatling, apps):
    """A POST in flight at a member that is killed: 502, and the other member
    never saw it (the app's count: 1 at the dead one, 0 at the live one); a
    GET after it is still a 200."""
    pair_ = apps("a", "b")
    a, b = pair_
    srv = pooled(gatling, ["@x/^/p/"], pools=["x=%s,%s" % (a.addr, b.addr)])
    t, box = in_background(fetch, srv.port, "/p/post?sleep=5", method="POST", body=b"y" * 1000,
                           timeout=30, headers=[("Content-Length", "1000"), ("X-Id", "dies")])
    victim = wait_for(lambda: next((x for x in pair_ if x.count(xid="dies")), None), 10,
                      "the POST at a member")
    other = b if victim is a else a
    victim.kill()
    t.join(30)
    assert "r" in box, box
    assert box["r"].status == 502, box["r"]
    assert victim.count(xid="dies") == 1 and other.count(xid="dies") == 0
    assert all(get(srv, "/p/after%d" % i).status == 200 for i in range(6))


class SplitApp:
    """An HTTP/1.1 backend that writes each answer's head and body apart, as
    gunicorn does: the body `gap` s after the head (keeping the connection),
    or never (gap None: the connection closed after the head, as an
    application killed between its two writes).  Counts the requests it got
    (socketserver's thread a connection)."""

    def __init__(self, gap, body=b"split body\n"):
        self.gap, self.body, self.got = gap, body, 0
        app = self

        class Conn(socketserver.BaseRequestHandler):
            def handle(self):
                app.serve(self.request)
        self.srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Conn)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        self.addr = "127.0.0.1/%d" % self.port
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def serve(self, c):
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                more = c.recv(4096)
                if not more:
                    return
                buf += more
            buf = buf.split(b"\r\n\r\n", 1)[1]  # GETs only: no body
            self.got += 1
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Backend: split\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(self.body))
            time.sleep(self.gap or 0.2)  # the head alone on the wire first
            if self.gap is None:
                return
            c.sendall(self.body)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def test_member_that_dies_between_head_and_body_is_tried_again(gatling, apps):
    """A member that sends its head and dies before its body (gunicorn writes
    them apart; a SIGKILL between the two is the flood test's one cut GET in
    ~40,000): a GET there goes to the other member and is a whole 200, since
    gatling holds a head that came alone, for a short body of known length,
    until its first body byte.  A member that is slow between its head and its
    body still answers (the held head goes out with the body); a lone member
    that dies there is a 502 (nothing of its answer went out), where the
    client's connection used to be cut after the head."""
    (a,) = apps("a")
    dies, slow = SplitApp(None), SplitApp(0.3)
    try:
        srv = pooled(gatling, ["@d/^/p/", "@s/^/s/", "@one/^/q/"],
                     pools=["d=%s,%s;fails=1000;window=3600" % (dies.addr, a.addr),
                            "s=%s;fails=1000" % slow.addr, "one=%s;fails=1000" % dies.addr])
        m = a.mark()
        for i in range(12):
            r = get(srv, "/p/g%d" % i)
            assert r.status == 200 and r.header("X-Backend") == "a", (i, r, r.body)
            assert r.body == b"a /p/g%d\n" % i, r.body
        assert a.count(m) == 12 and 3 <= dies.got <= 9, (a.count(m), dies.got)
        assert metric(srv, "gatling_backend_retries_total", "d", dies.addr) == dies.got
        r = get(srv, "/s/x")
        assert r.status == 200 and r.body == b"split body\n", r
        got = dies.got
        assert get(srv, "/q/x").status == 502
        assert dies.got == got + 1
    finally:
        dies.close()
        slow.close()


def test_failures_within_the_window_not_only_in_a_row(gatling, apps):
    """pool-design.md: "N failures within S seconds and the member is down".
    A member that fails every second request (503) has its third failure
    within window=60 at its sixth request at the latest, and is down: it
    gets no more than 6 of 24 GETs (all 200, its 503s tried again on a).
    Counting failures in a row instead, it would never be taken out."""
    a, b = apps("a", "b")
    b.sick(True, "flap")
    srv = pooled(gatling, ["@f/^/p/"], pools=["f=%s,%s;fails=3;window=60;down=60"
                                              % (a.addr, b.addr)])
    mb = b.mark()
    assert [who(srv, "/p/%d" % i) for i in range(24)].count("a") >= 18
    assert b.count(mb) <= 6, "a member failing half its requests stays in: %d at b" % (
        b.count(mb))
    assert members(srv)[("f", b.addr)]["state"] == "down"


def test_held_bodies_go_again_others_do_not(gatling, apps):
    """b answers 503 (failon) to all: a PUT whose body gatling still holds
    (30000 bytes, under 64 KiB) goes again to a, whole; a PUT of 100 KiB
    (streamed past) and a POST do not: their 503 is the client's, and a
    never sees them."""
    a, b = apps("a", "b")
    b.sick(True)
    srv = pooled(gatling, ["@h/^/p/"], pools=["h=%s,%s;fails=1000" % (a.addr, b.addr)])
    outcomes = {}
    for kind, method, size in (("held", "PUT", 30000), ("big", "PUT", 100 << 10),
                               ("post", "POST", 1000)):
        for i in range(4):
            xid = "%s%d" % (kind, i)
            r = fetch(srv.port, "/p/put", method=method, body=b"h" * size, timeout=20,
                      headers=[("Content-Length", str(size)), ("X-Id", xid)])
            at_b = b.count(xid=xid, length=size)
            assert at_b <= 1 and a.count(xid=xid) + at_b >= 1, (xid, r)
            if kind == "held" or not at_b:
                assert r.status == 200 and a.count(xid=xid, length=size) == 1, (xid, r)
            else:
                assert r.status == 503 and a.count(xid=xid) == 0, (xid, r)
            outcomes.setdefault(kind, []).append(at_b)
    assert all(sum(v) >= 1 for v in outcomes.values()), "b took none of some kind: %s" % outcomes


def test_cache_fill_goes_again_when_its_member_dies(gatling, apps):
    """The response cache fetches through the pool (issue 45): 6 clients wait
    on one fill of a cacheable page; the member filling it is killed while
    it sleeps: the fill goes again to the other member, and every waiter
    gets a 200 from it (not a 502 each); the page is then served from the
    cache."""
    ab = apps("a", "b")
    a, b = ab
    srv = pooled(gatling, ["@c/^/p/"], tree={".cache": ""},
                 pools=["c=%s,%s;fails=1000" % (a.addr, b.addr)])
    path = "/p/page?sleep=2&cache=60"
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        waiters = [ex.submit(get, srv, path) for _ in range(6)]
        filler = wait_for(lambda: next((x for x in ab if x.count(prefix="/p/page")), None), 10,
                          "the fill at a member")
        other = b if filler is a else a
        time.sleep(0.3)  # the other clients wait on the fill
        filler.kill()
        rs = [w.result() for w in waiters]
    assert [r.status for r in rs] == [200] * 6, rs
    assert {r.header("X-Backend") for r in rs} == {other.name}
    assert other.count(prefix="/p/page") == 1 and filler.count(prefix="/p/page") == 1
    assert who(srv, path) == other.name and other.count(prefix="/p/page") == 1, "not cached"


def test_timeout_is_a_504_and_not_tried_again(gatling, apps):
    """A member that accepts and never answers: each request sent there is a
    504 at -Q 1 (a timeout ends the request), counted as its timeout and
    failure; after fails=3 it is down and the rest are 200."""
    (a,) = apps("a")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # the kernel accepts; nobody answers
    try:
        addr = "127.0.0.1/%d" % silent.getsockname()[1]
        srv = pooled(gatling, ["@t/^/p/"], ("-Q", "1"),
                     pools=["t=%s,%s;fails=3;window=60;down=60" % (a.addr, addr)])
        m = a.mark()
        statuses = [get(srv, "/p/%d" % i).status for i in range(12)]
        assert sorted(set(statuses)) == [200, 504], statuses
        assert statuses.count(504) == 3 and statuses[-4:] == [200] * 4, statuses
        assert a.count(m) == 9
        assert metric(srv, "gatling_backend_timeouts_total", "t", addr) == 3
        assert metric(srv, "gatling_backend_retries_total", "t", addr) == 0
        assert members(srv)[("t", addr)]["state"] == "down"
    finally:
        silent.close()


def test_retries_end_at_the_deadline_of_the_first_attempt(gatling, apps):
    """-Q 3 counts from a request's first attempt: a GET answered 503 after
    2 s by one member goes to the other, which takes 2 s more: the request
    ends as a 504 at the deadline (the second attempt made, then cut), not
    as the second member's answer at 4 s."""
    ab = apps("a", "b")
    srv = pooled(gatling, ["@q/^/p/"], ("-Q", "3"),
                 pools=["q=%s,%s;fails=1000" % (ab[0].addr, ab[1].addr)])
    r = get(srv, "/p/slow?sleep=2&status=503", headers=[("X-Id", "deadline")])
    assert r.status == 504, r
    assert [x.count(xid="deadline") for x in ab] == [1, 1], "tried once at each"


def test_failon_statuses(gatling, apps):
    """A member answering 503 (failon's default): GETs tried again on the
    other, all 200, and it goes down after fails=3; with failon=none its
    503 is the client's answer."""
    a, b = apps("a", "b")
    b.sick(True)
    srv = pooled(gatling, ["@s/^/p/", "@n/^/q/"],
                 pools=["s=%s,%s;fails=3;window=60;down=60" % (a.addr, b.addr),
                        "n=%s,%s;failon=none;fails=1000" % (a.addr, b.addr)])
    mb = b.mark()
    assert [who(srv, "/p/%d" % i) for i in range(12)] == ["a"] * 12
    assert b.count(mb) == 3, "down after 3 answers of 503"
    wait_state(srv, "s", b.addr, ("down",), 5)
    got = [get(srv, "/q/%d" % i).status for i in range(6)]
    assert sorted(got) == [200] * 3 + [503] * 3, got


def test_unreachable_unix_path_is_a_502(gatling, fpms):
    """Members on unix paths that do not exist: a lone one is a 502 each time
    (never taken out, gatling.8); a pool of two, 502 while they fail, then,
    both down, 503 with Retry-After: 1 (gatling.8, POOLS: "finds no backend
    up"); never a hang or a crash.  A pool with one live member serves all."""
    fa, _ = fpms
    tree = {"one": {"who.php": PHP_WHO}, "gone": {"who.php": PHP_WHO}}
    srv = pooled(gatling, tree=tree, rules=["F/unix:/nonexistent/one.sock:^/one/",
                           "F/unix:/nonexistent/a.sock,unix:/nonexistent/b.sock:^/gone/.*\\.php$",
                           "F/unix:/nonexistent/c.sock,%s:\\.php$" % fa.addr])
    gone = []
    for i in range(6):
        assert get(srv, "/one/who.php?i=%d" % i).status == 502
        gone.append(get(srv, "/gone/who.php?i=%d" % i))
    statuses = [r.status for r in gone]
    # tries=3 on two members: each request fails at both, which are down after 3
    assert statuses == [502] * 3 + [503] * 3, statuses
    assert gone[-1].header("Retry-After") == "1", gone[-1]
    assert [who(srv, "/who.php?i=%d" % i) for i in range(6)] == ["fpm-a"] * 6
    assert srv.alive()


# --------------------------------------------------------------------------
# Active checks

def test_active_check_gunicorn(gatling, apps):
    """check=/health: b's check fails (503) and b is out before any client
    request reaches it: 20 GETs all at a; b's log has nothing but checks
    since; one log line for the change; back when its check passes."""
    a, b = apps("a", "b")
    srv = pooled(gatling, ["@c/^/p/"], pools=["c=%s,%s;check=/health;interval=1;fall=2;rise=2;"
                                              "timeout=1;slowstart=0" % (a.addr, b.addr)])
    wait_state(srv, "c", b.addr, ("up",))
    assert sorted(who(srv, "/p/%d" % i) for i in range(4)) == ["a", "a", "b", "b"]
    mb, n = b.mark(), len(srv.errlog)
    b.sick(True)
    wait_state(srv, "c", b.addr, ("down",), 20)
    assert [who(srv, "/p/s%d" % i) for i in range(20)] == ["a"] * 20
    assert b.count(mb) == 0 and b.count(mb, prefix="/health") >= 2
    assert metric(srv, "gatling_backend_checks_failed_total", "c", b.addr) >= 2
    assert metric(srv, "gatling_backend_downs_total", "c", b.addr) == 1
    wait_for(lambda: [ln for ln in srv.errlog[n:] if b.addr in ln], 10, "the line for b's down")
    said = [ln for ln in srv.errlog[n:] if b.addr in ln]
    assert len(said) == 1, "one error-log line for the change: %s" % said
    b.sick(False)
    wait_state(srv, "c", b.addr, ("up", "slowstart"), 20)
    wait_for(lambda: "b" in [who(srv, "/p/back%d" % i) for i in range(10)], 20,
             "b answering again")
    # the line is written as the state changes; the test's reader of gatling's
    # stderr may take a moment under load to have it
    wait_for(lambda: len([ln for ln in srv.errlog[n:] if b.addr in ln]) >= 2, 10,
             "the line for b's way back")
    said = [ln for ln in srv.errlog[n:] if b.addr in ln]
    assert len(said) == 2, "one line each way: %s" % said


def test_active_check_php_fpm_hung(gatling, fpms):
    """check=/fpm-ping (php-fpm's ping.path) over FastCGI: fpm-b stopped
    (SIGSTOP: it accepts nothing, answers nothing) fails its checks within
    timeout=1 and is out; every request then at fpm-a, none a 504; SIGCONT
    and it is back."""
    fa, fb = fpms
    srv = pooled(gatling, ["@php/\\.php$"], pools=[
        "php=F/%s,%s;check=/fpm-ping;interval=1;fall=2;rise=2;timeout=1;slowstart=0"
        % (fa.addr, fb.addr)])
    wait_state(srv, "php", fb.addr, ("up",))
    assert sorted(who(srv, "/who.php") for _ in range(4)) == ["fpm-a"] * 2 + ["fpm-b"] * 2
    cb = fb.count()
    fb.pause(True)
    try:
        wait_state(srv, "php", fb.addr, ("down",), 20)
        assert [who(srv, "/who.php?i=%d" % i) for i in range(10)] == ["fpm-a"] * 10
        assert metric(srv, "gatling_backend_checks_failed_total", "php", fb.addr) >= 2
    finally:
        fb.pause(False)
    assert fb.count() == cb, "fpm-b ran a script while out"
    wait_state(srv, "php", fb.addr, ("up", "slowstart"), 20)


def test_active_check_scgi(gatling, scgi_server):  # noqa: F811
    """check= over SCGI (test_proxy's SCGI server, which answers 202 to all):
    the live member's checks pass, the member on a dead port fails them and
    is down before any request; every request answered by the live one."""
    dead = "127.0.0.1/%d" % free_port()
    live = "127.0.0.1/%d" % scgi_server
    srv = pooled(gatling, ["@s/^/scgi/"], pools=["s=S/%s,%s;check=/ping;interval=1;fall=2"
                                                  % (live, dead)])
    wait_state(srv, "s", dead, ("down",), 20)
    assert members(srv)[("s", live)]["state"] == "up"
    for i in range(6):
        r = get(srv, "/scgi/x%d" % i)
        assert r.status == 202 and b"SCRIPT_NAME=/scgi/x%d" % i in r.body, r
    assert metric(srv, "gatling_backend_requests_total", "s", dead) == 0
    assert metric(srv, "gatling_backend_checks_failed_total", "s", live) == 0


# --------------------------------------------------------------------------
# Drain, backup

def test_drain_by_file(gatling, apps, tmp_path):
    """A member that leaves the file gets no new request while its slow one
    in flight finishes with a 200, then its idle connections close; a file
    that no longer parses keeps the last good list (one error-log line); the
    member written back comes back (under slow start)."""
    ab = apps("a", "b")
    a, b = ab
    listing = str(tmp_path / "d.pool")
    write_pool_file(listing, [a.addr, b.addr])
    srv = pooled(gatling, ["@d/^/p/"], pools=["d=file:%s" % listing])
    # the slow request is held until the drain has been seen: a sleep of a
    # few seconds was once outrun by a loaded machine's reload (the member,
    # its request done, was freed before any look saw it draining)
    for x in ab:
        x.hold(True)
    try:
        t, box = in_background(get, srv, "/p/slow?hold=1", headers=[("X-Id", "drain-slow")])
        leaving = wait_for(lambda: next((x for x in ab if x.count(xid="drain-slow")), None), 10,
                           "the slow request at a member")
        staying = b if leaving is a else a
        staying.hold(False)
        assert connections_to(leaving.port) >= 1, "the slow request's connection is not seen"
        m = leaving.mark()
        write_pool_file(listing, [staying.addr])
        wait_state(srv, "d", leaving.addr, ("draining",), 10)
        assert [who(srv, "/p/n%d" % i) for i in range(10)] == [staying.name] * 10
    finally:
        for x in ab:
            x.hold(False)
    t.join(20)
    assert box.get("r") is not None and box["r"].status == 200, box
    assert box["r"].header("X-Backend") == leaving.name
    assert leaving.count(m) == 0
    wait_for(lambda: connections_to(leaving.port) == 0, 10,
             "gatling's idle connections to the drained member closed")
    n = len(srv.errlog)
    write_pool_file(listing, ["not a member", "127.0.0.1/0"])
    wait_for(lambda: any(listing in ln for ln in srv.errlog[n:]), 10, "an error-log line")
    assert [who(srv, "/p/k%d" % i) for i in range(6)] == [staying.name] * 6
    assert len([ln for ln in srv.errlog[n:] if listing in ln]) == 1, srv.errlog[n:]
    write_pool_file(listing, [a.addr, b.addr])
    wait_state(srv, "d", leaving.addr, ("slowstart", "up"), 10)
    wait_for(lambda: leaving.name in [who(srv, "/p/r%d" % i) for i in range(10)], 20,
             "the member back in the file answering again")


def test_file_weight_change_keeps_the_member(gatling, pair, tmp_path):
    """A member that stays in the file keeps its state; its weight may change:
    a,b equal, then b*3: the next 40 GETs are about 10 at a and 30 at b."""
    a, b = pair
    listing = str(tmp_path / "w.pool")
    write_pool_file(listing, [a.addr, b.addr])
    srv = pooled(gatling, ["@w/^/p/"], pools=["w=file:%s;slowstart=0" % listing])
    assert sorted(who(srv, "/p/%d" % i) for i in range(4)) == ["a", "a", "b", "b"]
    n = len(srv.errlog)
    write_pool_file(listing, [a.addr, b.addr + "*3"])
    # the list is re-read once a second: wait until b takes three in four
    wait_for(lambda: [who(srv, "/p/w%d" % i) for i in range(4)].count("b") == 3, 15,
             "b at weight 3")
    seen = [who(srv, "/p/x%d" % i) for i in range(40)]
    assert 9 <= seen.count("a") <= 11, seen
    assert not [ln for ln in srv.errlog[n:] if b.addr in ln and "down" in ln], srv.errlog[n:]


def test_backup_only_when_the_primaries_are_down(gatling, apps):
    a, b = apps("a", "b")
    srv = pooled(gatling, ["%s,%s+backup/^/p/" % (a.addr, b.addr)])
    mb = b.mark()
    assert [who(srv, "/p/%d" % i) for i in range(10)] == ["a"] * 10
    assert b.count(mb) == 0
    srv2 = pooled(gatling, ["@k/^/p/"], pools=["k=%s,%s+backup;fails=1;down=60"
                                               % (a.addr, b.addr)])
    a.kill()
    assert [who(srv2, "/p/k%d" % i) for i in range(10)] == ["b"] * 10
    assert members(srv2)[("k", a.addr)]["state"] == "down"


# --------------------------------------------------------------------------
# The numbers

BACKEND_SERIES = ("gatling_backend_requests_total", "gatling_backend_failures_total",
                  "gatling_backend_timeouts_total", "gatling_backend_retries_total",
                  "gatling_backend_connections_total", "gatling_backend_reuses_total",
                  "gatling_backend_downs_total", "gatling_backend_checks_failed_total",
                  "gatling_backend_outstanding", "gatling_backend_up",
                  "gatling_backend_request_duration_seconds_count")


def test_metrics_and_server_status_per_member(gatling, pair, fpms):
    """Each member of each pool has every series, labelled pool (a name, or
    P<rule number> for a list) and backend (the address as written), and an
    entry in /server-status?json's "backends"; the counts agree with the
    backends' own."""
    a, b = pair
    fa, _ = fpms
    dead = "127.0.0.1/%d" % free_port()
    srv = pooled(gatling, ["%s,%s/^/p/" % (a.addr, dead), "@n/^/q/", "F/%s:\\.php$" % fa.addr],
                 pools=["n=%s;check=/health;interval=1" % b.addr])
    ma, mb, ca = a.mark(), b.mark(), fa.count()
    assert all(get(srv, "/p/%d" % i).status == 200 for i in range(8))
    assert all(get(srv, "/q/%d" % i).status == 200 for i in range(5))
    assert who(srv, "/who.php") == "fpm-a"
    wait_for(lambda: fa.count() - ca == 1, 5, "fpm-a's access log line")
    want = [("P1", a.addr), ("P1", dead), ("n", b.addr), ("P3", "unix:" + fa.listen)]
    page = scrape(srv.port)[1]
    for pool, addr in want:
        for name in BACKEND_SERIES:
            page.get(name, pool=pool, backend=addr)  # exactly one sample
    assert page.get("gatling_backend_requests_total", pool="P1", backend=a.addr) == a.count(ma)
    assert page.get("gatling_backend_requests_total", pool="n",
                    backend=b.addr) == b.count(mb, prefix="/q/") == 5
    assert page.get("gatling_backend_requests_total", pool="P3",
                    backend="unix:" + fa.listen) == 1
    assert page.get("gatling_backend_up", pool="P1", backend=dead) == 0
    assert page.get("gatling_backend_downs_total", pool="P1", backend=dead) == 1
    assert page.get("gatling_backend_failures_total", pool="P1", backend=dead) == 3
    assert page.get("gatling_backend_up", pool="n", backend=b.addr) == 1
    assert page.get("gatling_backend_outstanding", pool="P1", backend=a.addr) == 0
    assert page.get("gatling_backend_request_duration_seconds_count", pool="n",
                    backend=b.addr) == 5
    ms = members(srv)
    assert sorted(ms) == sorted(want), ms
    for key, m in ms.items():
        assert {"pool", "backend", "state", "requests", "failures", "outstanding"} <= set(m), m
        assert m["state"] in ("up", "down", "checking", "draining", "slowstart"), m
        assert m["requests"] == page.get("gatling_backend_requests_total", pool=key[0],
                                         backend=key[1]), m
    assert ms[("P1", dead)]["state"] == "down" and ms[("P1", dead)]["failures"] == 3
    assert ms[("P1", a.addr)]["outstanding"] == 0


@http_only  # the kernel spreads new TCP connections over the workers
def test_workers_each_find_a_dead_member(gatling, apps):
    """-W 2: each worker keeps its own health state and finds the dead member
    within its first fails=1 requests; /metrics sums the workers: the live
    member's requests are the app's count, gatling_backend_up is the number
    of workers that hold a member up (2 for a, 0 for the dead one)."""
    (a,) = apps("a")
    dead = "127.0.0.1/%d" % free_port()
    srv = pooled(gatling, ["@w/^/p/"], ("-W", "2", "-n"),
                 pools=["w=%s,%s;fails=1;down=3600" % (a.addr, dead)])
    m = a.mark()
    assert [get(srv, "/p/%d" % i).status for i in range(40)] == [200] * 40

    def summed():  # each worker publishes its counts within 0.1 s
        page = scrape(srv.port)[1]
        got = page.get("gatling_backend_requests_total", pool="w", backend=a.addr)
        return page if got == a.count(m) and got >= 40 else None
    page = wait_for(summed, 10, "a's requests summed over the workers (%d at a)" % a.count(m))
    assert page.get("gatling_backend_up", pool="w", backend=a.addr) == 2
    downs = page.get("gatling_backend_downs_total", pool="w", backend=dead)
    assert page.get("gatling_backend_up", pool="w", backend=dead) == 0, downs
    assert downs == page.get("gatling_backend_failures_total", pool="w", backend=dead) == 2


# --------------------------------------------------------------------------
# Bad input: exit 2 and a clear message at start, or a 502

def members_list(n, first=20000):
    return ",".join("127.0.0.1/%d" % (first + i) for i in range(n))


def start_args(build, args, cwd):
    """Start gatling with args on a free port: (None, stderr so far) once it
    listens (then stopped), or (its exit status, its stderr).  Not -V: the
    lists and files are judged at start, after the options."""
    proc = subprocess.Popen([build.binary, "-i", "127.0.0.1", "-p", "0"] + list(args),
                            cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err, deadline = b"", time.monotonic() + 15
    try:
        while b"listening on" not in err and time.monotonic() < deadline:
            chunk = proc.stderr.read1(4096) if proc.poll() is None else proc.stderr.read()
            if not chunk and proc.poll() is not None:
                return proc.returncode, err.decode(errors="replace")
            err += chunk
        assert b"listening on" in err, "neither started nor exited: %r" % err
        return None, err.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        proc.stderr.close()


def bad_inputs(tmp):
    """(args, a word the message must hold: the option, or what is wrong)
    that gatling refuses at start."""
    empty = os.path.join(tmp, "empty.pool")
    open(empty, "w").close()
    junk = os.path.join(tmp, "junk.pool")
    with open(junk, "w") as f:
        f.write("127.0.0.1/8001\nnot a member\n")
    cases = [
        (["--pool", "e="], "--pool"),
        (["--pool", "e=;balance=rr"], "--pool"),
        (["-P", ",/^/app/"], "-P"),
        (["-P", "F/:\\.php$"], "-P"),
        (["--pool", "e=file:" + empty], "--pool"),
        (["--pool", "e=file:" + junk], "--pool"),
        (["--pool", "e=file:/nonexistent/x.pool"], "--pool"),
        (["--pool", "big=" + members_list(33)], "--pool"),
        (["-P", members_list(33) + "/^/x/"], "-P"),
        (["--pool", "a=" + members_list(32), "--pool", "b=" + members_list(32, 21000),
          "-P", "@a/^/a/", "-P", "@b/^/b/", "-P", "127.0.0.1/9/^/c/"], "64"),
        (["--pool", "x=127.0.0.1/9*0"], "--pool"),
        (["--pool", "x=127.0.0.1/9*1000000000"], "--pool"),
        (["--pool", "x=127.0.0.1/9*101"], "--pool"),
        (["-P", "127.0.0.1/9*0,127.0.0.1/10/^/x/"], "-P"),
        (["-P", "127.0.0.1/9*1000000000/^/x/"], "-P"),
        (["--pool", "x=127.0.0.1/9;bogus=1"], "bogus"),
        (["--pool", "x=127.0.0.1/9;balance=random"], "--pool"),
        (["--pool", "x=127.0.0.1/9;fails=0"], "--pool"),
        (["--pool", "x=127.0.0.1/9;tries=11"], "--pool"),
        (["--pool", "x=127.0.0.1/9;slowstart=3601"], "--pool"),
        (["--pool", "x=127.0.0.1/9;check=relative"], "--pool"),
        (["--pool", "x=127.0.0.1/9;interval=0"], "--pool"),
        (["--pool", "x=127.0.0.1/9;failon=200"], "--pool"),
        (["--pool", "x=127.0.0.1/9;window=0"], "--pool"),
        (["--pool", "x=127.0.0.1/9;down=3601"], "--pool"),
        (["--pool", "x=127.0.0.1/9;fails=1001"], "--pool"),
        (["--pool", "x=127.0.0.1/9;fails=3x"], "--pool"),
        (["--pool", "x=127.0.0.1/9;tries=0"], "--pool"),
        (["--pool", "x=127.0.0.1/9;expect=600"], "--pool"),
        (["--pool", "x=127.0.0.1/9;expect=300-200"], "--pool"),
        (["--pool", "x=127.0.0.1/9;balance=hash:"], "--pool"),
        (["--pool", "x=127.0.0.1/9;balance=hash:a(b"], "hash:Field-Name"),
        (["--pool", "x=127.0.0.1/9;balance=hash:X@Y"], "hash:Field-Name"),
        (["--pool", "x=127.0.0.1/9;balance=hash:" + "f" * 70], "hash:Field-Name"),
        (["--pool", "x=127.0.0.1/9;balance=hashx"], "hash:Field-Name"),
        (["--pool", "x=127.0.0.1/9;balance=ha"], "hash:Field-Name"),
        (["--pool", "x=127.0.0.1/9;balance=leas"], "hash:Field-Name"),
        (["--pool", "x=127.0.0.1/9;fall=0"], "--pool"),
        (["--pool", "x=127.0.0.1/9;"], "--pool"),
        (["--pool", "Bad=127.0.0.1/9"], "--pool"),
        (["--pool", "a b=127.0.0.1/9"], "--pool"),
        (["--pool", "=127.0.0.1/9"], "--pool"),
        (["--pool", "x" * 33 + "=127.0.0.1/9"], "--pool"),
        (["--pool", "x=localhost/9"], "--pool"),
        (["--pool", "x=F/unix:relative.sock"], "--pool"),
        (["-P", "@nosuch/^/"], "nosuch"),
        (["--pool", "x=127.0.0.1/9", "-P", "@x"], "-P"),
        (["--pool", "x=127.0.0.1/9", "--pool", "x=127.0.0.1/10", "-P", "@x/^/"], "--pool"),
        (sum((["--pool", "p%d=127.0.0.1/9" % i] for i in range(17)), []), "--pool"),
    ]
    return cases


def test_bad_pools_exit_2_with_a_message(build, tmp_path):
    for args, named in bad_inputs(str(tmp_path)):
        status, err = start_args(build, args, str(tmp_path))
        assert status == 2, (args, status, err)
        assert named in err and not any(a in err for a in ALARMING), (args, err)
        assert len(err.strip().splitlines()) <= 4, (args, err)


def test_good_pools_start(build, tmp_path):
    """The bounds themselves are fine: 32 members a pool, 64 in all, weights
    1 and 100, a 32-character name, 16 pools, every option."""
    listing = tmp_path / "ok.pool"
    listing.write_text("# two\n127.0.0.1/8001*2\n\nunix:/run/x.sock+backup\n")
    for args in (
        ["--pool", "big=" + members_list(32), "-P", "@big/^/x/"],
        ["--pool", "a=" + members_list(32), "--pool", "b=" + members_list(31, 21000),
         "-P", "@a/^/a/", "-P", "@b/^/b/", "-P", "127.0.0.1/9/^/c/"],
        ["-P", "127.0.0.1/9*1,[::1]/10*100+backup/^/x/"],
        ["-P", "F/unix:/run/a.sock,unix:/run/b.sock*3:\\.php$"],
        ["--pool", "x" * 32 + "=127.0.0.1/9", "-P", "@" + "x" * 32 + "/^/"],
        sum((["--pool", "p%d=127.0.0.1/9" % i] for i in range(16)), []),
        ["--pool", "o=S/127.0.0.1/9,127.0.0.1/10*2;balance=least;fails=1000;window=3600;"
         "down=3600;failon=502,504;tries=10;slowstart=0;check=/h;interval=3600;expect=200;"
         "fall=5;rise=5;timeout=3", "-P", "@o/^/"],
        ["--pool", "h=file:%s;balance=hash:X-User;failon=none" % listing, "-P", "@h/^/"],
    ):
        status, err = start_args(build, args, str(tmp_path))
        assert status is None, (args, status, err)
        assert not any(a in err for a in ALARMING), (args, err)


# --------------------------------------------------------------------------
# A flood, one member killed and restarted (serial: it times slow start)

FLOOD_SECONDS = int(os.environ.get("POOL_FLOOD_SECONDS", "20"))
WRK_CONNS = 4  # each of the two wrk runs


def wrk_errors(out):
    """(requests, non-2xx/3xx, socket errors) from wrk's report."""
    n = re.search(r"(\d+) requests in", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return (int(n.group(1)) if n else 0, int(bad.group(1)) if bad else 0,
            sum(int(x) for x in sock.groups()) if sock else 0)


def share_between(samples, t0, t1):
    """The victim's share of the pool's requests between t0 and t1 (samples:
    (time, victim's requests, other's requests, state)), and their number."""
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if len(inside) < 2:
        return None, 0
    dv = inside[-1][1] - inside[0][1]
    do = inside[-1][2] - inside[0][2]
    return (dv / (dv + do) if dv + do else None), dv + do


@serial
@http_only  # wrk speaks HTTP/1.1; the subject is the backends' side: once is enough
def test_flood_kill_one_and_restart(gatling, apps, request):
    """Two wrk runs (GETs of a cached URL through the response cache, and of
    one that is never stored) for FLOOD_SECONDS s (20; the issue's 30 only
    repeats the steady state: kill, down, probe and slow start take ~10 s
    with down=2 and slowstart=4 when gunicorn restarts in 1-3 s, and this runs
    on two builds in the serial phase; POOL_FLOOD_SECONDS=30 by hand).  A POST in flight picks the
    victim: it is killed under the flood, the POST is a 502 counted once by
    the app, no GET fails, the victim is down within the failures in flight,
    gets at most one request per down period, comes back when restarted and
    its share grows by slow start."""
    first_backend_only(request, {"test_flood_kill_one_and_restart"},
                       "the flood runs on the first backend and its sanitizer build")
    wrk = shutil.which("wrk")
    assert wrk, "wrk is not installed: run sh tests/setup.sh as root"
    ab = apps("a", "b")
    a, b = ab
    srv = pooled(gatling, ["@f/^/p/"], tree={".cache": ""},
                 pools=["f=%s,%s;fails=3;window=10;down=2;slowstart=4" % (a.addr, b.addr)])
    assert sorted(who(srv, "/p/w%d" % i) for i in range(2)) == ["a", "b"]
    runs = [subprocess.Popen([wrk, "-t1", "-c%d" % WRK_CONNS, "-d%ds" % FLOOD_SECONDS,
                              "--timeout", "10s", url(srv.port, path)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for path in ("/p/cached?cache=1", "/p/live")]
    t_start = time.monotonic()
    try:
        time.sleep(1.5)
        t, box = in_background(fetch, srv.port, "/p/post?sleep=5", method="POST",
                               body=b"z" * 500, timeout=30,
                               headers=[("Content-Length", "500"), ("X-Id", "flood-post")])
        victim = wait_for(lambda: next((x for x in ab if x.count(xid="flood-post")), None), 10,
                          "the POST at a member")
        other = b if victim is a else a
        victim.kill()
        down = wait_state(srv, "f", victim.addr, ("down",), 10)
        time.sleep(2.5)  # dead past a down period: one probe, not the flood
        still = members(srv)[("f", victim.addr)]
        victim.start()
        samples = []
        while any(r.poll() is None for r in runs):
            ms = members(srv)
            samples.append((time.monotonic(), ms[("f", victim.addr)]["requests"],
                            ms[("f", other.addr)]["requests"], ms[("f", victim.addr)]["state"]))
            time.sleep(0.25)
        t.join(30)
    finally:
        for r in runs:
            if r.poll() is None:
                r.kill()
    outs = [r.communicate()[0] for r in runs]
    for out in outs:
        n, bad, sock = wrk_errors(out)
        assert n > 0 and bad == 0 and sock == 0, "failed GETs under the flood:\n" + out
    assert box.get("r") is not None and box["r"].status == 502, box
    assert victim.count(xid="flood-post") == 1 and other.count(xid="flood-post") == 0
    in_flight = 2 * WRK_CONNS + 2  # wrk's, the POST, a cache fill
    assert down["failures"] <= 3 + in_flight, down
    assert still["requests"] - down["requests"] <= 2, (down, still)
    back = next((s[0] for s in samples if s[3] != "down"), None)
    assert back is not None, "never back: %s" % samples[-3:]
    assert back + 4 + 1 <= samples[-1][0], "back too late to see slow start (%.1f s of %d)" % (
        back - t_start, FLOOD_SECONDS)
    # its first second back, or up to two when the flood brought fewer than 20
    # requests in one (19 beside two busy loops once); slow start's weight is
    # at most a half at 2 s of 4, a share of a third, so early < 0.35 holds
    for span in (1, 1.25, 1.5, 1.75, 2):
        early, n1 = share_between(samples, back, back + span)
        if n1 >= 20:
            break
    late, n2 = share_between(samples, back + 4.2, samples[-1][0])
    print("flood: %s GETs; down at %d failures; %d requests while down; back %.1f s after "
          "the start; share %.2f in its first second back (or two), %.2f after slow start"
          % ("+".join(str(wrk_errors(o)[0]) for o in outs), down["failures"],
             still["requests"] - down["requests"], back - t_start, early or -1, late or -1))
    assert n1 >= 20 and n2 >= 20, (n1, n2)
    assert early is not None and late is not None and early < 0.35 < late, (early, late)
    assert members(srv)[("f", victim.addr)]["state"] == "up"
    assert metric(srv, "gatling_backend_failures_total", "f", other.addr) == 0
