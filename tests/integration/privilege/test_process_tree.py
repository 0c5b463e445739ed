"""Issue 69 (and issue 63's item 5): no process outlives its server.  gatling
runs as root with -u nobody as a tree of processes (the -W supervisor and
its workers, each loop's CGI spawner with a keeper per request and the
program under it, the ACME keeper and its client); the top of the tree is
ended without its drain (SIGKILL, or the second SIGTERM, which exits at
once), and then, within the bound gatling.8 states (PROCESSES), no process
of the tree is left -- found by the parent chain recorded while it ran and
by its session, never by name -- and a new gatling binds the same port and
serves.  Each shape holds a CGI request in flight (so a keeper and its
program are in the tree) and runs --acme (a keeper that stays root, a
client that is nobody): on the code before, the root keeper got neither the
death signal (the kernel refuses PR_SET_PDEATHSIG's signal from a parent
that became nobody, as it refuses kill(2)) nor anything else, and lived on
for good; the -W workers lived on and kept the port.  Then SIGTERM under
-u nobody --acme ends gatling within the drain's bound (it waited for good
on a keeper it could not signal, issue 63 item 5), and the keeper killed
with Pebble's order in flight leaves the state directory's lock free.
"""
import fcntl
import os
import pwd
import random
import shutil
import signal
import socket
import time

import pytest

from conftest import free_port, recv_to_eof
from privtools import launch, needs_root, scratch, user

pytestmark = needs_root

NAME = "gatling.test"
CGI_RUN = 5  # s: -Q, how long a CGI may run: a worker's drain waits for its request
TREE_BOUND = CGI_RUN + 10  # s: the drain, then spawners and keepers end at once
ACME_BOUND = 30  # s: an order in flight gets ACME_STOP_GRACE (20 s), then SIGKILL
TERM_BOUND = 10  # s: SIGTERM's drain of an idle server; no order in flight

CGI = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\necho started\nexec sleep %s\n"


def table():
    """{pid: (ppid, session, start time, state)} of every process now."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                f = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(p)] = (int(f[1]), int(f[3]), int(f[19]), f[0])
    return out


def tree(top):
    """top and its descendants by the parent chain: {pid: start time}."""
    t = table()
    found, todo = {}, [top]
    while todo:
        p = todo.pop()
        if p in t and p not in found:
            found[p] = t[p][2]
            todo += [c for c, v in t.items() if v[0] == p]
    return found


def left(recorded, sid):
    """What is still alive (not a zombie) of the recorded tree (the same pid
    with the same start time) or of the session sid."""
    t = table()
    return sorted(p for p, v in t.items() if v[3] != "Z" and
                  ((p in recorded and recorded[p] == v[2]) or v[1] == sid))


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def describe(pids):
    return ", ".join("%d %s" % (p, b" ".join(cmdline(p)).decode(errors="replace")[:60])
                     for p in pids)


def kill_left(pids):
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def get(port, path="/"):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
        return recv_to_eof(s)


def docroot(base, tag):
    www = open_dir_at(base + "/www")
    with open(www + "/index.html", "w") as f:
        f.write("served\n")
    with open(www + "/slow.cgi", "w") as f:
        f.write(CGI % tag)
    os.chmod(www + "/slow.cgi", 0o755)
    return www


def open_dir_at(path):
    os.mkdir(path)
    os.chmod(path, 0o755)
    return path


def acme_args(base, ca, more=()):
    return ["-e", "0", "--acme", "admin@gatling.test", "--acme-ca", ca,
            "--acme-dir", base + "/state", "--acme-names", NAME] + list(more)


def cgi_args(how):
    if how == "cgi-user":
        try:
            pwd.getpwnam("www-data")
        except KeyError:
            pytest.skip("no user www-data to run CGI as")
        return ["-z", "--cgi-user", "www-data"]
    return ["-z"]


def program_running(tag):
    return [p for p in table() if cmdline(p)[:2] == [b"sleep", tag.encode()]]


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def client_up(run, timeout=10):
    """Wait until the ACME client runs below its keeper (by name: only to
    know the tree is whole; what is left is found by pid)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "acme-client" in [comm(p) for p in tree(run.proc.pid)]:
            return
        time.sleep(0.05)
    raise AssertionError("no ACME client below its keeper:\n" + run.text())


def end_tree(run, how):
    """Ends run's top process as how says; the seconds until the last
    process of its tree was gone (fails past the bound)."""
    top = run.proc.pid
    recorded = tree(top)
    if how == "kill":
        os.kill(top, signal.SIGKILL)
    else:  # the second SIGTERM: exit at once
        os.kill(top, signal.SIGTERM)
        time.sleep(0.2)
        os.kill(top, signal.SIGTERM)
    t0 = time.monotonic()
    run.proc.wait(10)
    return recorded, t0


def wait_gone(recorded, sid, t0, bound, what):
    while True:
        rest = left(recorded, sid)
        took = time.monotonic() - t0
        if not rest:
            return took
        if took > bound:
            kill_left(rest)
            raise AssertionError("%s: %.1f s after the top process ended, still alive: %s"
                                 % (what, took, describe(rest)))
        time.sleep(0.05)


def restarts(cwd, port, args):
    """A new gatling binds the same port and serves."""
    with launch(args + ["-p", str(port)], cwd) as again:
        assert again.port == port, again.text()
        assert get(port).startswith(b"HTTP/1.1 200 "), again.text()


def report(what, took):
    print("\nTREE-END %s: the last process ended %.2f s after the top one" % (what, took))


@pytest.mark.parametrize("how", ["kill", "term2"])
@pytest.mark.parametrize("cgi", ["z", "cgi-user"])
@pytest.mark.parametrize("workers", [1, 2])
def test_no_process_outlives_the_top(workers, cgi, how):
    """-u nobody, -W 1 or 2, CGI under -z or --cgi-user with a request in
    flight, --acme (its CA a closed port: the client backs off): the top
    process SIGKILLed or sent two SIGTERMs; no process of the tree left
    within TREE_BOUND (a worker whose supervisor died drains as for SIGTERM:
    it answers the CGI request, cut at -Q), and the port serves again."""
    user()
    tag = str(random.randint(100000, 999999))
    with scratch() as base:
        www = docroot(base, tag)
        port = free_port()
        ca = "https://127.0.0.1:%d/dir" % free_port()
        args = ["-u", "nobody", "-T", "10", "-Q", str(CGI_RUN), "-W", str(workers),
                "-p", str(port)] + cgi_args(cgi) + acme_args(base, ca)
        with launch(args, www) as run:
            assert run.port == port, run.text()
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                c.sendall(b"GET /slow.cgi HTTP/1.1\r\nHost: x\r\n\r\n")
                deadline = time.monotonic() + 10
                while not program_running(tag) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert program_running(tag), run.text()
                client_up(run)
                assert set(program_running(tag)) <= set(tree(run.proc.pid)), run.text()
                recorded, t0 = end_tree(run, how)
                took = wait_gone(recorded, run.proc.pid, t0, TREE_BOUND,
                                 "-W %d, CGI %s, %s" % (workers, cgi, how))
            finally:
                c.close()
        report("-W %d, CGI %s, --acme, %s" % (workers, cgi, how), took)
        restarts(www, port, ["-u", "nobody", "-T", "10", "-W", str(workers)] +
                 cgi_args(cgi) + acme_args(base, ca))


def cluster_url(etcd):
    """--cluster's value for etcd, with the suite's secret= (required since the
    cluster's values are sealed: ops/test_cluster.py's with_secret)."""
    from test_cluster import with_secret
    return with_secret("etcd=" + etcd.url)


def etcd_or_skip(base):
    """A one-member etcd as ops/test_cluster.py starts it (stopped by the caller)."""
    try:
        from test_cluster import ETCD, Etcd
    except ImportError:
        pytest.skip("ops/test_cluster.py's Etcd not importable")
    if not ETCD:
        pytest.skip("needs etcd (Debian's etcd-server: tests/setup.sh)")
    return Etcd(base).start()


@pytest.mark.parametrize("cluster", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_ends_gatling(workers, cluster):
    """Issue 63 item 5: as root with -u nobody --acme (and --cluster), one
    SIGTERM ends gatling within the drain's bound: the serving process,
    nobody, tells its root keeper by closing the keeper's pipe (it waited
    for good for a keeper it could not signal); and the tree goes with it."""
    user()
    with scratch() as base:
        www = docroot(base, "0")
        etcd = etcd_or_skip(base) if cluster else None
        try:
            more = ["--cluster", cluster_url(etcd), "--cluster-name", "t%d" % os.getpid()] \
                if etcd else []
            args = ["-u", "nobody", "-T", "10", "-W", str(workers)] + \
                acme_args(base, "https://127.0.0.1:%d/dir" % free_port(), more)
            with launch(args, www) as run:
                assert run.port, run.text()
                client_up(run)
                recorded = tree(run.proc.pid)
                t0 = time.monotonic()
                os.kill(run.proc.pid, signal.SIGTERM)
                try:
                    run.proc.wait(TERM_BOUND)
                except Exception:
                    kill_left(left(recorded, run.proc.pid))
                    raise AssertionError("-W %d%s: SIGTERM did not end gatling in %d s:\n%s"
                                         % (workers, ", --cluster" if cluster else "",
                                            TERM_BOUND, run.text()))
                top = time.monotonic() - t0
                took = wait_gone(recorded, run.proc.pid, t0, TERM_BOUND, "after SIGTERM")
            report("SIGTERM, -W %d, --acme%s: top %.2f s," % (
                workers, ", --cluster" if cluster else "", top), took)
        finally:
            if etcd:
                etcd.stop()


@pytest.mark.parametrize("how", ["kill", "term2"])
@pytest.mark.parametrize("workers", [1, 2])
def test_cluster_tree(workers, how):
    """The same with --cluster against etcd (its keeper and side process, -u
    nobody's) beside --acme and CGI: nothing left, the port serves again."""
    user()
    tag = str(random.randint(100000, 999999))
    with scratch() as base:
        www = docroot(base, tag)
        etcd = etcd_or_skip(base)
        try:
            port = free_port()
            args = ["-u", "nobody", "-T", "10", "-Q", str(CGI_RUN), "-W", str(workers), "-z"] + \
                acme_args(base, "https://127.0.0.1:%d/dir" % free_port(),
                          ["--cluster", cluster_url(etcd), "--cluster-name", "t%d" % port])
            with launch(args + ["-p", str(port)], www) as run:
                assert run.port == port, run.text()
                client_up(run)
                deadline = time.monotonic() + 10
                while "gatling-cluster" not in [comm(p) for p in tree(run.proc.pid)]:
                    assert time.monotonic() < deadline, "no cluster side process"
                    time.sleep(0.05)
                with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                    c.sendall(b"GET /slow.cgi HTTP/1.1\r\nHost: x\r\n\r\n")
                    deadline = time.monotonic() + 10
                    while not program_running(tag) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    recorded, t0 = end_tree(run, how)
                    took = wait_gone(recorded, run.proc.pid, t0, TREE_BOUND,
                                     "--cluster, -W %d, %s" % (workers, how))
            report("--cluster, --acme, CGI -z, -W %d, %s" % (workers, how), took)
            restarts(www, port, args)
        finally:
            etcd.stop()


@pytest.mark.parametrize("how", ["kill", "term2"])
@pytest.mark.parametrize("workers", [1, 2])
def test_acme_order_in_flight(workers, how):
    """--acme against Pebble, the certificate's download held by the proxy
    (an order in flight) when the top process is SIGKILLed or sent two
    SIGTERMs (which exits at once, -W's supervisor too: it waited for the
    order): the keeper ends its client, which finishes the order within
    ACME_STOP_GRACE, then itself; nothing is left within ACME_BOUND, the
    state directory's lock is free, and a new gatling serves the port."""
    import acmelab
    from acmelab import Fault, FaultProxy, Pebble
    from conftest import test_pki
    if acmelab.missing():
        pytest.skip("%s missing" % ", ".join(acmelab.missing()))
    user()
    with scratch() as base:
        www = docroot(base, "0")
        pki = test_pki()
        shutil.copy(pki + "/ca.pem", base + "/ca.pem")  # the client, nobody, reads it
        os.chmod(base + "/ca.pem", 0o644)
        http, https = free_port(), free_port()
        with Pebble(base, pki, http, https) as pebble, FaultProxy(pki, pebble.acme) as proxy:
            pebble.start()
            f = proxy.add(Fault("delay", "/certZ/", "POST", delay=6))
            args = ["-u", "nobody", "-T", "10", "-W", str(workers), "-p", str(http), "-e",
                    str(https), "--acme", "admin@gatling.test", "--acme-ca", proxy.directory,
                    "--acme-ca-root", base + "/ca.pem", "--acme-dir", base + "/state",
                    "--acme-names", NAME]
            with launch(args, www) as run:
                assert run.port == http, run.text()
                deadline = time.monotonic() + 60
                while not f.hits and time.monotonic() < deadline and run.proc.poll() is None:
                    time.sleep(0.1)
                assert f.hits, "no order reached the certificate's download:\n" + run.text()
                recorded, t0 = end_tree(run, how)
                top = time.monotonic() - t0
                if how == "term2":  # gatling.8: a second SIGTERM exits at once
                    assert top < 3, "the second SIGTERM took %.1f s:\n%s" % (top, run.text())
                took = wait_gone(recorded, run.proc.pid, t0, ACME_BOUND,
                                 "--acme, -W %d, %s, an order in flight" % (workers, how))
            with open(base + "/state/lock") as lock:  # no client holds it
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            report("--acme (Pebble, an order in flight), -W %d, %s" % (workers, how), took)
            restarts(www, http, args)


@pytest.mark.parametrize("workers", [1, 2])
def test_status_lists_the_tree(workers):
    """/server-status?json's "processes": this process, -W's supervisor and
    workers, the CGI spawner, the ACME keeper; each a pid of the tree, in
    the place its parent chain says."""
    import json
    user()
    with scratch() as base:
        www = docroot(base, "0")
        args = ["-S", "-u", "nobody", "-T", "10", "-W", str(workers), "-z"] + \
            acme_args(base, "https://127.0.0.1:%d/dir" % free_port())
        with launch(args, www) as run:
            top = run.proc.pid
            client_up(run)
            resp = get(run.port, "/server-status?json")
            procs = json.loads(resp.partition(b"\r\n\r\n")[2])["processes"]
            t = table()
            loops = [p for p, v in t.items() if v[0] == top and comm(p) == "gatling-worker"] \
                if workers > 1 else [top]
            assert procs["self"] in loops, (procs, loops)
            assert procs["supervisor"] == (top if workers > 1 else 0), procs
            assert sorted(procs["workers"]) == (sorted(loops) if workers > 1 else []), procs
            assert t[procs["cgi_spawner"]][0] == procs["self"], procs
            assert t[procs["acme_keeper"]][0] == top and comm(procs["acme_keeper"]) == \
                "acme-keeper", procs
            assert procs["cluster"] == 0, procs
