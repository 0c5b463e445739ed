"""Behind a load balancer: the PROXY protocol (-y, -Y), the health check (-k)
and the drain's grace (-g).

The "proxy" here is the test itself: it connects from 127.0.0.2 (the one
trusted address, -Y 127.0.0.2) and sends the header's bytes by hand, v1 and
v2, before the request (or, over HTTPS, before the ClientHello).  Connections
from 127.0.0.1 are the untrusted ones.  One test puts Debian's haproxy with
send-proxy-v2 in front, when it is installed.
"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

import conftest
from conftest import SCHEME, Client, client_tls_context, close_all_clients, free_port, wait_for

PROXY_ADDR = "127.0.0.2"  # the trusted proxy
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
TREE = {"f.txt": "hello\n", "index.html": "<html>index</html>\n"}
BASE = ("-T", "10", "-S", "-y", "http,https", "-Y", PROXY_ADDR)


def v1(proto="TCP4", src="192.0.2.7", dst="192.0.2.1", sport=40000, dport=80):
    if proto == "UNKNOWN":
        return b"PROXY UNKNOWN\r\n"
    return ("PROXY %s %s %s %d %d\r\n" % (proto, src, dst, sport, dport)).encode()


def tlv(t, value):
    return struct.pack("!BH", t, len(value)) + value


def v2(cmd=1, fam=0x11, src="192.0.2.9", dst="192.0.2.1", sport=40001, dport=443, tlvs=b"",
       length=None, version=2):
    if fam == 0x11:
        addr = socket.inet_pton(socket.AF_INET, src) + socket.inet_pton(socket.AF_INET, dst)
        addr += struct.pack("!HH", sport, dport)
    elif fam == 0x21:
        addr = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
        addr += struct.pack("!HH", sport, dport)
    else:
        addr = b""
    body = addr + tlvs
    n = len(body) if length is None else length
    return V2_SIG + bytes([version << 4 | cmd, fam]) + struct.pack("!H", n) + body


class ProxiedClient(Client):
    """A connection from the proxy's address: the header first, then (HTTPS)
    the handshake, then HTTP as Client speaks it."""

    def __init__(self, port, header, tls=None, source=PROXY_ADDR, timeout=5.0):
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.buf = bytearray()
        self.sent = b""
        if header:
            self.sock.sendall(header)
        if SCHEME == "https" if tls is None else tls:
            self.sock = client_tls_context().wrap_socket(self.sock, server_hostname="localhost")
        from conftest import _open_clients
        _open_clients.append(self)


def through(srv, header, target="/f.txt", **kw):
    with ProxiedClient(srv.port, header) as c:
        return c.request(target, **kw)


def status(srv):
    """/server-status?json, asked by a loopback client through the proxy."""
    r = through(srv, v1(src="127.0.0.1"), "/server-status?json")
    assert r.status == 200, r
    return json.loads(r.body)


def last_log_host(srv, n):
    lines = srv.wait_log(n)
    assert len(lines) >= n, lines
    return lines[n - 1].split(" ")[0]


@pytest.fixture
def psrv(gatling):
    return gatling(TREE, args=BASE + ("-s", "2"))


@pytest.fixture
def patient(gatling):
    """psrv with -s 30: a close "at once" is told from a close at a deadline
    (-T 10 the first) by a bound of seconds, which a busy machine keeps."""
    return gatling(TREE, args=BASE + ("-s", "30"))


# -- the header's forms ----------------------------------------------------

@pytest.mark.parametrize("header,host", [
    (v1("TCP4", "192.0.2.7"), "192.0.2.7"),
    (v1("TCP6", "2001:db8::5", "2001:db8::1"), "2001:db8::5"),
    (v1("UNKNOWN"), PROXY_ADDR),
    (b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", PROXY_ADDR),
    (v2(), "192.0.2.9"),
    (v2(fam=0x21, src="2001:db8::9", dst="2001:db8::1"), "2001:db8::9"),
    (v2(cmd=0, fam=0x00), PROXY_ADDR),  # LOCAL: a health check by the proxy itself
    (v2(cmd=0, fam=0x11), PROXY_ADDR),  # LOCAL with addresses: they are ignored
    (v2(fam=0x00), PROXY_ADDR),  # UNSPEC
    (v2(tlvs=tlv(0x01, b"http/1.1") + tlv(0x02, b"example.com") + tlv(0x04, b"\0" * 40) +
        tlv(0x20, b"\x01\0\0\0\0" + tlv(0x21, b"TLSv1.3"))), "192.0.2.9"),
], ids=["v1-tcp4", "v1-tcp6", "v1-unknown", "v1-unknown-addrs", "v2-tcp4", "v2-tcp6",
        "v2-local", "v2-local-addrs", "v2-unspec", "v2-tlvs"])
def test_header_names_the_client(psrv, header, host):
    """The request behind the header (in the same segment) is served, and the
    access log names the client the header carries."""
    r = through(psrv, header)
    assert r.status == 200 and r.body == b"hello\n", r
    assert last_log_host(psrv, 1) == host


def test_keepalive_after_header(psrv):
    """The header comes once; the requests after it share the connection."""
    with ProxiedClient(psrv.port, v2()) as c:
        for _ in range(3):
            assert c.request("/f.txt").status == 200
    assert [ln.split(" ")[0] for ln in psrv.wait_log(3)] == ["192.0.2.9"] * 3


def test_header_byte_by_byte(psrv):
    """A header that comes in pieces (within -s) is waited for, and no byte of
    the request behind it is taken for the header."""
    for header in (v1(), v2(tlvs=tlv(0x04, b"x" * 100))):
        with ProxiedClient(psrv.port, None, tls=False) as c:
            data = header + (b"" if SCHEME == "https" else
                             b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            c.send_split(data, [1, 3, 2], pause=0.005)
            if SCHEME == "https":
                c.sock = client_tls_context().wrap_socket(c.sock, server_hostname="localhost")
                c.send(b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            r = c.read_response()
            assert r.status == 200, r
    st = status(psrv)
    assert st["proxy_headers"] >= 2


@pytest.mark.skipif(SCHEME == "https", reason="h2c: HTTPS gets h2 by ALPN")
def test_h2c_after_header(psrv):
    """The HTTP/2 preface right behind the header (one segment): the server
    answers with its SETTINGS, and the access log has the carried client."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\x04\0\0\0\0\0"
    headers = bytes([0x82, 0x84, 0x86, 0x41, 0x01, ord("x")])  # GET / http, :authority x
    frame = struct.pack("!I", len(headers))[1:] + b"\x01\x05" + struct.pack("!I", 1) + headers
    with ProxiedClient(psrv.port, None) as c:
        c.send(v2(src="192.0.2.33") + preface + frame)
        got = b""
        while len(got) < 9:
            chunk = c.sock.recv(4096)
            assert chunk, "closed after an h2c preface behind a PROXY header"
            got += chunk
        assert got[3] == 4, got  # a SETTINGS frame first
    assert last_log_host(psrv, 1) == "192.0.2.33"


def test_header_then_request_later(psrv):
    """The header alone, the request a moment later: served."""
    with ProxiedClient(psrv.port, v1(src="198.51.100.4")) as c:
        time.sleep(0.2)
        assert c.request("/f.txt").status == 200
    assert last_log_host(psrv, 1) == "198.51.100.4"


# -- what is refused -------------------------------------------------------

MALFORMED = [
    b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n",        # no header at all
    b"PROXY TCP4 192.0.2.7 192.0.2.1 40000\r\n",        # a field missing
    b"PROXY TCP4 192.0.2.7 192.0.2.1 40000 80 \r\n",    # a trailing space
    b"PROXY TCP4 192.0.2.7  192.0.2.1 40000 80\r\n",    # two spaces
    b"PROXY TCP4 2001:db8::1 192.0.2.1 40000 80\r\n",   # the wrong family
    b"PROXY TCP4 192.0.2.7 192.0.2.1 040000 80\r\n",    # a leading zero
    b"PROXY TCP4 192.0.2.7 192.0.2.1 65536 80\r\n",     # a port too large
    b"PROXY TCP5 192.0.2.7 192.0.2.1 1 80\r\n",         # an unknown protocol
    b"PROXY TCP4 192.0.2.7 192.0.2.1 1 80\n",           # LF without CR
    b"PROXY UNKNOWN " + b"x" * 120 + b"\r\n",           # longer than 107 bytes
    v2(version=1),                                     # version 1 in a v2 header
    v2(cmd=2),                                         # an unknown command
    v2(fam=0x12),                                      # UDP
    v2(fam=0x41),                                      # an unknown family
    V2_SIG + b"\x21\x21\x00\x14" + b"\0" * 20,          # too short for IPv6
    v2(tlvs=tlv(0x04, b"abc")[:-1] + b"\x05\x00"),     # a TLV past the end
    v2(tlvs=b"\x04\x00"),                              # half a TLV
    v2(tlvs=tlv(0x04, b"\0" * 600)),                   # longer than 536 bytes
    b"\r\n\r\n\x00\r\nQUIX\n" + b"\x21\x11\x00\x0c" + b"\0" * 12,  # a wrong signature
]


@pytest.mark.parametrize("header", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_closed_and_counted(patient, header):
    with ProxiedClient(patient.port, None, tls=False) as c:
        c.send(header + b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        c.assert_closed(5.0, "after a malformed PROXY header (at once, not at -T 10)")
        assert not c.buf, "an answer to a malformed header: %r" % bytes(c.buf)
    assert status(patient)["proxy_malformed"] == 1
    assert not patient.wait_log(2, timeout=0.2)[1:], patient.log


def test_truncated_closed_and_counted(psrv):
    for header in (v1()[:20], v2()[:10], v2()[:20]):
        with ProxiedClient(psrv.port, header, tls=False) as c:
            c.sock.shutdown(socket.SHUT_WR)
            c.assert_closed(5.0, "after half a header and EOF")
    assert status(psrv)["proxy_malformed"] == 3


def test_slow_header_closed_at_head_deadline(psrv):
    """-s 2: a header still incomplete then is closed and counted."""
    t0 = time.monotonic()
    c1 = ProxiedClient(psrv.port, v2()[:17], tls=False)
    c2 = ProxiedClient(psrv.port, b"PROXY TCP4 1.2.3.4", tls=False)
    c1.assert_closed(8.0, "with a v2 header incomplete past -s")
    c2.assert_closed(3.0, "with a v1 header incomplete past -s")
    assert 1.5 < time.monotonic() - t0 < 8.0  # -s 2, not -T 10
    st = status(psrv)
    assert st["proxy_timeout"] == 2 and st["proxy_malformed"] == 0


def test_untrusted_source_closed_and_counted(patient):
    """From outside -Y: closed at once (not at a deadline: -s 30, -T 10),
    nothing read, nothing answered."""
    with ProxiedClient(patient.port, None, source="127.0.0.1", tls=False) as c:
        c.send(v1() + b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")  # one segment
        c.assert_closed(5.0, "from an untrusted address")
        assert not c.buf
    with ProxiedClient(patient.port, None, source="127.0.0.1", tls=False) as c:
        c.assert_closed(5.0, "from an untrusted address, silent")
    assert status(patient)["proxy_untrusted"] == 2


def test_listener_not_marked_takes_no_header(gatling):
    """-y https only: the HTTP port speaks plain HTTP as before."""
    srv = gatling(TREE, args=("-T", "10", "-y", "https", "-Y", PROXY_ADDR))
    port = srv.plain_port if SCHEME == "https" else srv.port
    with Client(port) if SCHEME != "https" else _plain(port) as c:
        assert c.request("/f.txt").status == 200


class _plain(Client):
    def __init__(self, port):
        self.timeout = 5.0
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5.0)
        self.buf = bytearray()
        self.sent = b""


def test_listener_by_port(gatling):
    """-y PORT marks a listener by its port (here a passed-in free one)."""
    port = free_port()
    srv = gatling(TREE, args=("-T", "10", "-p", str(port), "-y", str(port), "-Y", PROXY_ADDR,
                              "-E"))
    assert srv.port == port
    with ProxiedClient(port, v1(src="203.0.113.5"), tls=False) as c:
        assert c.request("/f.txt").status == 200
    assert last_log_host(srv, 1) == "203.0.113.5"


# -- the carried address is the one the limits see --------------------------

def test_rate_limit_sees_carried_address(gatling):
    """-A 2 with -T 0: the third request of 192.0.2.50 is dropped, while
    another client behind the same proxy is served."""
    srv = gatling(TREE, args=("-T", "0", "-A", "2", "-S", "-y", "http,https", "-Y", PROXY_ADDR))
    for _ in range(2):
        assert through(srv, v1(src="192.0.2.50")).status == 200
    with ProxiedClient(srv.port, v1(src="192.0.2.50")) as c:
        c.send(b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        c.assert_closed(5.0, "over -A")
        assert not c.buf
    assert through(srv, v1(src="192.0.2.51")).status == 200
    assert status(srv)["rate_limited"] == 1


def test_conn_cap_sees_carried_address(gatling):
    """-K 1: a second connection of the same carried client is refused, one
    of another client is not (the proxy's own address is not what counts)."""
    srv = gatling(TREE, args=("-T", "10", "-K", "1", "-S", "-y", "http,https", "-Y", PROXY_ADDR))
    with ProxiedClient(srv.port, v2(src="192.0.2.60")) as c1:
        assert c1.request("/f.txt").status == 200
        if SCHEME == "https":
            c2 = ProxiedClient(srv.port, v2(src="192.0.2.60"), tls=False)
            c2.assert_closed(5.0, "over -K (HTTPS: closed)")
        else:
            with ProxiedClient(srv.port, v2(src="192.0.2.60")) as c2:
                r = c2.read_response()
                assert r.status == 503, r
        with ProxiedClient(srv.port, v2(src="192.0.2.61")) as c3:
            assert c3.request("/f.txt").status == 200
    assert status(srv)["refused_address_cap"] == 1


def test_https_header_before_client_hello(gatling):
    """-y https: the header, then the TLS handshake, then the request; the log
    names the carried client (in either scheme's pass)."""
    certs = os.path.join(conftest.test_pki(), "certs")
    args = ("-T", "10", "-y", "https", "-Y", PROXY_ADDR)
    if SCHEME != "https":
        args += ("-C", certs, "-e", "0")
    srv = gatling(TREE, args=args)
    port = srv.port if SCHEME == "https" else _https_port(srv)
    for header, host in ((v1(src="192.0.2.70"), "192.0.2.70"), (v2(src="192.0.2.71"),
                                                                "192.0.2.71")):
        with ProxiedClient(port, header, tls=True) as c:
            assert c.request("/f.txt").status == 200
        assert srv.wait_log(1)[-1].split(" ")[0] == host
        srv.log.clear()


def _https_port(srv):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in srv.errlog:
            m = re.search(r"port (\d+) \(https\)", line)
            if m:
                return int(m.group(1))
        time.sleep(0.05)
    raise AssertionError("no https listener: %s" % srv.errlog)


# -- the health check and the drain's grace -------------------------------

def test_health_check(gatling):
    srv = gatling(TREE, args=("-T", "10", "-S", "-k", "/healthz"))
    with Client(srv.port) as c:
        r = c.request("/healthz")
        assert (r.status, r.body) == (200, b"ok\n")
        assert r.header("Cache-Control") == "no-store"
        assert c.request("/healthz?from=lb").status == 200
        assert c.request("/healthz", method="HEAD").status == 200
        assert c.request("/healthzz").status == 404  # only the path itself
        assert c.request("/health").status == 404  # ... and no prefix of it
        for method in ("PUT", "POST", "DELETE", "OPTIONS"):  # the check is a GET or HEAD:
            r = c.request("/healthz", method=method, body=b"",  # not answered, not counted
                          headers=[("Content-Length", "0")])
            assert r.body != b"ok\n" and r.header("Cache-Control") != "no-store", (method, r)
        c.send(b"GET /healthz HTTP/1.0\r\n\r\n")  # no Host: a checker's minimal request
        assert c.read_response().status == 200
    with Client(srv.port) as c:
        st = json.loads(c.request("/server-status?json").body)
    assert st["health_ok"] == 4 and st["health_failed"] == 0 and st["draining"] == 0


def test_health_check_over_h2(gatling):
    """The router answers it, so HTTP/2 gets it too (h2c or ALPN h2)."""
    srv = gatling(TREE, args=("-T", "10", "-k", "/healthz"))
    cmd = ["curl", "-sS", "-o", "-", "-w", " %{http_version} %{http_code}",
           "--http2-prior-knowledge" if SCHEME != "https" else "--http2",
           conftest.url(srv.port, "/healthz")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
    assert out == "ok\n 2 200", out


def test_status_page_sees_carried_address(psrv):
    """/server-status is for loopback clients: the carried one counts, not the
    proxy's (which is a loopback address here)."""
    r = through(psrv, v1(src="192.0.2.7"), "/server-status?json")
    assert r.status == 403, r
    assert through(psrv, v1(src="127.0.0.1"), "/server-status?json").status == 200
    assert through(psrv, v2(cmd=0), "/server-status?json").status == 200  # LOCAL: 127.0.0.2


def _wait_health(port, want, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        with Client(port) as c:
            st = c.request("/healthz").status
        if st == want or time.monotonic() > deadline:
            assert st == want, "the health check still answers %d" % st
            return
        time.sleep(0.02)


def test_workers_drain_grace(gatling):
    """-W 2 -g 3: each worker fails its health check and keeps serving for
    the grace, then the whole goes down.  (3 s, not 1: under make check-all's
    load, ten TLS connections under ASan once took longer than a 1 s grace.)"""
    srv = gatling(TREE, args=("-T", "10", "-W", "2", "-k", "/healthz", "-g", "3"))
    assert Client(srv.port).request("/healthz").status == 200
    t0 = time.monotonic()
    srv.send_signal(signal.SIGTERM)
    _wait_health(srv.port, 503)  # the supervisor passes the signal on
    time.sleep(0.1)
    for _ in range(4):  # whichever worker takes it
        with Client(srv.port) as c:
            assert c.request("/healthz").status == 503
            assert c.request("/f.txt").status == 200
    assert srv.process.wait(15) == 0
    assert time.monotonic() - t0 > 2.9
    srv.join()


def test_drain_grace(gatling):
    """-g 2: after SIGTERM the health check fails at once, the listener still
    accepts (new connections served) and a request in flight finishes; then
    the listener closes and the process exits once the connections are done."""
    srv = gatling({"f.txt": "hello\n", "big.bin": b"x" * (8 << 20)},
                  args=("-T", "10", "-k", "/healthz", "-g", "2"))
    assert Client(srv.port).request("/healthz").status == 200
    slow = Client(srv.port, rcvbuf=4096)
    slow.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")  # read after the drain
    keep = Client(srv.port)
    assert keep.request("/f.txt").status == 200
    t0 = time.monotonic()
    srv.send_signal(signal.SIGTERM)
    _wait_health(srv.port, 503)
    with Client(srv.port) as c:  # a new connection, during the grace
        r = c.request("/healthz")
        assert (r.status, r.body) == (503, b"draining\n"), r
        assert c.request("/f.txt").status == 200
    r = keep.request("/healthz")
    assert r.status == 503
    while time.monotonic() - t0 < 1.5:
        assert keep.request("/f.txt").status == 200  # served as before, kept alive
        time.sleep(0.2)
    deadline = t0 + 8  # -g 2; 8: room for a busy machine, below -T 10
    refused = False
    while time.monotonic() < deadline and not refused:
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
            time.sleep(0.1)
        except (ConnectionRefusedError, ConnectionResetError):
            refused = True  # reset: the listener closed with this one in its handshake
    assert refused, "the listener is still open 8 s after SIGTERM with -g 2"
    assert time.monotonic() - t0 > 1.8, "the listener closed before the grace ended"
    assert srv.alive(), "exited with a response in flight"
    r = slow.read_response(timeout=10)
    assert r.status == 200 and len(r.body) == 8 << 20
    keep.close()
    slow.close()
    assert srv.process.wait(5) == 0
    srv.join()
    assert "health check failing for 2 s" in srv.stderr_text()


def test_no_grace_closes_at_once(gatling):
    """Without -g (0), SIGHUP closes the listener at once, as before."""
    srv = gatling(TREE, args=("-T", "10", "-k", "/healthz"))
    srv.send_signal(signal.SIGHUP)

    def refused():
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
            return False
        except (ConnectionRefusedError, ConnectionResetError):
            return True  # reset: the listener closed with this one in its handshake
    # polled, not one look after 0.3 s: a busy machine may take longer to
    # run the handler (a grace would keep it open for seconds)
    wait_for(refused, 3, "the listener closed after SIGHUP without -g")
    assert srv.process.wait(5) == 0
    srv.join()


# -- options ---------------------------------------------------------------

@pytest.mark.parametrize("args,msg", [
    (("-y", "http"), "-y needs -Y"),
    (("-Y", "10.0.0.1"), "-Y without -y"),
    (("-y", "ftp", "-Y", "10.0.0.1"), "-y ftp"),
    (("-y", "0", "-Y", "10.0.0.1"), "-y 0"),
    (("-y", "http,", "-Y", "10.0.0.1"), "-y http,"),
    (("-y", ",".join(["80"] * 9), "-Y", "10.0.0.1"), "-y 80"),
    (("-y", "http", "-Y", "10.0.0.1/33"), "-Y 10.0.0.1/33"),
    (("-y", "http", "-Y", "::1/129"), "-Y ::1/129"),
    (("-y", "http", "-Y", "10.0.0.1/08"), "-Y 10.0.0.1/08"),
    (("-y", "http", "-Y", "example.com"), "-Y example.com"),
    (("-y", "http", "-Y", "1.2.3.4/" + "1" * 100), "-Y 1.2.3.4/"),
    (("-y", "http", "-Y", ",".join(["10.0.0.1"] * 33)), "at most 32"),
    (("-k", "healthz"), "-k healthz"),
    (("-k", "/a b"), "-k /a b"),
    (("-k", "/h?x"), "-k /h?x"),
    (("-k", "/" + "a" * 300), "-k /aaa"),
    (("-g", "-1"), "-g -1"),
    (("-g", "3601"), "-g 3601"),
])
def test_bad_options(build, args, msg):
    p = subprocess.run([build.binary] + list(args), capture_output=True, text=True, timeout=20)
    assert p.returncode == 2, (args, p.stderr)
    assert msg in p.stderr, p.stderr


def test_help_names_the_options(build):
    out = subprocess.run([build.binary, "-h"], capture_output=True, text=True).stdout
    for opt in ("-y which", "-Y nets", "-k path", "-g secs"):
        assert opt in out


# -- through a real haproxy ------------------------------------------------

HAPROXY_CFG = """
global
    maxconn 200
defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend fe
    bind 127.0.0.1:%(front)d
    default_backend be
backend be
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host localhost
    server g1 127.0.0.1:%(back)d send-proxy-v2 check inter 200ms fall 2 rise 1 %(tls)s
"""


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed "
                    "(apt-get install haproxy; tests/setup.sh does)")
def test_through_haproxy_send_proxy_v2(gatling, tmp_path):
    """haproxy with send-proxy-v2 and a health check in front: requests go
    through with the client's address (haproxy's own connection is from
    127.0.0.2, the client is 127.0.0.1 as the log shows), and the health
    check that haproxy sends over PROXY v2 is answered."""
    srv = gatling(TREE, args=("-T", "10", "-S", "-k", "/healthz", "-y", "http,https",
                              "-Y", "127.0.0.1"))
    front = free_port()
    tls = ("ssl verify required ca-file %s sni str(localhost)"
           % os.path.join(conftest.test_pki(), "ca.pem")) if SCHEME == "https" else ""
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(HAPROXY_CFG % {"front": front, "back": srv.port, "tls": tls})
    hp = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                c = _plain(front)
                break
            except OSError:
                assert time.monotonic() < deadline, "haproxy did not listen"
                time.sleep(0.1)
        # the client is 127.0.0.3 (bound here), haproxy connects from 127.0.0.1
        c.sock.close()
        c.sock = socket.socket()
        c.sock.settimeout(5)
        c.sock.bind(("127.0.0.3", 0))
        c.sock.connect(("127.0.0.1", front))
        for _ in range(3):
            r = c.request("/f.txt")
            assert r.status == 200 and r.body == b"hello\n", r
        c.close()
        hosts = {ln.split(" ")[0] for ln in srv.wait_log(3) if "/f.txt" in ln}
        assert hosts == {"127.0.0.3"}, srv.log
        time.sleep(0.6)  # a few health checks, over PROXY v2 LOCAL: haproxy's own address
        # (waited for as well: a busy machine may run haproxy's 200 ms checks late)
        checks = wait_for(lambda: [ln for ln in srv.log if "/healthz" in ln], 10,
                          "haproxy's health checks in the access log")
        assert all(ln.split(" ")[0] == "127.0.0.1" for ln in checks), srv.log
        assert all('" 200 ' in ln for ln in checks), checks
    finally:
        hp.terminate()
        out = hp.communicate(timeout=5)[0]
        close_all_clients()
    assert b"DOWN" not in out, out.decode(errors="replace")


# -- listeners that come from elsewhere: -W workers, socket activation, upgrade

def _marked(port, tls=None):
    """The listener on port takes a PROXY header, and a request without one
    is closed unanswered."""
    with ProxiedClient(port, v1(src="192.0.2.90"), tls=tls) as c:
        assert c.request("/f.txt").status == 200
    with ProxiedClient(port, None, tls=False) as c:
        c.send(b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        c.assert_closed(5.0, "a request without a PROXY header")
        assert not c.buf


def test_workers(gatling):
    srv = gatling(TREE, args=("-T", "10", "-W", "2", "-y", "http,https", "-Y", PROXY_ADDR))
    for _ in range(4):
        _marked(srv.port)
    assert {ln.split(" ")[0] for ln in srv.wait_log(4)} == {"192.0.2.90"}


@pytest.mark.skipif(not shutil.which("systemd-socket-activate"),
                    reason="systemd-socket-activate (Debian: systemd) is not installed")
def test_socket_activation(build, tmp_path):
    """A passed socket is marked by its port (-y PORT)."""
    from test_production import make_docroot, san_env
    root = str(tmp_path / "www")
    make_docroot(root, TREE)
    port = free_port()
    cmd = ["systemd-socket-activate", "-l", "127.0.0.1:%d" % port, build.binary, "-n",
           "-y", str(port), "-Y", PROXY_ADDR]
    proc = subprocess.Popen(cmd, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=san_env(build))
    try:
        # systemd-socket-activate binds first, and starts gatling on the first connection
        deadline = time.monotonic() + 5
        while True:
            try:
                _marked(port, tls=False)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "nothing listens on %d" % port
                time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        err = proc.stderr.read().decode(errors="replace")
        assert "listening on a passed socket, port %d" % port in err, err
        assert "AddressSanitizer" not in err and "runtime error" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_upgrade_keeps_the_marking(build, tmp_path):
    """SIGUSR2: the new binary takes the listeners over, marked as before."""
    from test_production import gone, kill_upgraded, new_pid, wait_for
    from conftest import make_docroot, start_server
    root = make_docroot(str(tmp_path / "www"), TREE)
    args = ("-n", "-T", "10", "-y", "http,https", "-Y", PROXY_ADDR)
    if SCHEME == "https":  # a fixed port: "-e 0" in the new binary's argv would be another
        args += ("-C", os.path.join(conftest.test_pki(), "certs"), "-e", str(free_port()))
    srv = start_server(build, root, args)
    if SCHEME == "https":
        srv.port = _https_port(srv)
    pid = None
    try:
        _marked(srv.port)
        mark = len(srv.errlog)
        os.kill(srv.pid, signal.SIGUSR2)
        pid = wait_for(lambda: new_pid(srv, mark), 5, "the new process")
        wait_for(lambda: gone(srv.pid), 5, "the old process exiting")
        _marked(srv.port)
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: gone(pid), 5, "the new process stopping")
    finally:
        kill_upgraded(srv, pid)
