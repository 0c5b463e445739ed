"""Integration tests of the load generators, bench and httpbench (bench/).

Self-contained: its own fixtures, no conftest needed.  Each test runs once per
build named in GATLING_BUILDS (e.g. "epoll poll epoll-san"), or for every
build/*/ that has the binaries.  Targets are the real gatling server and small
Python socket servers that misbehave on purpose (close early, speak garbage,
never answer, drop idle connections).  What is checked is that the numbers add
up -- requests == responses + lost, every lost request has an error kind --
and that failures end in counted errors or a failing exit, never in a hang.
"""

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ERROR_KINDS = ["refused", "connect", "ctimeout", "reset", "timeout", "eof", "short",
               "parse", "io", "abort", "status", "tls", "rst", "goaway", "noh2"]
LOSING_KINDS = ["reset", "timeout", "eof", "short", "parse", "io", "abort", "rst", "goaway"]
RUN_TIMEOUT = 30  # no single tool run may take longer: a hang fails the test


def _builds():
    names = os.environ.get("GATLING_BUILDS", "").split()
    if not names:
        names = sorted(p.name for p in (ROOT / "build").glob("*")
                       if (p / "bench").is_file() and (p / "httpbench").is_file())
    return names


BUILDS = _builds()


@pytest.fixture(params=BUILDS or [pytest.param(None, marks=pytest.mark.skip("no build"))])
def build(request):
    d = ROOT / "build" / request.param
    for tool in ("bench", "httpbench", "gatling"):
        if not (d / tool).is_file():
            pytest.fail(f"{d / tool} missing: run make IO=... tests-build")
    return d


def run(argv, timeout=RUN_TIMEOUT, limit_nofile=None, **kw):
    def pre():
        if limit_nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit_nofile, limit_nofile))
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=pre, **kw)


def bench_json(build, *args, **kw):
    p = run([build / "bench", "-J", "-q", *args], **kw)
    assert p.stdout.strip(), f"no report; stderr: {p.stderr}"
    return p, json.loads(p.stdout)


def check_accounting(r, depth=1):
    """The identity every bench report must satisfy."""
    assert set(r["errors"]) == set(ERROR_KINDS)
    assert r["requests"] == r["responses"] + r["lost"], r
    assert r["errors_total"] == sum(r["errors"].values())
    losing = sum(r["errors"][k] for k in LOSING_KINDS)
    if depth == 1:  # one request in flight per connection: one lost request per error
        assert r["lost"] == losing, r
    else:
        assert losing <= r["lost"] <= losing * depth, r
    assert sum(r["status"].values()) == r["responses"]
    assert r["latency_us"]["count"] == r["responses"]
    assert r["connect_us"]["count"] == r["connects"]


# ---------------------------------------------------------------- servers


class Gatling:
    """gatling on 127.0.0.1.  log: a file for the access log (default: none);
    pki: a dist/mkcert.sh directory, for an HTTPS port too (tls_port)."""

    def __init__(self, build, docroot, workers=1, nofile=None, args=(), log=None, pki=None):
        argv = [build / "gatling", "-i", "127.0.0.1", "-p", "0", *args]
        argv += ["-l", log] if log else ["-n"]
        if pki:
            argv += ["-C", Path(pki) / "certs", "-e", "0"]
        if workers > 1:
            argv += ["-W", str(workers)]

        def pre():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.started = time.monotonic()
        self.p = subprocess.Popen([str(a) for a in argv], cwd=docroot, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=pre)
        deadline = time.time() + 10
        line = ""
        while time.time() < deadline:
            line = self.p.stderr.readline()
            m = re.search(r"listening on \S+ port (\d+)", line)
            if m and "(https)" in line:
                self.tls_port = int(m.group(1))
            elif m:
                self.port = int(m.group(1))
            if hasattr(self, "port") and (not pki or hasattr(self, "tls_port")):
                break
            if not line and self.p.poll() is not None:
                break
        else:
            line = "(timeout)"
        if not hasattr(self, "port") or (pki and not hasattr(self, "tls_port")):
            self.stop()
            pytest.fail(f"gatling did not start: {line}")
        # keep draining stderr so that a chatty server never blocks on a full pipe
        threading.Thread(target=self.p.stderr.read, daemon=True).start()

    def url(self, path="/"):
        return f"http://127.0.0.1:{self.port}{path}"

    def tls_url(self, path="/"):
        return f"https://127.0.0.1:{self.tls_port}{path}"

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


@pytest.fixture
def docroot(tmp_path):
    (tmp_path / "1k.html").write_bytes(b"x" * 1024)
    (tmp_path / "2k.txt").write_bytes(b"y" * 2048)
    (tmp_path / "3m.bin").write_bytes(os.urandom(3_000_000))
    return tmp_path


@pytest.fixture
def gatling(build, docroot):
    g = Gatling(build, docroot)
    yield g
    g.stop()


class PyServer:
    """A raw TCP server on 127.0.0.1 (or ::1); handler(conn, server) per connection."""

    def __init__(self, handler, family=socket.AF_INET, host="127.0.0.1"):
        self.handler = handler
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.host = host
        self.peers = []
        self.conns = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path="/"):
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}{path}"

    def _accept(self):
        while not self.closed:
            try:
                c, addr = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.peers.append(addr[0])
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            self.handler(c, self)
        except OSError:
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def close(self):
        """Gone, as a killed server: a close alone wakes neither the accept
        nor a handler's recv (the socket lives on under them), a shutdown does."""
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        with self.lock:
            for c in self.conns:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    c.close()


def read_request(c, buf):
    """Read one request head from c; returns (head, rest) or (None, b'') at EOF."""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return None, b""
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


@pytest.fixture
def pyserver():
    servers = []

    def make(handler, **kw):
        s = PyServer(handler, **kw)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()


def h_close_after_headers(c, srv):
    """Sends a head promising 100 bytes, then 10, then closes: a short body."""
    if read_request(c, b"")[0] is not None:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")


def h_garbage(c, srv):
    read_request(c, b"")
    c.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n")


def h_silent(c, srv):
    while c.recv(4096):
        pass


def h_chunked_trickle(c, srv):
    """Keep-alive, chunked, written a few bytes at a time."""
    buf = b""
    while True:
        head, buf = read_request(c, buf)
        if head is None:
            return
        resp = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\n")
        for i in range(0, len(resp), 7):
            c.sendall(resp[i:i + 7])
            time.sleep(0.0005)


def h_ok_keepalive(c, srv):
    buf = b""
    while True:
        head, buf = read_request(c, buf)
        if head is None:
            return
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


def h_drop_idle(c, srv):
    """Answers a request if one comes within 0.3 s, otherwise drops the connection."""
    c.settimeout(0.3)
    try:
        head, _ = read_request(c, b"")
    except socket.timeout:
        return
    if head is not None:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")


# HTTP/2 servers that misbehave on purpose, frame by frame (h2c, prior knowledge).
# A response is one HEADERS frame holding HPACK's static index 8, ":status: 200".

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def h2_requests(c):
    """Read the client's preface and frames; ack its SETTINGS; yield each request's stream id."""
    c.sendall(h2_frame(4, 0, 0))  # our SETTINGS: none
    buf = b""

    def fill(n):
        nonlocal buf
        while len(buf) < n:
            d = c.recv(65536)
            if not d:
                return False
            buf += d
        return True
    if not fill(24) or not buf.startswith(H2_PREFACE):
        return
    buf = buf[24:]
    while fill(9) and fill(9 + int.from_bytes(buf[:3], "big")):
        n, ftype, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
        sid = int.from_bytes(buf[5:9], "big") & 0x7fffffff
        buf = buf[9 + n:]
        if ftype == 4 and not flags & 1:
            c.sendall(h2_frame(4, 1, 0))  # SETTINGS ACK
        elif ftype == 1:  # HEADERS
            yield sid


def h_h2_reset_half(c, srv):
    """Answers the 1st, 3rd, 5th... request of a connection; resets the others (INTERNAL_ERROR)."""
    for k, sid in enumerate(h2_requests(c)):
        if k % 2 == 0:
            c.sendall(h2_frame(1, 0x5, sid, b"\x88"))  # END_STREAM | END_HEADERS
        else:
            c.sendall(h2_frame(3, 0, sid, struct.pack(">I", 2)))


def h_h2_goaway_after_3(code):
    """Answers three requests per connection, then GOAWAY with `code` at the fourth:
    streams from the fourth on are refused."""
    def handler(c, srv):
        last = 0
        for k, sid in enumerate(h2_requests(c)):
            if k < 3:
                c.sendall(h2_frame(1, 0x5, sid, b"\x88"))
                last = sid
            elif k == 3:
                c.sendall(h2_frame(7, 0, 0, struct.pack(">II", last, code)))
    return handler


def h_h2_silent(c, srv):
    for _ in h2_requests(c):
        pass


def refused_port():
    """A port that is bound but not listening: connects get RST at once."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


# ---------------------------------------------------------------- unit parts


def test_selftest(build):
    """Parser, histogram and address parsing (bench/lg/lg_selftest.c, TAP)."""
    exe = build / "lg_selftest"
    if not exe.is_file():
        pytest.fail(f"{exe} missing")
    p = run([exe])
    assert p.returncode == 0, p.stdout
    assert "not ok" not in p.stdout
    assert re.search(r"^1\.\.\d+$", p.stdout, re.M)


# ---------------------------------------------------------------- bench


def test_bench_keepalive_counts(build, gatling):
    p, r = bench_json(build, "-c", "8", "-k", "-n", "2000", gatling.url("/1k.html"))
    assert p.returncode == 0, p.stderr
    check_accounting(r)
    assert r["requests"] == 2000 and r["responses"] == 2000 and r["lost"] == 0
    assert r["status"]["2xx"] == 2000 and r["errors_total"] == 0
    assert r["body_bytes"] == 2000 * 1024
    assert r["connects"] == 8  # keep-alive: no reconnects
    lat = r["latency_us"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]


def test_bench_one_request_per_connection(build, gatling):
    p, r = bench_json(build, "-c", "4", "-n", "300", gatling.url("/1k.html"))
    assert p.returncode == 0, p.stderr
    check_accounting(r)
    assert r["responses"] == 300 and r["connects"] == 300 and r["attempts"] == 300


def test_bench_pipeline_urls_and_statuses(build, gatling, tmp_path):
    urls = tmp_path / "urls"
    urls.write_text(f"# a comment\n{gatling.url('/1k.html')}\n/2k.txt\n/missing\n")
    p, r = bench_json(build, "-c", "3", "-k", "-p", "4", "-r", "50", "-n", "600",
                      "-f", urls, gatling.url("/"))
    check_accounting(r, depth=4)
    assert r["responses"] == 600 and r["lost"] == 0
    assert r["status"]["2xx"] == 400 and r["status"]["4xx"] == 200
    assert r["errors"]["status"] == 200 and r["errors_total"] == 200
    assert p.returncode == 3  # completed, with errors counted
    assert r["connects"] >= 600 // 50


def test_bench_short_body_is_counted(build, pyserver):
    s = pyserver(h_close_after_headers)
    p, r = bench_json(build, "-c", "2", "-k", "-n", "20", s.url())
    check_accounting(r)
    assert r["requests"] == 20 and r["responses"] == 0
    assert r["errors"]["short"] == 20 and r["lost"] == 20
    assert p.returncode != 0


def test_bench_not_http_is_fatal(build, pyserver):
    s = pyserver(h_garbage)
    p, r = bench_json(build, "-c", "2", "-d", "30", s.url())
    check_accounting(r)
    assert p.returncode == 1
    assert r["errors"]["parse"] >= 1 and r["responses"] == 0
    assert "not an HTTP server" in r["fatal"]
    assert r["seconds"] < 10  # gave up, did not run out the duration (-d 30)


def test_bench_unreachable(build):
    s, port = refused_port()
    with s:
        t = time.time()
        p = run([build / "bench", "-q", "-c", "4", "-d", "30", f"http://127.0.0.1:{port}/"])
        assert p.returncode == 1
        assert "unreachable" in p.stderr
        assert time.time() - t < 10  # gave up, not -d 30
        p, r = bench_json(build, "-c", "1", "-n", "5", f"http://127.0.0.1:{port}/")
        assert p.returncode == 1 and r["errors"]["refused"] >= 1 and r["requests"] == 0


def test_bench_timeout_counted(build, pyserver):
    s = pyserver(h_silent)
    t = time.time()
    p, r = bench_json(build, "-c", "2", "-k", "-n", "4", "-t", "0.3", s.url())
    check_accounting(r)
    assert r["errors"]["timeout"] == 4 and r["lost"] == 4 and r["responses"] == 0
    assert p.returncode != 0
    assert time.time() - t < 15  # -t 0.3 each: a hang, not a cost


def test_bench_hard_cap(build, pyserver):
    """-d 0.5 with a 30 s timeout against a server that never answers: -T cuts it."""
    s = pyserver(h_silent)
    t = time.time()
    p, r = bench_json(build, "-c", "3", "-k", "-d", "0.5", "-t", "30", "-T", "1", s.url())
    assert time.time() - t < 15  # -T 1, not -t 30
    check_accounting(r)
    assert r["errors"]["abort"] == 3 and r["lost"] == 3
    assert p.returncode != 0


def test_bench_chunked_trickle(build, pyserver):
    s = pyserver(h_chunked_trickle)
    p, r = bench_json(build, "-c", "2", "-k", "-n", "20", s.url())
    assert p.returncode == 0, r
    check_accounting(r)
    assert r["responses"] == 20 and r["body_bytes"] == 20 * 21


def test_bench_connect_only(build, gatling):
    p, r = bench_json(build, "--connect-only", "-c", "4", "-n", "200", gatling.url())
    assert p.returncode == 0, p.stderr
    assert r["connects"] == 200 and r["requests"] == 0 and r["errors_total"] == 0
    assert r["connects_per_s"] > 0


def test_bench_source_addresses(build, pyserver):
    s = pyserver(h_ok_keepalive)
    p, r = bench_json(build, "-c", "6", "-k", "-n", "60", "-b", "127.0.0.2-4", s.url())
    assert p.returncode == 0, p.stderr
    check_accounting(r)
    assert sorted(set(s.peers)) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def test_bench_ipv6(build, pyserver):
    try:
        s = pyserver(h_ok_keepalive, family=socket.AF_INET6, host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback")
    p, r = bench_json(build, "-c", "2", "-k", "-n", "10", s.url())
    assert p.returncode == 0 and r["responses"] == 10 and r["target"].startswith("[::1]:")


def sockets_of(pid):
    """The sockets process pid has open (0 once it is gone)."""
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return 0
    n = 0
    for fd in fds:
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def test_bench_sigint_reports(build, gatling):
    p = subprocess.Popen([str(build / "bench"), "-J", "-q", "-c", "4", "-k", "-d", "20",
                          gatling.url("/1k.html")], stdout=subprocess.PIPE, text=True)
    # its four connections open, then a moment of requests: a fixed 0.5 s
    # from the start could be spent before the first response on a busy machine
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and p.poll() is None and sockets_of(p.pid) < 4:
        time.sleep(0.05)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=10)
    r = json.loads(out)
    check_accounting(r)
    assert r["seconds"] < 15 and r["responses"] > 0 and p.returncode == 0


@pytest.mark.parametrize("args", [
    ["-c", "0"], ["-c", "x"], ["-p", "2"], ["-r", "5"], ["-d", "abc"], ["-P", "5", "-c", "2"],
    ["-m", "POST"], ["--connect-only", "-k"], ["-b", "::1"], ["-b", "127.0.0.9-127.0.0.1"],
    ["-H", "nocolon"], ["--bogus"], [],
])
def test_bench_bad_options(build, args):
    url = [] if args == [] else ["http://127.0.0.1:9/"]
    p = run([build / "bench", *args, *url])
    assert p.returncode == 2, (args, p.stderr)
    assert "usage" in p.stderr or "bench:" in p.stderr


def test_bench_bad_urls(build):
    for url in ["https://127.0.0.1:0/", "http://127.0.0.1:0/", "http://[::1/"]:
        p = run([build / "bench", url])
        assert p.returncode == 2, url


def test_help(build):
    for tool in ("bench", "httpbench"):
        p = run([build / tool, "-h"])
        assert p.returncode == 0 and "usage" in p.stdout


# ---------------------------------------------------------------- HTTP/2 (bench --h2)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    subprocess.run(["sh", ROOT / "dist" / "mkcert.sh", d], check=True, capture_output=True,
                   timeout=60)
    return d


@pytest.fixture
def gatling_h2(build, docroot, pki, tmp_path):
    """gatling with an HTTPS port and an access log (read it after stop())."""
    g = Gatling(build, docroot, log=tmp_path / "access.log", pki=pki)
    g.log = tmp_path / "access.log"
    yield g
    g.stop()


def h2_logged(g):
    """Requests the server logged as HTTP/2 (after it stopped: the log is flushed)."""
    g.stop()
    return sum(1 for x in g.log.read_text().splitlines() if '" 200 ' in x and "HTTP/2.0" in x)


def check_h2(r, streams):
    check_accounting(r, depth=streams)
    assert r["protocol"] == "h2" and r["streams"] == streams and r["pipeline"] == 1


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_bench_h2_streams(build, gatling_h2, tls):
    """-k --streams 10 over h2c and over TLS (ALPN h2): the requested count, 0 errors,
    and as many HTTP/2 requests in the server's access log."""
    url = gatling_h2.tls_url("/1k.html") if tls else gatling_h2.url("/1k.html")
    p, r = bench_json(build, "--h2", "-c", "4", "-k", "--streams", "10", "-n", "3000", url)
    assert p.returncode == 0, p.stderr
    check_h2(r, 10)
    assert r["requests"] == r["responses"] == 3000 and r["errors_total"] == 0
    assert r["status"]["2xx"] == 3000 and r["body_bytes"] == 3000 * 1024
    assert r["connects"] == 4
    assert r.get("tls", False) == tls
    assert h2_logged(gatling_h2) == 3000


def test_bench_h2_report_and_requests(build, gatling_h2, tmp_path):
    """Text report names the protocol; one request per connection; HEAD; -f with a 404; -r."""
    p = run([build / "bench", "-q", "--h2", "-c", "2", "-n", "50", gatling_h2.url("/1k.html")])
    assert p.returncode == 0, p.stderr
    assert re.search(r"^protocol +h2 \(h2c, prior knowledge\), 1 stream per connection$",
                     p.stdout, re.M), p.stdout
    assert re.search(r"^requests +50 sent, 50 answered, 0 lost; 50 connections", p.stdout, re.M)
    assert re.search(r"rst 0 goaway 0 noh2 0$", p.stdout, re.M)
    p, r = bench_json(build, "--h2", "-m", "HEAD", "-c", "2", "-k", "--streams", "3", "-n", "60",
                      gatling_h2.tls_url("/1k.html"))
    assert p.returncode == 0 and r["responses"] == 60 and r["body_bytes"] == 0, p.stderr
    urls = tmp_path / "urls"
    urls.write_text("/1k.html\n/2k.txt\n/missing\n")
    p, r = bench_json(build, "--h2", "-c", "3", "-k", "--streams", "4", "-r", "50", "-n", "600",
                      "-f", urls, gatling_h2.url("/"))
    check_h2(r, 4)
    assert r["responses"] == 600 and r["lost"] == 0 and p.returncode == 3
    assert r["status"]["2xx"] == 400 and r["status"]["4xx"] == 200
    assert r["errors"]["status"] == 200 and r["errors_total"] == 200
    assert r["body_bytes"] >= 200 * (1024 + 2048)
    assert 600 // 50 <= r["connects"] <= 600 // 50 + 3  # -r 50: a new one after 50 requests


def test_bench_h2_open_loop(build, gatling):
    """-R over HTTP/2: due requests go to any connection with a free stream slot."""
    p, r = bench_json(build, "--h2", "-c", "2", "-k", "--streams", "4", "-R", "400", "-d", "1.5",
                      gatling.url("/1k.html"))
    assert p.returncode == 0, p.stderr
    check_h2(r, 4)
    assert r["open_loop_rate"] == 400 and r["errors_total"] == 0 and r["lost"] == 0
    # 400/s for 1.5 s: each due request is sent or, when every stream slot stayed busy until -d's
    # end (a loaded host lags), counted as unsent; none is dropped without a count
    assert 0 < r["requests"] and 600 - 2 <= r["requests"] + r["unsent"] <= 600 + 2, r
    assert r["responses"] == r["requests"] and r["connects"] == 2


def test_bench_h2_processes_merge(build, gatling_h2):
    """-P 2 over HTTP/2: two workers' counts and histograms merge; -b spreads them."""
    p, r = bench_json(build, "--h2", "-P", "2", "-c", "6", "-k", "--streams", "5", "-n", "4000",
                      "-b", "127.0.0.1-3", gatling_h2.tls_url("/1k.html"))
    assert p.returncode == 0, p.stderr
    check_h2(r, 5)
    assert r["processes"] == 2 and r["connects"] == 6 and r["responses"] == 4000
    assert r["latency_us"]["count"] == 4000 and r["errors_total"] == 0
    assert h2_logged(gatling_h2) == 4000


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_bench_h2_server_without_h2(build, docroot, pki, tls):
    """gatling -2 has no HTTP/2: a clear error kind and a fatal exit at once, not a hang."""
    g = Gatling(build, docroot, args=["-2"], pki=pki)
    try:
        t = time.time()
        url = g.tls_url("/1k.html") if tls else g.url("/1k.html")
        p, r = bench_json(build, "--h2", "-c", "4", "-k", "--streams", "10", "-d", "30", url)
        assert time.time() - t < 10  # at once, not -d 30
        assert p.returncode == 1
        assert r["errors"]["noh2"] >= 1 and r["responses"] == 0
        assert r["requests"] == r["lost"]
        why = "did not pick h2 by ALPN" if tls else "answered the HTTP/2 preface with HTTP/1.x"
        assert "not an HTTP/2 server" in r["fatal"] and why in r["fatal"], r["fatal"]
        assert why in p.stderr
    finally:
        g.stop()


def test_bench_h2_stream_resets(build, pyserver):
    s = pyserver(h_h2_reset_half)
    p, r = bench_json(build, "--h2", "-c", "2", "-k", "--streams", "4", "-n", "400", s.url())
    check_h2(r, 4)
    assert p.returncode == 3, p.stderr
    assert r["requests"] == 400 and r["lost"] == r["errors"]["rst"]
    assert r["responses"] + r["errors"]["rst"] == 400 and 180 <= r["errors"]["rst"] <= 220
    assert r["errors_total"] == r["errors"]["rst"] and r["connects"] == 2


def test_bench_h2_graceful_goaway(build, pyserver):
    """Streams a GOAWAY with NO_ERROR refuses were not processed (RFC 9113 8.7): they are
    sent again on a new connection, not counted as errors."""
    s = pyserver(h_h2_goaway_after_3(0))
    p, r = bench_json(build, "--h2", "-c", "1", "-k", "--streams", "4", "-n", "40", s.url())
    check_h2(r, 4)
    assert p.returncode == 0, (p.stderr, r)
    assert r["requests"] == r["responses"] == 40 and r["errors_total"] == 0
    assert r["connects"] == 14 and r["retried"] >= 13  # 3 answers per connection


def test_bench_h2_goaway_error(build, pyserver):
    """A GOAWAY with an error code: the streams it refused are lost, one goaway error per
    GOAWAY; a new connection goes on."""
    s = pyserver(h_h2_goaway_after_3(2))
    p, r = bench_json(build, "--h2", "-c", "1", "-k", "--streams", "4", "-n", "40", s.url())
    check_h2(r, 4)
    assert p.returncode == 3, p.stderr
    assert r["retried"] == 0
    c = r["connects"]  # all but the last get three answers and a GOAWAY; -n may cut the last
    assert r["requests"] == 40 and 3 * (c - 1) < r["responses"] <= 3 * c, r
    assert c - 1 <= r["errors"]["goaway"] <= c, r
    assert r["errors_total"] == r["errors"]["goaway"] and r["lost"] >= r["errors"]["goaway"]


def test_bench_h2_timeout(build, pyserver):
    s = pyserver(h_h2_silent)
    t = time.time()
    p, r = bench_json(build, "--h2", "-c", "2", "-k", "--streams", "3", "-n", "6", "-t", "0.3",
                      s.url())
    check_h2(r, 3)
    assert r["errors"]["timeout"] == 2 and r["lost"] == 6 and r["responses"] == 0
    assert p.returncode != 0 and time.time() - t < 15  # -t 0.3 each: a hang, not a cost


@pytest.mark.parametrize("args", [
    ["--streams", "4"], ["--h2", "-k", "-p", "2"], ["--h2", "--streams", "2"],
    ["--h2", "-k", "--streams", "0"], ["--h2", "-k", "--streams", "5000"],
    ["--h2", "--connect-only"],
])
def test_bench_h2_bad_options(build, args):
    p = run([build / "bench", *args, "http://127.0.0.1:9/"])
    assert p.returncode == 2, (args, p.stderr)
    assert "bench:" in p.stderr


@pytest.mark.skipif(not shutil.which("h2load"), reason="h2load (nghttp2-client) not installed")
def test_bench_h2_counts_match_h2load(build, gatling_h2):
    """A sanity check of counts, not of speed: bench --h2 and h2load with the same -c,
    streams and -n each get every response, and the server logs each of them."""
    n = 2000
    p, r = bench_json(build, "--h2", "-c", "4", "-k", "--streams", "10", "-n", n,
                      gatling_h2.url("/1k.html"))
    assert p.returncode == 0 and r["responses"] == n, p.stderr
    h = run(["h2load", "-c", "4", "-m", "10", "-n", n, gatling_h2.url("/1k.html")])
    assert h.returncode == 0, h.stderr
    m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed", h.stdout)
    assert m and [int(x) for x in m.groups()] == [n, n, n, 0], h.stdout
    assert re.search(r"status codes: (\d+) 2xx", h.stdout).group(1) == str(n)
    assert h2_logged(gatling_h2) == 2 * n


# ---------------------------------------------------------------- more than one process


NOFILE = 256  # a small descriptor limit stands in for the real 20,000 so the test stays fast


def test_more_connections_than_one_process(build, docroot):
    """bench/httpbench -P 2 hold more connections than one process may open, on gatling -W 2."""
    g = Gatling(build, docroot, workers=2, nofile=4 * NOFILE)
    try:
        n = 400  # > NOFILE: one process cannot
        p = run([build / "bench", "-q", "-k", "-c", n, "-n", 4000, g.url("/1k.html")],
                limit_nofile=NOFILE)
        assert p.returncode == 2 and "-P 2" in p.stderr, p.stderr

        p, r = bench_json(build, "-P", "2", "-k", "-c", n, "-n", 4000, "-b", "127.0.0.1-3",
                          g.url("/1k.html"), limit_nofile=NOFILE)
        assert p.returncode == 0, p.stderr
        check_accounting(r)
        assert r["processes"] == 2 and r["connects"] == n
        assert r["responses"] == 4000 and r["errors_total"] == 0

        p = run([build / "httpbench", "-q", "-P", "2", "-c", n, "-i", 100, "-s", 2, "-w", "0.2",
                 g.url("/1k.html")], limit_nofile=NOFILE)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert len([x for x in lines if x.startswith("clat ")]) == n
        assert len([x for x in lines if x.startswith("sample ")]) == n // 100
        assert re.search(rf"{n} of {n} connections opened, 0 dropped", p.stderr), p.stderr
    finally:
        g.stop()


# ---------------------------------------------------------------- httpbench


def test_httpbench_classic_output(build, gatling):
    p = run([build / "httpbench", "-c", "30", "-i", "10", "-s", "3", gatling.url("/1k.html")])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"connecting to 127.0.0.1 port {gatling.port}"
    kinds = [x.split()[0] for x in lines[1:]]
    # a sample before connection 0, 10 and 20, then ten clat lines each
    assert kinds == (["sample"] + ["clat"] * 10) * 3
    for x in lines[1:]:
        f = x.split()
        assert len(f) == (3 if f[0] == "sample" else 2) and all(v.isdigit() for v in f[1:])


def test_httpbench_json_keepalive(build, gatling):
    p = run([build / "httpbench", "-J", "-k", "-c", "12", "-i", "5", "-s", "4",
             gatling.url("/1k.html")])
    assert p.returncode == 0, p.stderr
    ev = [json.loads(x) for x in p.stdout.splitlines()]
    assert ev[0]["type"] == "start" and ev[-1]["type"] == "summary"
    samples = [e for e in ev if e["type"] == "sample"]
    assert [s["conns"] for s in samples] == [0, 5, 10]
    assert all(s["ok"] == 4 and s["failed"] == 0 for s in samples)
    assert [e["conns"] for e in ev if e["type"] == "clat"] == list(range(1, 13))
    sm = ev[-1]
    assert sm["opened"] == 12 and sm["requests"] == 12 and sm["responses"] == 12
    assert sm["errors_total"] == 0 and sm["dropped"] == 0


def test_httpbench_throughput(build, gatling):
    p = run([build / "httpbench", "-c", "1", gatling.url("/3m.bin")])
    assert p.returncode == 0, p.stderr
    tput = [x for x in p.stdout.splitlines() if x.startswith("tput ")]
    assert len(tput) == 3 and all(int(x.split()[1]) > 0 for x in tput)
    assert "3000000 body bytes" in p.stderr



# ---------------------------------------------------------------- the surge (bench --surge)

SURGE_CLASSES = ["connect", "handshake", "h2", "status", "timeout", "abort", "unstarted"]


@pytest.fixture
def site(docroot):
    """index.html and 20 assets of 1 to 4 KiB; the --assets file beside them."""
    for i in range(20):
        (docroot / f"a{i:02d}.png").write_bytes(os.urandom(1024 * (1 + i % 4)))
    (docroot / "index.html").write_text("<html>" + "".join(
        f'<img src="/a{i:02d}.png">' for i in range(20)) + "</html>")
    (docroot / "assets.txt").write_text("".join(f"/a{i:02d}.png\n" for i in range(20)))
    return docroot


def check_surge(r, visitors, assets=20):
    """The surge report's identities: every visitor arrived once and ended once, a page load
    or one failure; every request answered or lost."""
    assert r["mode"] == "surge" and r["assets"] == assets
    assert set(r["error_classes"]) == set(SURGE_CLASSES)
    assert r["visitors"] == visitors, r
    assert r["pages"] + r["failed"] == r["visitors"], r
    assert r["failed"] == sum(r["errors"].values())
    assert sum(r["error_classes"].values()) == r["failed"] + r["unstarted"]
    assert r["errors_total"] == r["failed"] + r["unstarted"]
    assert r["requests"] == r["responses"] + r["lost"], r
    assert r["page_us"]["count"] == r["pages"]
    assert sum(r["status"].values()) == r["responses"]


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_bench_surge_page_loads(build, gatling_h2, site, tls):
    """40 visitors/s for 1 s: 40 new connections, each the page then 20 assets; every page
    loads, each handshake full, and the server logged every request as HTTP/2."""
    url = gatling_h2.tls_url("/index.html") if tls else gatling_h2.url("/index.html")
    p, r = bench_json(build, "--surge", "40", "-d", "1", "--assets", site / "assets.txt", url)
    assert p.returncode == 0, p.stderr
    check_surge(r, 40)
    assert r["pages"] == 40 and r["errors_total"] == 0 and r["unstarted"] == 0
    assert r["requests"] == r["responses"] == 40 * 21 and r["status"]["2xx"] == 40 * 21
    assert r["connects"] == 40 and r["tls"] == tls
    assert r["handshakes"] == (40 if tls else 0) and r["resumed"] == 0 and r["returning"] == 0
    assert r["full"] == r["handshakes"]
    assert 0 < r["page_us"]["p50"] <= r["page_us"]["p99"] <= r["page_us"]["max"]
    assert h2_logged(gatling_h2) == 40 * 21


def test_bench_surge_verifies_with_C(build, gatling_h2, site, pki, tmp_path):
    """Issue 90: bench --surge over https:// takes -C CA_FILE and verifies the
    server's certificate (it refused -C and never verified, silently): with
    the server's CA every page loads; with another CA every handshake fails
    as a TLS error; without -C it says that it does not verify."""
    url, assets = gatling_h2.tls_url("/index.html"), ("--assets", site / "assets.txt")
    p, r = bench_json(build, "--surge", "10", "-d", "1", "-C", Path(pki) / "ca.pem", *assets,
                      url)
    assert p.returncode == 0 and "not verified" not in p.stderr, p.stderr
    assert r["pages"] == 10 and r["errors_total"] == 0 and r["handshakes"] == 10, r
    other = tmp_path / "other"
    subprocess.run(["sh", ROOT / "dist" / "mkcert.sh", other], check=True, capture_output=True,
                   timeout=60)
    p, r = bench_json(build, "--surge", "5", "-d", "1", "-C", other / "ca.pem", *assets, url)
    assert r["pages"] == 0 and r["errors"]["tls"] == 5, (r, p.stderr)
    p, r = bench_json(build, "--surge", "5", "-d", "1", *assets, url)
    assert p.returncode == 0 and r["pages"] == 5, (r, p.stderr)
    assert "bench: --surge: the server's certificate is not verified (-C CA_FILE verifies it)" \
        in p.stderr, p.stderr


def test_bench_surge_resumed(build, gatling_h2, site):
    """--returning 50%: every second visitor offers the last session, and the handshakes that
    resumed are counted apart from the full ones (OpenSSL's SSL_session_reused)."""
    p, r = bench_json(build, "--surge", "40", "-d", "1", "--returning", "50%", "--assets",
                      site / "assets.txt", gatling_h2.tls_url("/index.html"))
    assert p.returncode == 0, p.stderr
    check_surge(r, 40)
    assert r["pages"] == 40 and r["returning_share"] == 0.5 and r["returning"] == 20
    # each ticket is offered once and tickets come after a handshake: a returning visitor that
    # arrives before the earlier ones got theirs has none to offer (11 of 20 seen under load)
    assert 1 <= r["offered"] <= 20
    assert r["resumed"] == r["offered"] and r["full"] == 40 - r["resumed"], r
    assert r["handshakes"] == 40 and r["resumed_per_s"] > 0
    p = run([build / "bench", "-q", "--surge", "20", "-d", "0.5", "--returning", "1",
             "--assets", site / "assets.txt", gatling_h2.tls_url("/index.html")])
    assert p.returncode == 0, p.stderr
    # every visitor offers the last ticket it got; one that arrives before any ticket
    # came (the first, or after late ones under load) has none to offer and is full
    m = re.search(r"^tls +[\d.]+ handshakes/s: (\d+) full, (\d+) resumed; 10 visitors "
                  r"returning, (\d+) of them offered a session", p.stdout, re.M)
    assert m and int(m.group(2)) == int(m.group(3)) >= 1, p.stdout  # 3 of 10 seen under load
    assert int(m.group(1)) + int(m.group(2)) == 10, p.stdout


def test_bench_surge_early_data(build, docroot, pki, site, tmp_path):
    """--returning 100% --early-data against gatling --early-data: within the server's first
    11 s its replay table refuses early data, and the visitors that sent it send it again
    after the handshake (every page loads); past them, every visitor whose session allows it
    has its page's request taken as early data, which the server logged as early."""
    log = tmp_path / "access.log"
    g = Gatling(build, docroot, log=log, pki=pki, args=("--early-data", "1024",
                                                        "--log-format", "json"))
    try:
        url, args = g.tls_url("/index.html"), ("--returning", "1", "--early-data", "--assets",
                                                site / "assets.txt")
        p, r = bench_json(build, "--surge", "20", "-d", "1", *args, url)
        assert p.returncode == 0, p.stderr
        check_surge(r, 20)
        assert r["pages"] == 20 and r["errors_total"] == 0, r
        assert r["early_sent"] >= 1 and r["early_accepted"] == 0, r  # the young table refuses
        time.sleep(max(0.0, g.started + 12 - time.monotonic()))
        p, r = bench_json(build, "--surge", "20", "-d", "1", *args, url)
        assert p.returncode == 0, p.stderr
        check_surge(r, 20)
        assert r["pages"] == 20 and r["errors_total"] == 0, r
        assert r["early_sent"] >= 5 and r["early_accepted"] == r["early_sent"], r
        assert r["requests"] == r["responses"] == 20 * 21
    finally:
        g.stop()
    early = [json.loads(l) for l in log.read_text().splitlines()]
    early = [o for o in early if o.get("early_data")]
    assert len(early) == r["early_accepted"], early[:3]
    assert all(o["request"].startswith("GET /index.html ") for o in early), early[:3]


def test_bench_surge_status_error(build, gatling_h2, site, tmp_path):
    """An asset that is 404: every visitor's page load fails as a status error, the other
    responses still count."""
    bad = tmp_path / "bad.txt"
    bad.write_text((site / "assets.txt").read_text() + "/missing.png\n")
    p, r = bench_json(build, "--surge", "20", "-d", "1", "--assets", bad,
                      gatling_h2.tls_url("/index.html"))
    assert p.returncode == 3, p.stderr
    check_surge(r, 20, assets=21)
    assert r["pages"] == 0 and r["error_classes"]["status"] == 20 == r["errors"]["status"]
    assert r["status"]["4xx"] == 20 and r["status"]["2xx"] == 20 * 21 and r["lost"] == 0


def test_bench_surge_server_down(build, site):
    """Nothing listening: the first visitor's connect is refused, the run ends at once."""
    s, port = refused_port()
    with s:
        p, r = bench_json(build, "--surge", "50", "-d", "2", "--assets", site / "assets.txt",
                          f"https://127.0.0.1:{port}/index.html")
    assert p.returncode == 1 and "unreachable" in p.stderr
    assert r["errors"]["refused"] >= 1 and r["error_classes"]["connect"] >= 1
    assert r["pages"] == 0 and r["fatal"]


def test_bench_surge_timeout(build, pyserver, site):
    """A server that accepts and never answers: each visitor times out at -t, and the run
    still ends by itself (exit 1: no request got any response, as for every bench run)."""
    s = pyserver(h_silent)
    t0 = time.monotonic()
    p, r = bench_json(build, "--surge", "20", "-d", "0.5", "-t", "0.3", "--assets",
                      site / "assets.txt", s.url("/index.html"))
    assert time.monotonic() - t0 < 15  # -d 0.5 -t 0.3: a hang, not a cost
    assert p.returncode == 1 and "no request got a complete response" in p.stderr, p.stderr
    check_surge(r, 10)
    assert r["error_classes"]["timeout"] == 10 and r["pages"] == 0 and r["lost"] == 10


def test_bench_surge_busy_slots(build, gatling_h2, site):
    """-c 1: one visitor at a time; arrivals that find it busy wait (their clock running), and
    those still waiting at -d are counted as unstarted, never dropped silently."""
    p, r = bench_json(build, "--surge", "20000", "-c", "1", "-d", "0.3", "--assets",
                      site / "assets.txt", gatling_h2.url("/index.html"))
    check_surge(r, r["visitors"])
    assert r["max_visitors"] == 1 and r["unstarted"] > 0 and p.returncode == 3
    assert r["visitors"] + r["unstarted"] == 6000 and r["late"] > 0


@pytest.mark.parametrize("args", [
    ["--surge", "10", "-k"], ["--surge", "10", "-R", "5"], ["--surge", "10", "-n", "5"],
    ["--surge", "10", "--resume"], ["--surge", "0"], ["--returning", "0.5"],
    ["--surge", "10", "--returning", "1.5"], ["--surge", "10", "--returning", "x"],
    ["--assets", "/dev/null"], ["--surge", "10", "-d", "5", "-T", "3"],
])
def test_bench_surge_bad_options(build, args):
    p = run([build / "bench", *args, "https://127.0.0.1:9/"])
    assert p.returncode == 2, (args, p.stderr)
    p = run([build / "bench", "--surge", "10", "--returning", "0.5", "http://127.0.0.1:9/"])
    assert p.returncode == 2 and "https" in p.stderr

def test_httpbench_unreachable(build):
    s, port = refused_port()
    with s:
        p = run([build / "httpbench", "-c", "5", f"http://127.0.0.1:{port}/"])
        assert p.returncode == 1 and "unreachable" in p.stderr


def test_httpbench_not_http(build, pyserver):
    s = pyserver(h_garbage)
    p = run([build / "httpbench", "-c", "5", s.url()])
    assert p.returncode == 1 and "not an HTTP server" in p.stderr


def test_httpbench_sees_dropped_idle_connections(build, pyserver):
    s = pyserver(h_drop_idle)
    p = run([build / "httpbench", "-J", "-c", "5", "-i", "5", "-s", "2", "-w", "1", s.url()])
    sm = json.loads(p.stdout.splitlines()[-1])
    assert sm["opened"] == 5 and sm["dropped"] == 5, sm
    assert sm["responses"] == 2
    assert p.returncode == 3


@pytest.mark.parametrize("args", [["-c", "0"], ["-i", "0"], ["-s", "x"], ["-P", "3", "-c", "2"],
                                  ["-d", "0"], ["-b", "10.0.0.300"], ["-z"], []])
def test_httpbench_bad_options(build, args):
    url = [] if args == [] else ["http://127.0.0.1:9/"]
    p = run([build / "httpbench", *args, *url])
    assert p.returncode == 2, (args, p.stderr)
