"""--early-data (issue 80): TLS 1.3 early data (0-RTT) over HTTPS/1.1 and HTTP/2,
with openssl s_client as the returning client (-sess_out, then -sess_in
-early_data FILE) and a relay of the test's own that delays each direction, so
that round trips show: the early request answered one round trip sooner than
after a plain resumption, a POST held until the client's Finished came (the
backend sees it after, without Early-Data: 1), a captured first flight sent
again (to one worker and to -W 2's two) answered once and counted as a
replay, a table of 8 refusing the 9th, a new table refusing for its first
11 s, and no early data without the option.  The servers share one start:
the 11 s a new table refuses are waited out once, for all of them."""
import json
import os
import queue
import shutil
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import IO_TIMEOUT, client_pki, https_port, make_docroot, start_server, wait_for
from conftest import test_pki as pki_dir  # not a test of this module's
from appservers import listener, read_head, serve

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="needs openssl")

WINDOW = 11.0  # site/replay.h's REPLAY_WINDOW_MS: a new table refuses for as long
DELAY = 0.05   # the relay's delay each way: a round trip of 100 ms
PROXY_V1 = b"PROXY TCP4 192.0.2.7 127.0.0.1 40000 443\r\n"
REQ = b"GET /f.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


def tls_args(*more):
    return ("-T", "10", "-C", os.path.join(pki_dir(), "certs"), "-e", "0", "-S") + more


# ---- the client's bytes: HTTP/2 frames written by hand (no h2 library needed)

def frame(kind, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", sid) + payload


def h2_first_flight(method, path, body=None):
    """The preface, an empty SETTINGS and one request on stream 1 (HPACK
    literals without indexing: :method and :scheme from the static table)."""
    def lit(idx, v):
        return bytes([idx, len(v)]) + v.encode()
    block = (b"\x82" if method == "GET" else b"\x83") + b"\x87" + lit(4, path) + \
        lit(1, "localhost")
    out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
    if body is None:
        return out + frame(1, 0x5, 1, block)  # END_HEADERS | END_STREAM
    return out + frame(1, 0x4, 1, block) + frame(0, 0x1, 1, body)


# ---- a relay that delays each direction and records what the client sent

class Relay:
    """127.0.0.1:port -> target, each chunk delivered delay seconds after it
    was read, in order.  conns: per connection, the client's chunks as
    (monotonic time just before it was sent to the server, bytes)."""

    def __init__(self, target, delay=DELAY, prefix=b""):
        self.target, self.delay, self.prefix = target, delay, prefix
        self.lst = socket.socket()
        self.lst.bind(("127.0.0.1", 0))
        self.lst.listen(16)
        self.port = self.lst.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lst.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            s.sendall(self.prefix)  # a PROXY header, as a load balancer sends first
            sent = []
            self.conns.append(sent)
            self._pipe(c, s, sent)
            self._pipe(s, c, None)

    def _pipe(self, src, dst, record):
        q = queue.Queue()

        def reader():
            while True:
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                q.put((time.monotonic() + self.delay, data))
                if not data:
                    return

        def writer():
            while True:
                due, data = q.get()
                time.sleep(max(0.0, due - time.monotonic()))
                # the time before the send: the server may read the bytes, and act on
                # them, before this thread runs again (poll's CI pass: 70 us before)
                t = time.monotonic()
                try:
                    if not data:
                        dst.shutdown(socket.SHUT_WR)
                        return
                    dst.sendall(data)
                except OSError:
                    return
                if record is not None:
                    record.append((t, data))
        threading.Thread(target=reader, daemon=True).start()
        threading.Thread(target=writer, daemon=True).start()

    def close(self):
        self.lst.close()


# ---- s_client

def client(port, sess_in=None, sess_out=None, early=None, alpn=None, stdin=b"",
           until=None, timeout=10, cert=None):
    """One s_client connection to localhost at port: (its output, seconds from
    its start until `until` (bytes) appeared in it, or None).  stdin stays
    open until that (or the ticket for sess_out) came, so that s_client does
    not leave first."""
    cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername",
           "localhost", "-tls1_3", "-CAfile", os.path.join(pki_dir(), "ca.pem")]
    cmd += ["-sess_in", sess_in] if sess_in else []
    cmd += ["-sess_out", sess_out] if sess_out else []
    cmd += ["-early_data", early] if early else []
    cmd += ["-alpn", alpn] if alpn else []
    cmd += ["-cert", cert, "-key", cert] if cert else []
    if sess_out and os.path.exists(sess_out):
        os.unlink(sess_out)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    p.stdin.write(stdin)
    p.stdin.flush()
    out, when = b"", None
    end = t0 + timeout
    os.set_blocking(p.stdout.fileno(), False)
    while time.monotonic() < end:
        try:
            chunk = os.read(p.stdout.fileno(), 65536)
        except BlockingIOError:
            chunk = None
        if chunk:
            out += chunk
            if until and when is None and until in out:
                when = time.monotonic() - t0
        elif chunk == b"":
            break
        done_until = not until or when is not None
        done_ticket = not sess_out or os.path.exists(sess_out)
        if done_until and done_ticket:
            break
        time.sleep(0.002)
    try:
        p.stdin.close()
    except BrokenPipeError:
        pass
    p.stdin = None  # communicate() must not flush it again
    try:
        rest, _ = p.communicate(timeout=timeout)
        out += rest or b""
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    return out.decode(errors="replace"), when


def ticket(port, path, alpn=None, cert=None):
    out, _ = client(port, sess_out=path, alpn=alpn, stdin=REQ if not alpn else b"", cert=cert)
    assert os.path.exists(path), out
    return path


def write(tmp, name, data):
    path = os.path.join(str(tmp), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---- the servers, started together: one wait for the young tables

class Backend:
    """A -P backend of the test's own that notes each request head and when."""

    def __init__(self):
        self.seen = []
        self.lst = listener()
        serve(self.lst, self.handle, threaded=True)

    def handle(self, c):
        with c:
            head = read_head(c)
            if head is None:
                return
            n = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":")[1])
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < n:
                more = c.recv(65536)
                if not more:
                    break
                body += more
            self.seen.append((time.monotonic(), head))
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")


@pytest.fixture(scope="module")
def lab(build, tmp_path_factory):
    """main: --early-data 64, /app/ to a backend, the JSON log; w2: the same
    table with -W 2; small: --early-data 8; off: without the option.  Each
    one's table is older than its window before the first test."""
    base = tmp_path_factory.mktemp("early-" + build.name)
    root = str(base / "root")
    make_docroot(root, {"f.txt": "hello\n", ".proxy": ""})
    be = Backend()
    servers = {}
    try:
        servers["main"] = start_server(build, root, tls_args(
            "--early-data", "64", "--log-format", "json",
            "-P", "127.0.0.1/%d/^/app/" % be.lst.getsockname()[1]))
        servers["w2"] = start_server(build, root, tls_args("--early-data", "64", "-W", "2"))
        servers["small"] = start_server(build, root, tls_args("--early-data", "8"))
        servers["off"] = start_server(build, root, tls_args())
        servers["proxied"] = start_server(build, root, tls_args(
            "--early-data", "64", "-y", "https", "-Y", "127.0.0.1"))
        alice = os.path.join(client_pki(str(base)), "alice.pem")
        servers["mtls"] = start_server(build, root, tls_args(
            "--early-data", "64", "--tls-client-ca", os.path.join(str(base), "client", "ca.pem")))
        started = time.monotonic()
        ports = {k: https_port(s) for k, s in servers.items()}
        proxy = Relay(ports["proxied"], delay=0.0, prefix=PROXY_V1)
        ports["proxied"] = proxy.port  # every client of it through a "load balancer"
        # tickets now, while the tables are young (a ticket is good for an hour)
        tickets = {k: ticket(ports[k], str(base / ("%s.sess" % k)),
                             cert=alice if k == "mtls" else None) for k in servers}
        tickets["main-h2"] = ticket(ports["main"], str(base / "main-h2.sess"), alpn="h2")
        time.sleep(max(0.0, started + WINDOW + 0.5 - time.monotonic()))
        yield {"srv": servers, "port": ports, "ticket": tickets, "backend": be,
               "tmp": base, "alice": alice}
    finally:
        be.lst.close()
        if "proxied" in servers:
            proxy.close()
        for s in servers.values():
            s.finish()


METRICS = {'gatling_early_data_total{outcome="accepted"}': "early_data_accepted",
           'gatling_early_data_total{outcome="replayed"}': "early_data_replayed",
           'gatling_early_data_total{outcome="refused"}': "early_data_refused",
           'gatling_early_data_requests_total{answer="early"}': "early_data_requests",
           'gatling_early_data_requests_total{answer="held"}': "early_data_held",
           'gatling_early_data_requests_total{answer="too_early"}': "early_data_too_early"}


def early(srv):
    """The early data counters from /metrics (over the plain port: srv.port is
    it unless the https pass made it the HTTPS one), summed over -W's workers."""
    port = srv.plain_port or srv.port
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        data = b""
        while True:
            more = s.recv(65536)
            if not more:
                break
            data += more
    out = {}
    for line in data.decode().splitlines():
        name, _, v = line.rpartition(" ")
        if name in METRICS:
            out[METRICS[name]] = int(float(v))
    assert len(out) == len(METRICS), data
    return out


def logged(srv, path):
    """The access log's lines (JSON) for path."""
    out = []
    for line in list(srv.log):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if " %s " % path in o.get("request", ""):
            out.append(o)
    return out


def wait_early(srv, key, want, timeout=5.0):
    wait_for(lambda: early(srv)[key] >= want, timeout, "%s >= %d" % (key, want))


# ---- the tests

def test_off_by_default(lab):
    """Without --early-data a ticket allows none: s_client sends none
    (the ticket says 0), and the server counts nothing."""
    port, tk = lab["port"]["off"], lab["ticket"]["off"]
    f = write(lab["tmp"], "req.txt", REQ)
    out, _ = client(port, sess_in=tk, early=f, stdin=REQ, until=b"hello")
    assert "Reused, TLSv1.3" in out, out
    assert "Early data was accepted" not in out, out
    assert "hello" in out  # the request went after the handshake
    assert not any(early(lab["srv"]["off"]).values())


def test_h1_answered_one_round_trip_sooner(lab):
    """Through a relay that delays each direction DELAY s: the first byte of
    the answer comes one round trip sooner with early data (answered right
    after the server's Finished, 0.5-RTT) than after a plain resumption."""
    srv, port = lab["srv"]["main"], lab["port"]["main"]
    f = write(lab["tmp"], "req.txt", REQ)
    relay = Relay(port)
    try:
        before = early(srv)
        with_early, without = [], []
        for _ in range(3):
            out, t = client(relay.port, sess_in=lab["ticket"]["main"], early=f, until=b"hello")
            assert "Early data was accepted" in out and t is not None, out
            with_early.append(t)
            out, t = client(relay.port, sess_in=lab["ticket"]["main"], stdin=REQ,
                            until=b"hello")
            assert "Reused, TLSv1.3" in out and t is not None, out
            without.append(t)
    finally:
        relay.close()
    saved = min(without) - min(with_early)
    rtt = 2 * DELAY
    print("first byte: %.0f ms with early data, %.0f ms without (RTT %.0f ms)"
          % (min(with_early) * 1000, min(without) * 1000, rtt * 1000))
    assert saved > 0.7 * rtt, (with_early, without)
    after = early(srv)
    assert after["early_data_accepted"] - before["early_data_accepted"] == 3
    assert after["early_data_requests"] - before["early_data_requests"] == 3


def test_h2_early_get_answered_and_post_425(lab):
    """ALPN h2 in the resumed session: the preface, SETTINGS and a GET in the
    early data are answered before the handshake completes; a POST with a
    body is answered 425 Too Early (RFC 8470), never dispatched."""
    srv, port = lab["srv"]["main"], lab["port"]["main"]
    get = write(lab["tmp"], "h2get.bin", h2_first_flight("GET", "/f.txt"))
    post = write(lab["tmp"], "h2post.bin", h2_first_flight("POST", "/app/h2", b"abcde"))
    relay = Relay(port, delay=0.02)
    try:
        before = early(srv)
        out, _ = client(relay.port, sess_in=lab["ticket"]["main-h2"], early=get, alpn="h2",
                        until=b"hello")
        assert "Early data was accepted" in out and "ALPN protocol: h2" in out, out
        wait_early(srv, "early_data_requests", before["early_data_requests"] + 1)
        seen = len(lab["backend"].seen)
        out, _ = client(relay.port, sess_in=lab["ticket"]["main-h2"], early=post, alpn="h2",
                        until=b"Early data was")
        assert "Early data was accepted" in out, out
        wait_early(srv, "early_data_too_early", before["early_data_too_early"] + 1)
    finally:
        relay.close()
    srv.wait_log(1)
    wait_for(lambda: any(o["status"] == 425 for o in logged(srv, "/app/h2")), 5, "the 425 logged")
    assert len(lab["backend"].seen) == seen  # the POST never reached the backend
    got = [o for o in logged(srv, "/f.txt") if o["protocol"] == "h2"]
    assert got and got[-1]["early_data"] is True and got[-1]["status"] == 200


def test_h1_post_held_until_the_handshake(lab):
    """A POST in early data (not safe to replay) is held: the backend gets it
    only after the client's Finished reached the server, without
    Early-Data: 1, and the log says early_data false; a GET in early data
    reaches it with Early-Data: 1."""
    srv, port, be = lab["srv"]["main"], lab["port"]["main"], lab["backend"]
    post = write(lab["tmp"], "post.txt", b"POST /app/post HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Length: 5\r\nConnection: close\r\n\r\nabcde")
    get = write(lab["tmp"], "get.txt", b"GET /app/get HTTP/1.1\r\nHost: localhost\r\n"
                b"Connection: close\r\n\r\n")
    relay = Relay(port)
    try:
        before = early(srv)
        out, _ = client(relay.port, sess_in=lab["ticket"]["main"], early=post, until=b"\nok\n")
        assert "Early data was accepted" in out and "200 OK" in out, out
        out, _ = client(relay.port, sess_in=lab["ticket"]["main"], early=get, until=b"\nok\n")
        assert "Early data was accepted" in out and "200 OK" in out, out
    finally:
        relay.close()
    heads = {h.split(b" ")[1]: (t, h) for t, h in be.seen}
    t_post, h_post = heads[b"/app/post"]
    sent = relay.conns[0]  # the client's second flight (its Finished) left a round trip later
    finished = min(t for t, _ in sent if t > sent[0][0] + 1.5 * DELAY)
    assert t_post >= finished, (t_post, finished, relay.conns[0])
    assert b"early-data" not in h_post.lower()
    assert b"early-data: 1" in heads[b"/app/get"][1].lower()
    after = early(srv)
    assert after["early_data_held"] - before["early_data_held"] == 1
    assert after["early_data_requests"] - before["early_data_requests"] == 1
    wait_for(lambda: logged(srv, "/app/post") and logged(srv, "/app/get"), 5, "logged")
    assert logged(srv, "/app/post")[-1]["early_data"] is False
    assert logged(srv, "/app/get")[-1]["early_data"] is True


def captured_first_flight(lab, name, path="/f.txt"):
    """An accepted early-data connection through the relay: what its client
    sent, all of it (ClientHello, early data, Finished)."""
    f = write(lab["tmp"], "req.txt", REQ.replace(b"/f.txt", path.encode()))
    relay = Relay(lab["port"][name], delay=0.01)
    try:
        out, _ = client(relay.port, sess_in=lab["ticket"][name], early=f, until=b"hello")
        assert "Early data was accepted" in out, out
        time.sleep(0.1)
    finally:
        relay.close()
    return b"".join(d for _, d in relay.conns[0])


def replay(port, data):
    """data sent again, raw, as an attacker who captured it would; what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as s:
        s.sendall(data)
        s.settimeout(2)
        got = b""
        try:
            while True:
                more = s.recv(65536)
                if not more:
                    break
                got += more
        except (socket.timeout, ConnectionResetError):
            pass
    return got


@pytest.mark.parametrize("name,copies", [("main", 1), ("w2", 6)])
def test_replay_refused(lab, name, copies):
    """A captured first flight sent again, once to the same server, and six
    times to -W 2 (whose workers SO_REUSEPORT picks by source port, so both
    get some): never answered again, each counted as a replay."""
    srv, port = lab["srv"][name], lab["port"][name]
    # a path of its own: the module's server has answered /f.txt before, and
    # the log of one of those came after this counted them once (make check-all)
    path = "/f.txt?replay=%s-%d" % (name, time.monotonic_ns())
    data = captured_first_flight(lab, name, path)
    wait_for(lambda: len(logged_plain(srv, path)) == 1, 5, "the first answer logged")
    before = early(srv)
    for _ in range(copies):
        replay(port, data)
    def refused(e):
        return e["early_data_replayed"] + e["early_data_refused"]
    wait_for(lambda: refused(early(srv)) >= refused(before) + copies, 5, "the replays counted")
    time.sleep(0.3)
    after = early(srv)
    # each a replay by the table; OpenSSL may refuse one first (its ticket age
    # check, to the second), counted as refused
    assert refused(after) - refused(before) == copies, (before, after)
    assert after["early_data_replayed"] - before["early_data_replayed"] >= (copies + 1) // 2
    assert after["early_data_accepted"] == before["early_data_accepted"]
    assert after["early_data_requests"] == before["early_data_requests"]
    assert len(logged_plain(srv, path)) == 1


def logged_plain(srv, path):
    """Access log lines (either format) of requests for path over HTTPS/1.1."""
    return [l for l in list(srv.log) if ("GET %s HTTP/1.1" % path) in l]


def test_full_table_refuses(lab):
    """--early-data 8: one bucket of 8; the 9th distinct early handshake
    within the window is refused (answered after the handshake all the same)."""
    srv, port = lab["srv"]["small"], lab["port"]["small"]
    f = write(lab["tmp"], "req.txt", REQ)
    before = early(srv)
    outs = [client(port, sess_in=lab["ticket"]["small"], early=f, until=b"Early data was")[0]
            for _ in range(9)]
    accepted = ["Early data was accepted" in o for o in outs]
    assert accepted == [True] * 8 + [False], outs[-1]
    assert "Early data was rejected" in outs[-1] and "Reused, TLSv1.3" in outs[-1]
    after = early(srv)
    assert after["early_data_accepted"] - before["early_data_accepted"] == 8
    assert after["early_data_refused"] - before["early_data_refused"] == 1


def test_young_table_refuses(build, tmp_path):
    """A fresh start (or an upgrade's new process) refuses early data for its
    first 11 s: a first flight the previous process accepted could be
    replayed to it.  The handshake resumes; the request waits the round trip."""
    root = str(tmp_path / "root")
    make_docroot(root, {"f.txt": "hello\n"})
    srv = start_server(build, root, tls_args("--early-data", "64"))
    try:
        port = https_port(srv)
        tk = ticket(port, str(tmp_path / "t.sess"))
        f = write(tmp_path, "req.txt", REQ)
        out, _ = client(port, sess_in=tk, early=f, stdin=REQ, until=b"hello")
        assert "Reused, TLSv1.3" in out and "Early data was rejected" in out, out
        assert "hello" in out
        e = early(srv)
        assert e["early_data_refused"] == 1 and e["early_data_accepted"] == 0
    finally:
        srv.finish()


def test_behind_a_proxy_header(lab):
    """-y https: the PROXY header first, then the ClientHello with early data:
    answered early, logged with the header's client address."""
    srv, port = lab["srv"]["proxied"], lab["port"]["proxied"]
    f = write(lab["tmp"], "req.txt", REQ)
    before = early(srv)
    out, _ = client(port, sess_in=lab["ticket"]["proxied"], early=f, until=b"hello")
    assert "Early data was accepted" in out and "hello" in out, out
    after = early(srv)
    assert after["early_data_requests"] - before["early_data_requests"] == 1
    wait_for(lambda: any(l.startswith("192.0.2.7 ") for l in list(srv.log)), 5, "logged")


def test_client_certificate_refuses(lab):
    """A certificate that asks for client certificates (--tls-client-ca):
    early data refused, the session resumed, the request answered after the
    handshake."""
    srv, port = lab["srv"]["mtls"], lab["port"]["mtls"]
    f = write(lab["tmp"], "req.txt", REQ)
    before = early(srv)
    out, _ = client(port, sess_in=lab["ticket"]["mtls"], early=f, stdin=REQ, until=b"hello",
                    cert=lab["alice"])
    assert "Reused, TLSv1.3" in out and "Early data was rejected" in out, out
    assert "hello" in out
    after = early(srv)
    assert after["early_data_refused"] - before["early_data_refused"] == 1
    assert after["early_data_accepted"] == before["early_data_accepted"]
