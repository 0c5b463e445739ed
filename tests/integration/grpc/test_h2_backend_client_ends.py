"""A client's stream that ends, empty or reset, at each stage of the life of
gatling's HTTP/2 connection to the backend (issue 75: proxy_h2.c's head
comment says which memory nghttp2 may point to in each state).

The client is raw python3-h2 (HTTP/2 over TLS with ALPN h2 in the TLS
passes, by prior knowledge to the plain port otherwise), sending each ending
in the same write as its HEADERS where the stage is short; the backend is
python3-h2 too (H2Spy), recording what it saw of each stream, over TLS for
the h2/ rules.  The stages: the backend connection still connecting (its
listen queue full, so the SYN waits for a retransmission), its TLS
handshake under way (h2/, the backend holding its ServerHello), HEADERS
queued but not sent, the request body under way, and the answer begun.  The
endings: RST_STREAM, an empty DATA with END_STREAM (the body that ends
empty: gRPC's empty_stream, an iterator that yields nothing), DATA then
RST_STREAM, and a request with no body at all.  What is proven: no crash
(the sanitizer build's teardown reads stderr), an empty body reaches the
backend as an empty body and is answered, a stream the client reset is
reset at the backend (or never sent), and none of it counts against the
backend: a pool of two stays up (/metrics) and nothing is logged as its
failure.
"""
import contextlib
import os
import socket
import ssl
import threading
import time

import pytest

import appservers
from conftest import H3, TLS, fetch, import_h2, wait_for
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it

import_h2()
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.errors  # noqa: E402
import h2.events  # noqa: E402
import h2.exceptions  # noqa: E402

pytestmark = pytest.mark.skipif(H3, reason="the client here is HTTP/2 (raw python3-h2)")

ROUNDS = int(os.environ.get("H2B_ENDS_ROUNDS", "6"))  # fresh servers per stage


class H2Spy:
    """A python3-h2 backend on loopback recording, per connection and
    stream, the events it saw ("head", "data N", "end", "reset"); a stream
    whose request ended is answered 200 "got N" (N: its body's length),
    or with begin=True its head and a first piece at once, never its end.
    tls: serve h2 over TLS (the test CA's server.pem), holding the
    handshake hold seconds first.  full_queue: the listen queue is kept
    full (two connections nobody accepts) until release()."""

    def __init__(self, begin=False, tls=False, hold=0.0, full_queue=False):
        self.begin, self.tls, self.hold = begin, tls, hold
        self.seen = {}  # (connection number, stream id) -> [events]
        self.conns = 0
        self.socks = []
        self.lock = threading.Lock()
        self.lst = appservers.listener(backlog=0 if full_queue else 16)
        self.port = self.lst.getsockname()[1]
        self.fillers = []
        if full_queue:  # backlog 0 holds one: the next SYN is dropped
            for _ in range(2):
                f = socket.socket()
                f.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    f.connect(("127.0.0.1", self.port))
                self.fillers.append(f)
            time.sleep(0.1)
        else:
            self.release()

    def release(self):
        """Accept from now on (the fillers are accepted and closed first)."""
        self.started = True
        appservers.serve(self.lst, self.handle, threaded=True)
        for f in self.fillers:
            f.close()

    def note(self, n, sid, what):
        with self.lock:
            self.seen.setdefault((n, sid), []).append(what)

    def handle(self, sock):
        with self.lock:
            self.conns += 1
            n = self.conns
        self.socks.append(sock)
        if self.tls:
            time.sleep(self.hold)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            pem = os.path.join(pki_dir(), "certs", "server.pem")
            ctx.load_cert_chain(pem, pem)
            ctx.set_alpn_protocols(["h2"])
            try:
                sock = ctx.wrap_socket(sock, server_side=True)
            except (OSError, ssl.SSLError):
                return  # a filler, or gatling gave up (-Q)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        c.initiate_connection()
        lens = {}
        try:
            sock.sendall(c.data_to_send())
            while True:
                data = sock.recv(65536)
                if not data:
                    return
                for ev in c.receive_data(data):
                    try:
                        self.event(c, n, ev, lens)
                    except h2.exceptions.StreamClosedError:
                        pass  # answered after its reset, read in the same bytes
                sock.sendall(c.data_to_send())
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            return

    def event(self, c, n, ev, lens):
        if isinstance(ev, h2.events.RequestReceived):
            self.note(n, ev.stream_id, "head")
            lens[ev.stream_id] = 0
            if self.begin:
                c.send_headers(ev.stream_id, [(":status", "200"), ("content-type", "text/plain")])
                c.send_data(ev.stream_id, b"first piece\n")
        elif isinstance(ev, h2.events.DataReceived):
            self.note(n, ev.stream_id, "data %d" % len(ev.data))
            lens[ev.stream_id] = lens.get(ev.stream_id, 0) + len(ev.data)
            if ev.flow_controlled_length:
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.note(n, ev.stream_id, "end")
            if not self.begin:
                body = b"got %d\n" % lens.get(ev.stream_id, 0)
                c.send_headers(ev.stream_id, [(":status", "200"), ("content-type", "text/plain"),
                                              ("content-length", str(len(body)))])
                c.send_data(ev.stream_id, body, end_stream=True)
        elif isinstance(ev, h2.events.StreamReset):
            self.note(n, ev.stream_id, "reset")

    def streams(self):
        with self.lock:
            return {k: list(v) for k, v in self.seen.items()}

    def close(self):
        self.lst.close()
        for s in self.socks + self.fillers:
            with contextlib.suppress(OSError):
                s.close()


class RawClient:
    """python3-h2 over one connection to gatling: frames queued by the
    caller go in one write (send()); read() collects answers."""

    def __init__(self, srv):
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        if TLS:
            ctx = ssl.create_default_context(cafile=os.path.join(pki_dir(), "ca.pem"))
            ctx.set_alpn_protocols(["h2"])
            sock = ctx.wrap_socket(sock, server_hostname="localhost")
            assert sock.selected_alpn_protocol() == "h2"
        self.sock = sock
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.c.initiate_connection()
        self.status, self.body, self.done = {}, {}, set()

    def head(self, path, end=False, method="POST", extra=()):
        sid = self.c.get_next_available_stream_id()
        h = [(":method", method), (":scheme", "https" if TLS else "http"),
             (":authority", "localhost"), (":path", path)] + list(extra)
        self.c.send_headers(sid, h, end_stream=end)
        return sid

    def send(self):
        self.sock.sendall(self.c.data_to_send())

    def read(self, until, timeout=15):
        """Read until until(self) holds (AssertionError past timeout)."""
        end = time.monotonic() + timeout
        while not until(self):
            self.sock.settimeout(max(0.05, end - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                data = None
            assert data is not None and time.monotonic() < end, \
                "no answer in %ds: %r" % (timeout, (self.status, self.body))
            assert data, "gatling closed the connection: %r" % ((self.status, self.body),)
            for ev in self.c.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    self.status[ev.stream_id] = dict(ev.headers)[b":status"].decode()
                elif isinstance(ev, h2.events.DataReceived):
                    self.body[ev.stream_id] = self.body.get(ev.stream_id, b"") + ev.data
                    self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    self.done.add(ev.stream_id)
            self.send()

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()


def proxied(gatling, rule, extra=()):
    args = ("-T", "10", "-Q", "5", "-S") + tuple(extra) + ("-P", rule)
    if rule.startswith("h2/") or any(a.startswith("x=h2/") for a in extra):
        args = ("--proxy-ca", os.path.join(pki_dir(), "ca.pem")) + args
    return gatling({".proxy": "", "index.html": "static\n"}, args=args, check_fds=False)


def endings(cl):
    """One stream of each ending, all in one write: {name: stream id}."""
    s = {}
    s["reset"] = cl.head("/b/reset")
    cl.c.reset_stream(s["reset"], h2.errors.ErrorCodes.CANCEL)
    s["empty"] = cl.head("/b/empty")
    cl.c.send_data(s["empty"], b"", end_stream=True)
    s["data_reset"] = cl.head("/b/data-reset")
    cl.c.send_data(s["data_reset"], b"x" * 100)
    cl.c.reset_stream(s["data_reset"], h2.errors.ErrorCodes.CANCEL)
    s["empty_reset"] = cl.head("/b/empty-reset")
    cl.c.send_data(s["empty_reset"], b"", end_stream=True)
    cl.c.reset_stream(s["empty_reset"], h2.errors.ErrorCodes.CANCEL)
    s["nobody"] = cl.head("/b/nobody", end=True, method="GET")
    s["body"] = cl.head("/b/body")
    cl.c.send_data(s["body"], b"y" * 10, end_stream=True)
    cl.send()
    return s


def backend_healthy(srv):
    """Nothing logged as a failure of ours or the backend's, no sanitizer
    report."""
    bad = [l for l in srv.errlog if "out of memory" in l or "down for" in l
           or "AddressSanitizer" in l or "runtime error" in l]
    assert not bad, "\n".join(srv.errlog)


def counted(srv, name):
    """The sum of a /metrics counter over every backend."""
    text = fetch(srv.port, "/metrics", timeout=10).body.decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.startswith(name + "{"))


def answered(cl, s):
    """The streams that must be answered are, with what the backend got."""
    want = [s["empty"], s["nobody"], s["body"]]
    cl.read(lambda c: all(x in c.done for x in want))
    assert cl.status[s["empty"]] == "200" and cl.body[s["empty"]] == b"got 0\n", cl.status
    assert cl.status[s["nobody"]] == "200" and cl.body[s["nobody"]] == b"got 0\n"
    assert cl.status[s["body"]] == "200" and cl.body[s["body"]] == b"got 10\n"


def reset_streams_at_backend(spy):
    """Each stream the backend saw of a reset request was reset there (or
    never sent): none ended as if complete, but the empty ones, whose
    END_STREAM came before the reset."""
    for (_, _), ev in spy.streams().items():
        if "reset" in ev:
            assert "end" not in ev or ev.index("end") < ev.index("reset"), ev


@pytest.mark.parametrize("kind", ["h2c", "h2"])
def test_endings_while_the_connection_opens(gatling, kind):
    """Every ending in the write that makes gatling open its connection to
    the backend (the HEADERS still queued in nghttp2 as the client's reset
    frees the request: the use-after-free of issue 75), ROUNDS fresh
    servers: the live requests answered, the reset ones never sent or
    reset, the server alive."""
    for _ in range(ROUNDS):
        spy = H2Spy(tls=kind == "h2")
        try:
            srv = proxied(gatling, "%s/127.0.0.1/%d/^/b" % (kind, spy.port))
            cl = RawClient(srv)
            try:
                s = endings(cl)
                answered(cl, s)
            finally:
                cl.close()
            reset_streams_at_backend(spy)
            assert srv.alive()
            backend_healthy(srv)
            srv.finish()
        finally:
            spy.close()


def test_endings_while_connecting(gatling):
    """The backend's listen queue full: gatling's connect waits for its SYN
    to be sent again (a second or more); every ending comes meanwhile, in
    three writes apart; then the backend accepts."""
    spy = H2Spy(full_queue=True)
    try:
        srv = proxied(gatling, "h2c/127.0.0.1/%d/^/b" % spy.port)
        cl = RawClient(srv)
        try:
            s = endings(cl)
            time.sleep(0.2)
            late = cl.head("/b/late-reset")
            cl.send()
            time.sleep(0.2)
            cl.c.reset_stream(late, h2.errors.ErrorCodes.CANCEL)
            cl.send()
            spy.release()
            answered(cl, s)
        finally:
            cl.close()
        reset_streams_at_backend(spy)
        backend_healthy(srv)
    finally:
        spy.close()


def test_endings_during_the_backends_tls_handshake(gatling):
    """h2/: the backend holds its TLS handshake 0.5 s; the client's streams
    end meanwhile, some in the first write, one reset later."""
    spy = H2Spy(tls=True, hold=0.5)
    try:
        srv = proxied(gatling, "h2/127.0.0.1/%d/^/b" % spy.port)
        cl = RawClient(srv)
        try:
            s = endings(cl)
            late = cl.head("/b/late")
            cl.send()
            time.sleep(0.2)
            cl.c.reset_stream(late, h2.errors.ErrorCodes.CANCEL)
            cl.send()
            answered(cl, s)
        finally:
            cl.close()
        reset_streams_at_backend(spy)
        assert not any(ev[:1] == ["head"] and "end" in ev
                       for k, ev in spy.streams().items() if k[1] == late)
        backend_healthy(srv)
    finally:
        spy.close()


@pytest.mark.parametrize("stage", ["mid_body", "answer_begun"])
def test_reset_after_the_head_went(gatling, stage):
    """The backend has the stream's HEADERS (and, answer_begun, has
    answered its head and a first piece): the client's reset reaches it
    as RST_STREAM, and the connection serves the next request."""
    spy = H2Spy(begin=stage == "answer_begun")
    try:
        srv = proxied(gatling, "h2c/127.0.0.1/%d/^/b" % spy.port)
        cl = RawClient(srv)
        try:
            sid = cl.head("/b/x")
            cl.c.send_data(sid, b"z" * 50)
            cl.send()
            wait_for(lambda: any("data 50" in ev for ev in spy.streams().values()), 10,
                     "the backend got the body's first piece")
            if stage == "answer_begun":
                cl.read(lambda c: sid in c.body)
            cl.c.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
            nxt = cl.head("/b/next")
            cl.c.send_data(nxt, b"", end_stream=True)
            cl.send()
            if stage == "answer_begun":
                spy.begin = False  # the next one is answered whole
            cl.read(lambda c: nxt in c.done)
            assert cl.status[nxt] == "200"
        finally:
            cl.close()
        wait_for(lambda: any(ev[0] == "head" and "reset" in ev and "data 50" in ev
                             for ev in spy.streams().values()), 10,
                 "the backend saw the reset: %r" % spy.streams())
        backend_healthy(srv)
    finally:
        spy.close()


def test_client_endings_never_count_against_a_pool(gatling):
    """A pool of two healthy members, and twelve rounds of every ending: no
    member marked down, no 502 counted, and a request after it all is
    answered."""
    a, b = H2Spy(), H2Spy()
    try:
        pool = "x=h2c/127.0.0.1/%d,127.0.0.1/%d" % (a.port, b.port)
        srv = proxied(gatling, "@x/^/b", extra=("--pool", pool))
        for _ in range(12):
            cl = RawClient(srv)
            try:
                answered(cl, endings(cl))
            finally:
                cl.close()
        for name in ("gatling_backend_failures_total", "gatling_backend_timeouts_total",
                     "gatling_backend_downs_total"):
            assert counted(srv, name) == 0, name
        assert counted(srv, "gatling_backend_up") == 2
        cl = RawClient(srv)
        try:
            sid = cl.head("/b/after", end=True, method="GET")
            cl.send()
            cl.read(lambda c: sid in c.done)
            assert cl.status[sid] == "200"
        finally:
            cl.close()
        backend_healthy(srv)
    finally:
        a.close()
        b.close()


GRPC_ENDS = r'''
import sys, time, grpc
ch = grpc.insecure_channel(sys.argv[1])
try:  # the deadline: grpc-timeout 1S, the backend sleeping 3 s
    ch.unary_unary("/test.Echo/Unary")(b"sleep:3", timeout=1)
except grpc.RpcError as e:
    print(e.code().name)
f = ch.unary_unary("/test.Echo/Unary").future(b"sleep:3")  # cancelled after 0.5 s
time.sleep(0.5)
f.cancel()
def gen():
    yield b"a"
    time.sleep(3)
it = ch.stream_stream("/test.Echo/Bidi")(gen())  # cancelled after its first answer
next(it)
it.cancel()
print("cancelled", f.cancelled())
'''


@pytest.mark.skipif(TLS, reason="grpcio by h2c prior knowledge to the plain port")
def test_grpc_cancel_and_deadline_are_the_clients(gatling, tmp_path):
    """grpcio's deadline (grpc-timeout, the client resetting the stream at
    it) and its cancels (before the answer, mid-bidi) are logged and
    counted as DEADLINE_EXCEEDED and CANCELLED, the client's verdicts,
    never as UNAVAILABLE nor against the backend."""
    import subprocess
    from h2backends import PY, GrpcBackend
    if subprocess.run([PY, "-c", "import grpc"], capture_output=True).returncode:
        pytest.skip("needs python3-grpcio (tests/setup.sh)")
    b = GrpcBackend(tmp_path)
    try:
        srv = proxied(gatling, r"h2c/127.0.0.1/%d/^/test\." % b.port,
                      extra=("--log-format", "json"))
        r = subprocess.run([PY, "-c", GRPC_ENDS, "127.0.0.1:%d" % srv.port],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.split() == ["DEADLINE_EXCEEDED", "cancelled", "True"], r
        import json
        wait_for(lambda: sum(1 for l in srv.log if '"grpc_status"' in l) >= 3, 10,
                 "three calls logged: %r" % srv.log)
        got = sorted(json.loads(l)["grpc_status"] for l in srv.log if '"grpc_status"' in l)
        assert got == [1, 1, 4], srv.log
        text = fetch(srv.port, "/metrics", timeout=10).body.decode()
        assert 'gatling_grpc_responses_total{code="CANCELLED"} 2' in text, text
        assert 'gatling_grpc_responses_total{code="DEADLINE_EXCEEDED"} 1' in text, text
        assert 'gatling_grpc_responses_total{code="UNAVAILABLE"} 0' in text, text
        for name in ("gatling_backend_failures_total", "gatling_backend_timeouts_total"):
            assert counted(srv, name) == 0, name
    finally:
        b.stop()


def test_grpc_check_names_a_missing_health_service(gatling):
    """check=grpc against a backend that answers grpc-status 12
    (UNIMPLEMENTED: no grpc.health.v1 service): the health log says so."""
    def answer(c, sid):
        c.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc"),
                             ("grpc-status", "12"), ("grpc-message", "unknown service")],
                       end_stream=True)

    class NoHealth(H2Spy):
        def event(self, c, n, ev, lens):
            if isinstance(ev, h2.events.StreamEnded):
                answer(c, ev.stream_id)
    spy = NoHealth()
    try:
        pool = "g=h2c/127.0.0.1/%d;check=grpc;interval=1;fall=1;rise=1" % spy.port
        srv = proxied(gatling, r"@g/^/test\.", extra=("--pool", pool))
        wait_for(lambda: any("no gRPC health service" in l and "UNIMPLEMENTED" in l
                             for l in srv.errlog), 10, "the check's reason: %r" % srv.errlog)
    finally:
        spy.close()


def test_empty_chunked_http11_body(gatling):
    """An HTTP/1.1 POST whose chunked body is empty (its last chunk at
    once) reaches the HTTP/2 backend as an empty body and is answered."""
    spy = H2Spy()
    try:
        srv = proxied(gatling, "h2c/127.0.0.1/%d/^/b" % spy.port)
        port = srv.plain_port or srv.port
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                if srv.plain_port is None and TLS:
                    pytest.skip("no plain port")
                s.sendall(b"POST /b/chunked HTTP/1.1\r\nHost: localhost\r\n"
                          b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n")
                got = b""
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    got += d
            assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"got 0\n"), got
        backend_healthy(srv)
    finally:
        spy.close()


QUIET_BIDI = r'''
import queue, sys, time, grpc
ch = grpc.insecure_channel(sys.argv[1])
q = queue.Queue()
def gen():
    while True:
        m = q.get()
        if m is None:
            return
        yield m
it = ch.stream_stream("/test.Echo/Bidi")(gen(), timeout=30)
q.put(b"one")
print(len(next(it)))
time.sleep(float(sys.argv[2]))  # quiet both ways, longer than a -B window
q.put(b"two")
print(len(next(it)))
q.put(None)
print(list(it) == [], it.code().name)
'''


@pytest.mark.skipif(TLS, reason="grpcio by h2c prior knowledge to the plain port")
def test_a_quiet_grpc_stream_outlives_the_rate_window(gatling, tmp_path):
    """A bidirectional call quiet both ways for longer than -B's window (-T 2
    makes the window 2 s) is not cut as a slow client: nothing waits for the
    client to read, and -Q (10 s) is what times a gRPC stream's silence."""
    import subprocess
    from h2backends import PY, GrpcBackend
    if subprocess.run([PY, "-c", "import grpc"], capture_output=True).returncode:
        pytest.skip("needs python3-grpcio (tests/setup.sh)")
    b = GrpcBackend(tmp_path)
    try:
        srv = gatling({".proxy": ""}, check_fds=False, args=(
            "-T", "2", "-Q", "10", "-P", r"h2c/127.0.0.1/%d/^/test\." % b.port))
        r = subprocess.run([PY, "-c", QUIET_BIDI, "127.0.0.1:%d" % srv.port, "4.5"],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.split() == ["3", "3", "True", "OK"], (r, srv.errlog)
    finally:
        b.stop()
