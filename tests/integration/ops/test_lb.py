"""HAProxy in front of three gatling hosts in a network lab (issue 24): load through it
while one gatling is drained (SIGHUP) and another upgraded (SIGUSR2), with zero failed
requests, and the per-address limits seeing the real clients.

The lab (bench/netlab) has six hosts: lb (Debian's haproxy), g1, g2 and g3 (a gatling each,
`-y http -Y <lb's address> -k /healthz -g 3`), c1 and c2 (bench).  haproxy runs
dist/haproxy.cfg's `defaults` and `backend gatling` as they are, the servers' addresses
replaced by the lab's: PROXY v2 to every gatling, a check of /healthz every second, down
after two failures (fall 2), so a draining host leaves the rotation within about 2 s, inside
its 3 s grace.  Around them the test writes its own `global` (a stats socket, the log on
stdout) and frontends, and a second backend for the -K test.

Root and network namespaces are needed (skipped otherwise), and haproxy.  The lab does not
depend on the IO backend or the scheme: the first plain build's gatling and bench are used,
and run-check runs the module once (ONCE), in its serial phase: a draining host must leave
the rotation within its grace, a window in wall-clock time.
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types

import pytest

from conftest import wait_for
from conftest import BUILD_DIR, BUILDS, ROOT

PLAIN = [b for b in BUILDS if not b.endswith("-san")] or BUILDS
BDIR = os.path.join(BUILD_DIR, PLAIN[0]) if PLAIN else None
sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchkit import benchlib as bl  # noqa: E402

GATLINGS = ("g1", "g2", "g3")
CLIENTS = ("c1", "c2")
CAP_PORT = 8081  # a fourth gatling, on g3, with -K 5, behind a frontend of its own


def _can_netns():
    if os.geteuid() != 0:
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.serial,
    pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed "
                       "(apt-get install haproxy; tests/setup.sh does)"),
]
needs_lab = pytest.mark.skipif(
    not _can_netns() or not BDIR or not os.access(os.path.join(BDIR, "bench"), os.X_OK),
    reason="needs root, ip netns and a build with bench and gatling")

from benchkit import haproxy as LB  # noqa: E402  (bench/lb's haproxy: the configuration from dist, its stats)
DIST, HEALTH, GRACE = LB.DIST, LB.HEALTH, LB.GRACE

# after bench/lb's haproxy configuration (dist/haproxy.cfg's defaults and backend gatling,
# the servers at the lab's addresses, a frontend on lb:80): a frontend of its own for the
# gatling with -K 5
CAPPED = """\
frontend capped
    mode http
    bind %(lb)s:%(cap)d
    default_backend capped

backend capped
    mode http
    option httpchk
    http-check send meth GET uri %(health)s ver HTTP/1.1 hdr Host lb
    server k1 %(g3)s:%(cap)d send-proxy-v2 check inter 1s fall 2 rise 2
"""


class Haproxy:
    """haproxy on the lab's host lb (its address lb_addr) in front of servers ({"g1":
    address, ...}: bench/lb's configuration, sections of extra after it), its stdout and
    stderr (the log, the server state changes) in a file, its stats socket for `show
    stat`."""

    def __init__(self, host, tmp, lb_addr, servers, extra=""):
        self.sock = str(tmp / "haproxy.sock")
        self.out = tmp / "haproxy.out"
        self.cfg = tmp / "haproxy.cfg"
        self.cfg.write_text(LB.haproxy_config(lb_addr, servers, self.sock, log_stdout=True,
                                              extra=extra))
        chk = subprocess.run(["haproxy", "-c", "-f", str(self.cfg)], capture_output=True,
                             text=True)
        assert chk.returncode == 0, chk.stdout + chk.stderr
        with open(self.out, "wb") as f:
            self.p = bl.spawn(host.argv(["haproxy", "-db", "-f", str(self.cfg)]),
                              stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)

    def stat(self):
        """{(proxy, server): row} from `show stat` (status, chkdown, hrsp_2xx, ...)."""
        return LB.haproxy_stat(self.sock)

    def status(self, backend, server):
        return self.stat()[(backend, server)]["status"]

    def wait_up(self, timeout=10):
        LB.haproxy_wait_up(self.sock, timeout)

    def text(self):
        return self.out.read_text(errors="replace")

    def stop(self):
        bl.stop_session(self.p)


class Gatling:
    """One gatling on a lab host, serving docroot, its access log in a file, behind the
    balancer at lb_addr (PROXY headers on its plain port, and on its HTTPS port tls_port
    if given, else no HTTPS); env: more environment.  The upgrade (SIGUSR2) leaves the pid
    of the process that serves in self.pid."""

    def __init__(self, host, addr, port, lb_addr, docroot, tmp, extra=(), tls_port=None,
                 env=None):
        self.name = "%s:%d" % (host.name, port)
        self.log = tmp / ("access-%s-%d.log" % (host.name, port))
        self.err = tmp / ("error-%s-%d.log" % (host.name, port))
        tls = ["-e", str(tls_port), "-y", "http,https"] if tls_port else ["-E", "-y", "http"]
        argv = [os.path.join(BDIR, "gatling"), "-i", addr, "-p", str(port)] + tls + [
            "-H", "-T", "30", "-Y", lb_addr, "-k", HEALTH, "-g", str(GRACE),
            "-l", str(self.log)] + list(extra)
        self.p, _, _ = bl.start_gatling(host.argv(argv), str(self.err), cwd=docroot,
                                        env=dict(os.environ, **(env or {})))
        self.pid = self.p.pid  # ip netns exec execs gatling: the same process

    def errlog(self):
        return self.err.read_text(errors="replace").splitlines()

    def upgrade(self, timeout=10):
        """SIGUSR2; return once the new process serves and the old one is gone."""
        mark = len(self.errlog())
        os.kill(self.pid, signal.SIGUSR2)
        new = wait_for(lambda: _new_pid(self.errlog()[mark:]), timeout, "the new process")
        wait_for(lambda: any("pid %d serves" % new in ln for ln in self.errlog()[mark:]),
                 timeout, "the new process serving")
        wait_for(lambda: self.p.poll() is not None, timeout, "the old process exiting")
        self.pid = new
        return new

    def log_lines(self):
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def stop(self):
        if self.pid != self.p.pid and not _gone(self.pid):
            os.kill(self.pid, signal.SIGTERM)
            try:
                wait_for(lambda: _gone(self.pid), 5, "the upgraded gatling stopping")
            except AssertionError:
                os.kill(self.pid, signal.SIGKILL)
        bl.stop_session(self.p)


def _new_pid(lines):
    for ln in lines:
        if "binary upgrade: started pid" in ln:
            return int(ln.rsplit(" ", 1)[1])
    return None


def _gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture(scope="module")
def lb(tmp_path_factory):
    """The lab with haproxy on lb, gatling on g1..g3 (and the -K 5 one on g3:8081), all
    checks UP; stopped and the lab removed afterwards."""
    from benchkit import netlab
    tmp = tmp_path_factory.mktemp("lb")
    os.chmod(str(tmp), 0o755)
    www = tmp / "www"
    www.mkdir()
    (www / "1k.html").write_bytes(b"x" * 1024)
    with open(www / "big.bin", "wb") as f:  # more than all the buffers on the way hold
        f.truncate(64 << 20)
    lab = netlab.Lab(["lb"] + list(GATLINGS) + list(CLIENTS), lab="lbtest")
    procs = []
    try:
        addrs = {h.name: h.addrs[0] for h in lab.hosts}
        gs = {g: Gatling(lab.host(g), addrs[g], 80, addrs["lb"], str(www), tmp)
              for g in GATLINGS}
        procs += gs.values()
        capped = Gatling(lab.host("g3"), addrs["g3"], CAP_PORT, addrs["lb"], str(www), tmp,
                         extra=("-K", "5", "-B", "0"))
        procs.append(capped)
        sections = CAPPED % {"lb": addrs["lb"], "cap": CAP_PORT, "g3": addrs["g3"],
                             "health": HEALTH}
        hp = Haproxy(lab.host("lb"), tmp, addrs["lb"], {g: addrs[g] for g in GATLINGS},
                     extra=sections)
        procs.append(hp)
        hp.wait_up()
        yield types.SimpleNamespace(lab=lab, addrs=addrs, gatlings=gs, capped=capped,
                                    haproxy=hp, tmp=tmp)
    finally:
        # at once: each gatling serves out its -g grace on SIGTERM (3 s), one after another 9 s
        with concurrent.futures.ThreadPoolExecutor(max(1, len(procs))) as ex:
            list(ex.map(lambda p: p.stop(), procs))
        lab.down()


def bench_bg(host, args, url):
    """bench -J on a lab host in the background; a function that waits for it and returns
    its report."""
    argv = host.argv([os.path.join(BDIR, "bench"), "-q", "-J", "-t", "10"] + list(args) + [url])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = {}

    def reader():
        out["stdout"], out["stderr"] = p.communicate(timeout=120)
    t = threading.Thread(target=reader, daemon=True)
    t.start()

    def result():
        """The report, with bench's exit status as "exit" (not 0 when requests failed)."""
        t.join(130)
        try:
            rep = json.loads(out["stdout"])
        except (KeyError, ValueError):
            raise AssertionError((argv, p.returncode, out.get("stderr")))
        rep["exit"] = p.returncode
        return rep
    return result


def access_hosts(lines, path):
    """The client addresses of the access log lines for path."""
    return [ln.split(" ")[0] for ln in lines if ('"GET %s ' % path) in ln]


@needs_lab
def test_limits_see_the_real_clients(lb):
    """-K 5 on the gatling behind frontend `capped`: c1's sixth concurrent connection
    through haproxy is refused (503), while c2 is served; the proxy's own address is
    never what counts."""
    url = "http://%s:%d/1k.html" % (lb.addrs["lb"], CAP_PORT)
    # five connections from c1, each with a large response in flight that c1 does not
    # read, so that haproxy's connection to the server stays busy (an idle one haproxy
    # may close or keep as it likes)
    holder = subprocess.Popen(lb.lab.host("c1").argv([sys.executable, "-c", HOLDER,
                                                      lb.addrs["lb"], str(CAP_PORT), "5"]),
                              stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.split() == ["200"] * 5, line
        sixth = one_request(lb.lab.host("c1"), url)
        other = one_request(lb.lab.host("c2"), url)
        assert sixth == "503", "c1's sixth connection: %s" % sixth
        assert other == "200", "c2 while c1 holds five: %s" % other
    finally:
        holder.stdin.close()
        holder.wait(10)
    # the 503 is gatling's (haproxy counts it as the server's answer), refused before a
    # request was read, so not in the access log; the log names the clients, never lb
    k1 = lb.haproxy.stat()[("capped", "k1")]
    assert int(k1["hrsp_5xx"]) == 1 and int(k1["hrsp_2xx"]) == 6, k1
    lines = lb.capped.log_lines()
    assert access_hosts(lines, "/1k.html") == [lb.addrs["c2"]], lines
    assert access_hosts(lines, "/big.bin") == [lb.addrs["c1"]] * 5, lines
    assert set(access_hosts(lines, HEALTH)) == {lb.addrs["lb"]}, lines


HOLDER = r"""
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks, got = [], []
for _ in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect((host, port))
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: lb\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(1024)
        if not chunk:
            break
        buf += chunk
    got.append(buf.split(b" ", 2)[1].decode() if buf else "closed")
    socks.append(s)  # and read no further: the response stays in flight
print(" ".join(got), flush=True)
sys.stdin.read()
"""


def one_request(host, url):
    """The status of one GET on a new connection from host, as curl prints it."""
    r = subprocess.run(host.argv(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                  "--max-time", "5", url]),
                       capture_output=True, text=True, timeout=20)
    return r.stdout.strip()


@needs_lab
def test_drain_and_upgrade_under_load(lb):
    """Load from c1 and c2 (keep-alive and a connection per request, open loop) for 14 s;
    g1 gets SIGHUP (its check fails, haproxy takes it out, it drains and exits 0), g2
    gets SIGUSR2 (a new process takes its sockets).  No request fails; every gatling
    logged the clients' addresses, not haproxy's; haproxy saw g1 go DOWN."""
    hp, gs, addrs = lb.haproxy, lb.gatlings, lb.addrs
    url = "http://%s/1k.html" % addrs["lb"]
    loads = {}
    for c in CLIENTS:
        loads[c + " keep-alive"] = bench_bg(lb.lab.host(c), ["-k", "-c", "16", "-R", "200",
                                                             "-n", "2800"], url)
        loads[c + " short-lived"] = bench_bg(lb.lab.host(c), ["-c", "8", "-R", "50",
                                                              "-n", "700"], url)
    time.sleep(2)
    g1 = gs["g1"]
    g1_served_before = len(access_hosts(g1.log_lines(), "/1k.html"))
    t_hup = time.monotonic()
    os.kill(g1.pid, signal.SIGHUP)
    wait_for(lambda: hp.status("gatling", "g1").startswith("DOWN"), GRACE,
             "haproxy marking g1 DOWN within the grace")
    t_down = time.monotonic() - t_hup
    time.sleep(0.3)  # the requests in flight at that moment finish
    g1_2xx_at_down = int(hp.stat()[("gatling", "g1")]["hrsp_2xx"])
    assert g1.p.wait(15) == 0, "g1's exit status after SIGHUP"
    t_exit = time.monotonic() - t_hup
    time.sleep(1)
    new = gs["g2"].upgrade()
    results = {name: r() for name, r in loads.items()}

    # zero failed requests, in every load
    for name, rep in results.items():
        assert rep["errors_total"] == 0, (name, rep["errors"])
        assert all(v == 0 for v in rep["errors"].values()), (name, rep["errors"])
        assert rep["responses"] == rep["requests"] > 0, (name, rep["requests"], rep["responses"])
        assert rep["status"]["2xx"] == rep["responses"], (name, rep["status"])
        assert rep["exit"] == 0, (name, rep["exit"])
    # g1: failed its check during the grace, was taken out before its listener closed,
    # got no request from haproxy after that, and exited
    assert t_down < GRACE < t_exit, (t_down, t_exit)
    st = hp.stat()
    assert st[("gatling", "g1")]["status"].startswith("DOWN")
    assert int(st[("gatling", "g1")]["chkdown"]) >= 1
    assert int(st[("gatling", "g1")]["hrsp_2xx"]) == g1_2xx_at_down
    assert int(st[("gatling", "g1")]["hrsp_5xx"]) == 0
    g1_lines = g1.log_lines()
    assert any(ln.startswith(addrs["lb"] + " ") and '"GET %s ' % HEALTH in ln and '" 503 ' in ln
               for ln in g1_lines), "no failed check in g1's log"
    assert len(access_hosts(g1_lines, "/1k.html")) >= g1_served_before > 0
    assert "Server gatling/g1 is DOWN" in hp.text(), hp.text()[-3000:]
    # g2: upgraded without leaving the rotation (no grace needed: the sockets stay open),
    # the new process serving
    for g in ("g2", "g3"):
        assert st[("gatling", g)]["status"] == "UP", (g, st[("gatling", g)])
        assert int(st[("gatling", g)]["chkdown"]) == 0, (g, st[("gatling", g)])
        assert int(st[("gatling", g)]["hrsp_5xx"]) == 0, (g, st[("gatling", g)])
    assert not _gone(new)
    # every gatling saw the clients, never haproxy, for the page (haproxy: only checks)
    for g in GATLINGS:
        hosts = set(access_hosts(gs[g].log_lines(), "/1k.html"))
        assert hosts == {addrs["c1"], addrs["c2"]}, (g, hosts)
        checks = set(access_hosts(gs[g].log_lines(), HEALTH))
        assert checks == {addrs["lb"]}, (g, checks)
    served = sum(len(access_hosts(gs[g].log_lines(), "/1k.html")) for g in GATLINGS)
    total = sum(r["responses"] for r in results.values())
    assert served == total, (served, total)
    print("g1 DOWN after %.2f s, exited after %.2f s; g2 now pid %d; %s" % (
        t_down, t_exit, new,
        {n: (r["responses"], r["latency_us"]["p99"]) for n, r in results.items()}))


def test_dist_config_is_the_one_tested():
    """dist/haproxy.cfg is what the lab test runs (its defaults and backend gatling) and
    is a valid configuration for this haproxy; its header names the gatling options the
    test gives (-k, -g)."""
    text = open(DIST).read()
    assert "-k %s -g %d" % (HEALTH, GRACE) in text
    backend = LB.dist_section("backend gatling")
    assert "    http-check send meth GET uri %s ver HTTP/1.1 hdr Host lb" % HEALTH in backend
    servers = [ln.split() for ln in backend if ln.split()[0] == "server"]
    assert [w[1] for w in servers] == list(GATLINGS)
    assert all("send-proxy-v2" in w and "check" in w for w in servers), servers
    r = subprocess.run(["haproxy", "-c", "-f", DIST], capture_output=True, text=True)
    assert r.returncode == 0 and "WARNING" not in r.stdout + r.stderr, r.stdout + r.stderr


@needs_lab
def test_bench_lb_driver(tmp_path):
    """bench/lb: a row per count of gatlings (and one direct), no errors, haproxy's
    requests shared out evenly, and its lab gone afterwards."""
    out = tmp_path / "lb"
    p = subprocess.Popen([os.path.join(ROOT, "bench", "lb"), "--gatlings", "1,2", "--direct",
                          "-c", "10", "-d", "1", "-k", "--gatling", os.path.join(BDIR, "gatling"),
                          "--bench", os.path.join(BDIR, "bench"), "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        so, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    rows = json.loads((out / "lb.json").read_text())["rows"]
    assert [(r["gatlings"], r["direct"]) for r in rows] == [(1, True), (1, False), (2, False)]
    for r in rows:
        m = r["merged"]
        assert m["errors_total"] == 0 and m["responses"] > 100, m
        assert [h["host"] for h in r["hosts"]] == ["c1", "c2"]
    assert rows[0]["served_by"] == {}
    two = rows[2]["served_by"]
    assert set(two) == {"g1", "g2"} and abs(two["g1"] - two["g2"]) <= 10, two
    # the requests in flight when bench's -d ends were answered, not counted by bench
    assert 0 <= sum(two.values()) - rows[2]["merged"]["responses"] <= 10, two
    assert "| 2 behind haproxy | 1 |" in so and "| g1 direct | 1 |" in so
    assert (out / "haproxy-2.cfg").exists() and (out / "raw" / "g2.r1.c1.json").exists()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "netlab-lb-%d" % p.pid not in left
