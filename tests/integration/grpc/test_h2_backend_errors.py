"""An HTTP/2 backend (h2c/ rules, proxy_h2.c) that misbehaves: what the
client sees (issue 67's branch coverage of the h2 backend's error paths).

The backends are written here with python3-h2 (or raw bytes where h2 would
refuse to send them) on loopback; the client is the suite's own, over the
pass's protocol.  What is proven: a backend that answers with bytes that are
not HTTP/2, closes at once, resets a stream, ends it before its head, sends
a :status that is not three digits, closes mid-body or never answers (-Q) is
answered 502 or 504 (or a cut body once the head went), with the reason in
the error log, never a hang or a crash; a GOAWAY that refuses a stream sends
it on a new connection; the backend's SETTINGS_MAX_CONCURRENT_STREAMS holds
the streams of one connection; interim 1xx heads, trailers, HEAD, an
absolute-form target, an X-Forwarded-For already there, fields of our own and
over-long field names are answered as gatling.8 says (REVERSE PROXY).
"""
import contextlib
import struct
import threading

import pytest

import appservers
from conftest import H3, MUX, wait_for, import_h2
from h2backends import h2_serve

import_h2()
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.errors  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class H2Backend:
    """A raw HTTP/2 server on loopback: answer(conn, sid, headers, body, sock)
    is called for each complete request (in the connection's thread); what it
    queues on conn is sent after it.  conns counts the connections, reqs the
    requests' header lists."""

    def __init__(self, answer, settings=None):
        self.answer = answer
        self.settings = settings or {}
        self.conns = []
        self.reqs = []
        self.lst = appservers.listener()
        self.port = self.lst.getsockname()[1]
        appservers.serve(self.lst, self.handle, threaded=True)

    def handle(self, sock):
        self.conns.append(sock)
        c = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, validate_inbound_headers=False))
        values = {h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100}
        values.update(self.settings)
        c.local_settings = h2.settings.Settings(client=False, initial_values=values)
        heads, bodies = {}, {}

        def on_event(c, ev):
            if isinstance(ev, h2.events.RequestReceived):
                heads[ev.stream_id] = [(k.decode(), v.decode()) for k, v in ev.headers]
                bodies[ev.stream_id] = b""
            elif isinstance(ev, h2.events.DataReceived):
                bodies[ev.stream_id] += ev.data
            elif isinstance(ev, h2.events.StreamEnded):
                self.reqs.append(heads[ev.stream_id])
                return self.answer(c, ev.stream_id, heads[ev.stream_id], bodies[ev.stream_id],
                                   sock)
        h2_serve(sock, on_event, c)

    def close(self):
        self.lst.close()
        for s in self.conns:
            s.close()


@pytest.fixture
def h2backend():
    made = []

    def make(answer, settings=None):
        b = H2Backend(answer, settings)
        made.append(b)
        return b
    yield make
    for b in made:
        b.close()


def raw_backend(handle):
    """A backend that runs handle(sock) on each connection (its own bytes)."""
    lst = appservers.listener()
    appservers.serve(lst, handle, threaded=True)
    return lst


def proxied(gatling, port, extra=(), rule="^/b"):
    args = ("-T", "10", "-P", "h2c/127.0.0.1/%d/%s" % (port, rule)) + tuple(extra)
    return gatling({".proxy": "", "index.html": "static\n"}, args=args, check_fds=False)


def logged(srv, text, what):
    wait_for(lambda: any(text in line for line in srv.errlog), 10, "%s: %r" % (what, srv.errlog))


def get(srv, path="/b", **kw):
    with srv.connect() as c:
        return c.request(path, **kw)


def test_backend_speaking_no_http2_is_502(gatling):
    """A backend that answers the preface with an HTTP/1.1 response: its
    session fails, the client gets 502 and the log says why."""
    def handle(sock):
        with contextlib.suppress(OSError):
            sock.recv(65536)
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            sock.recv(65536)
    lst = raw_backend(handle)
    try:
        srv = proxied(gatling, lst.getsockname()[1])
        r = get(srv)
        assert r.status == 502, r
        logged(srv, "HTTP/2 backend 127.0.0.1/%d failed" % lst.getsockname()[1],
               "the session's failure logged")
        assert get(srv, "/index.html").body == b"static\n"
    finally:
        lst.close()


def test_backend_closing_at_once_is_502(gatling):
    """A backend that accepts and closes: recv() from it fails (the reset
    logged), 502."""
    def handle(sock):
        with contextlib.suppress(OSError):
            sock.recv(65536)
        sock.close()
    lst = raw_backend(handle)
    try:
        srv = proxied(gatling, lst.getsockname()[1])
        r = get(srv)
        assert r.status == 502, r
        logged(srv, "recv() from", "the backend's close logged")
    finally:
        lst.close()


def test_backend_down_is_502(gatling):
    """No one listening: connect() fails, 502 with the errno in the log."""
    port = appservers.listener()
    p = port.getsockname()[1]
    port.close()
    srv = proxied(gatling, p)
    r = get(srv)
    assert r.status in (502, 503), r
    logged(srv, "Connection refused", "the refused connect logged")


def test_stream_reset_is_502(gatling, h2backend):
    def answer(c, sid, head, body, sock):
        c.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    r = get(srv)
    assert r.status == 502, r
    logged(srv, "the backend reset the stream", "the reset logged")


def test_stream_ended_before_its_head_is_502(gatling, h2backend):
    """An interim 103 and then END_STREAM without a final head: the stream
    ended early, 502."""
    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "103"), ("link", "</a.css>; rel=preload")])
        c.reset_stream(sid, h2.errors.ErrorCodes.NO_ERROR)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    r = get(srv)
    assert r.status == 502, r
    logged(srv, "the backend ended the stream early", "the early end logged")


def test_bad_status_is_502(gatling, h2backend):
    """:status "20" (not three digits): nghttp2 resets the stream as
    malformed, the client gets 502, never a response of status 20."""
    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "20")], end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    r = get(srv)
    assert r.status == 502, r
    assert gatling and get(srv, "/index.html").status == 200


def test_interim_head_then_final(gatling, h2backend):
    """A 100 Continue-like interim head before the final one: the final
    head and its body reach the client."""
    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "103"), ("link", "</a.css>; rel=preload")])
        c.send_headers(sid, [(":status", "200"), ("content-length", "3"),
                             ("x-b", "1")])
        c.send_data(sid, b"ok\n", end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    r = get(srv)
    assert r.status == 200 and r.body == b"ok\n" and r.header("x-b") == "1", r


def test_closed_mid_body_cuts_the_response(gatling, h2backend):
    """The head went, then the backend's connection closes: the client's
    response is cut (a length not reached, or a reset stream), never
    completed, and the log names the backend."""
    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "200"), ("content-length", "100000")])
        c.send_data(sid, b"x" * 1000)
        return "close"
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    with pytest.raises(ConnectionError):
        get(srv)
    logged(srv, "recv() from", "the cut logged")


def test_silent_backend_is_504(gatling, h2backend):
    """A backend that takes the request and never answers: -Q 1 ends it
    with 504 and the log says so."""
    b = h2backend(lambda *a: None)
    srv = proxied(gatling, b.port, extra=("-Q", "1"))
    r = get(srv)
    assert r.status == 504, r
    logged(srv, "the backend did not answer in time (-Q)", "-Q's expiry logged")


def test_silent_body_after_head_is_cut(gatling, h2backend):
    """The head, then silence: -Q cuts the body the client was reading."""
    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "200"), ("content-length", "10")])
        c.send_data(sid, b"12345")
    b = h2backend(answer)
    srv = proxied(gatling, b.port, extra=("-Q", "1"))
    with pytest.raises(ConnectionError):
        get(srv)
    logged(srv, "the backend did not answer in time (-Q)", "-Q's expiry logged")


def test_goaway_refusing_the_stream_goes_again(gatling, h2backend):
    """The first connection answers its first request with GOAWAY (last
    stream 0): the request never reached the application and is answered
    on a new connection."""
    n = []

    def answer(c, sid, head, body, sock):
        n.append(sid)
        if len(n) == 1:
            c.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=0)
            return "close"
        c.send_headers(sid, [(":status", "200"), ("content-length", "6")])
        c.send_data(sid, b"again\n", end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    r = get(srv, "/b", method="POST", body=b"once", headers=[("Content-Length", "4")])
    assert r.status == 200 and r.body == b"again\n", r
    assert len(b.conns) == 2


def test_backend_max_concurrent_streams_holds(gatling, h2backend):
    """SETTINGS_MAX_CONCURRENT_STREAMS 1: two requests at once go on two
    connections, both answered."""
    gate = threading.Event()

    def answer(c, sid, head, body, sock):
        if head and dict(head).get(":path") == "/b/slow":
            gate.wait(10)
        c.send_headers(sid, [(":status", "200"), ("content-length", "3")])
        c.send_data(sid, b"ok\n", end_stream=True)
    b = h2backend(answer, {h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1})
    srv = proxied(gatling, b.port)
    out = []
    t = threading.Thread(target=lambda: out.append(get(srv, "/b/slow")))
    t.start()
    try:
        wait_for(lambda: len(b.reqs) >= 1, 10, "the slow request at the backend")
        r = get(srv, "/b/fast")
        assert r.status == 200 and r.body == b"ok\n", r
        assert len(b.conns) == 2
    finally:
        gate.set()
        t.join(20)
    assert out and out[0].status == 200


def test_trailers_head_and_fields(gatling, h2backend):
    """Trailers of a plain response, HEAD, fields of our own dropped, a
    50-byte field name not passed; the request's own fields as HTTP/2 wants
    them (no Connection, Host as :authority, X-Forwarded-For appended)."""
    def answer(c, sid, head, body, sock):
        h = dict(head)
        c.send_headers(sid, [(":status", "200"), ("server", "backend"),
                             ("x-" + "n" * 48, "long"), ("x-path", h[":path"]),
                             ("x-xff", h.get("x-forwarded-for", "")),
                             ("x-te", h.get("te", "")), ("x-auth", h[":authority"])])
        if h[":method"] == "HEAD":
            c.end_stream(sid)
            return
        c.send_data(sid, b"body\n")
        c.send_headers(sid, [("x-trailer", "t")], end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    hdrs = [("X-Forwarded-For", "192.0.2.9"), ("TE", "trailers"), ("Connection", "close"),
            ]
    with srv.connect() as c:
        r = c.request("/b/t?q=1", headers=hdrs)
    assert r.status == 200 and r.body == b"body\n", r
    assert r.header("x-path") == "/b/t?q=1"
    assert r.header("x-xff") == "192.0.2.9, 127.0.0.1", r
    assert r.header("x-auth") in ("localhost", "127.0.0.1:%d" % srv.port), r
    assert r.header("server") != "backend" and r.header("x-" + "n" * 48) is None
    assert b.reqs and not any(k in ("connection", "host") for k, v in b.reqs[-1])
    with srv.connect() as c:
        r = c.request("/b/h", method="HEAD")
    assert r.status == 200 and r.body == b"", r


@pytest.mark.skipif(MUX or H3, reason="an absolute-form target is HTTP/1.1's")
def test_absolute_form_target_is_origin_form_at_the_backend(gatling, h2backend):
    def answer(c, sid, head, body, sock):
        h = dict(head)
        c.send_headers(sid, [(":status", "200"), ("x-path", h[":path"])])
        c.send_data(sid, b"", end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    with srv.connect() as c:
        r = c.request("http://127.0.0.1:%d/b/abs" % srv.port)
    assert r.status == 200 and r.header("x-path") == "/b/abs", r


def test_large_response_to_a_slow_client(gatling, h2backend):
    """2 MB the backend sends at once to a client that reads slowly: the
    whole body arrives intact (the backend's window acknowledged as the
    client takes it)."""
    big = bytes(range(256)) * 8192

    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "200"), ("content-length", str(len(big)))])
        off = 0
        while off < len(big):
            w = min(c.local_flow_control_window(sid), c.max_outbound_frame_size,
                    len(big) - off)
            if w <= 0:
                sock.sendall(c.data_to_send())
                data = sock.recv(65536)
                if not data:
                    return "close"
                c.receive_data(data)
                continue
            c.send_data(sid, big[off:off + w], end_stream=off + w == len(big))
            off += w
        sock.sendall(c.data_to_send())
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    with srv.connect() as c:
        r = c.request("/b/big", timeout=60)
    assert r.status == 200 and len(r.body) == len(big) and r.body == big


def test_garbage_frame_after_head(gatling):
    """A HEADERS answer then a frame of an unknown-to-the-stream kind with a
    bad length (a SETTINGS frame on a stream): the session fails, the cut
    body (or a 502) and the reason in the log."""
    def handle(sock):
        with contextlib.suppress(OSError):
            c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
            c.initiate_connection()
            sock.sendall(c.data_to_send())
            got = b""
            while True:
                data = sock.recv(65536)
                if not data:
                    return
                got += data
                evs = c.receive_data(data)
                if any(isinstance(e, h2.events.StreamEnded) for e in evs):
                    break
            sock.sendall(c.data_to_send())
            bad = struct.pack(">I", 6)[1:] + b"\x04\x00" + struct.pack(">I", 1) + b"\0" * 6
            sock.sendall(bad)
            sock.recv(65536)
    lst = raw_backend(handle)
    try:
        srv = proxied(gatling, lst.getsockname()[1])
        r = get(srv)
        assert r.status == 502, r
        logged(srv, "HTTP/2 backend 127.0.0.1/%d failed" % lst.getsockname()[1],
               "the session's failure logged")
    finally:
        lst.close()


def test_request_body_sent_in_pieces(gatling, h2backend):
    """A request body that comes slowly, in pieces: the backend's stream
    waits for each (its DATA deferred, then resumed) and gets it whole."""
    def answer(c, sid, head, body, sock):
        out = b"%d %s\n" % (len(body), body[:5])
        c.send_headers(sid, [(":status", "200"), ("content-length", str(len(out)))])
        c.send_data(sid, out, end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    body = b"hello" + b"." * 3000
    with srv.connect() as c:
        c.send_split(b"POST /b/up HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n"
                     % len(body) + body, [200, 700, 1000], pause=0.05)
        r = c.read_response("POST")
    assert r.status == 200 and r.body == b"3005 hello\n", r


def test_long_x_forwarded_for_is_not_appended_to(gatling, h2backend):
    """An X-Forwarded-For over a kilobyte: the backend gets the client's
    address alone, not a cut list."""
    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "200"), ("x-xff", dict(head)["x-forwarded-for"])])
        c.send_data(sid, b"", end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    xff = ", ".join(["192.0.2.%d" % (i % 250) for i in range(100)])
    r = get(srv, headers=[("X-Forwarded-For", xff)])
    assert r.status == 200 and r.header("x-xff") == "127.0.0.1", r


@pytest.mark.skipif(not MUX, reason="gRPC needs an HTTP/2 or HTTP/3 client")
@pytest.mark.parametrize("timeout, status", [
    ("20u", "4"), ("3000000n", "4"), ("1H", "0"), ("2M", "0"), ("9S", "0"),
    ("soon", "0"), ("123456789S", "0"), ("5x", "0")])
def test_grpc_timeout_units(gatling, h2backend, timeout, status):
    """grpc-timeout in each of its units: a deadline of microseconds or
    nanoseconds (a millisecond, rounded up) ends a call the backend holds
    with grpc-status 4; hours, minutes and seconds, and a value that is not
    one (no unit, more than 8 digits), let it answer (trailers-only, status
    0)."""
    def answer(c, sid, head, body, sock):
        if status == "4":
            return  # held: only the deadline ends it
        c.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc"),
                             ("grpc-status", "0")], end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    hdrs = [("Content-Type", "application/grpc"), ("TE", "trailers"),
            ("Content-Length", "5"), ("grpc-timeout", timeout)]
    with srv.connect(timeout=20) as c:
        r = c.request("/b.Svc/M", method="POST", headers=hdrs, body=b"\0\0\0\0\0",
                      timeout=20)
    assert r.status == 200 and r.header("grpc-status") == status, r


@pytest.mark.parametrize("fields", [
    [("x-big%d" % i, chr(ord("a") + i) * 2000) for i in range(3)],  # 6 KB: over 4 KB
    [("x-f%d" % i, "v") for i in range(60)]])  # over the 40 fields a response carries
def test_head_too_large_is_502(gatling, h2backend, fields):
    """A backend's head over what gatling keeps of one (4 KB of fields, 40
    of them): the stream is reset, the client gets 502 and the log says
    why, as for an HTTP/1.1 backend, not "the backend reset the stream"."""
    def answer(c, sid, head, body, sock):
        c.send_headers(sid, [(":status", "200"), ("content-length", "3")] + fields)
        c.send_data(sid, b"ok\n", end_stream=True)
    b = h2backend(answer)
    srv = proxied(gatling, b.port)
    r = get(srv)
    assert r.status == 502, r
    logged(srv, "too many or too large header fields from the backend", "the cause logged")


def test_h2c_path_health_check(gatling, h2backend):
    """check=/hz in an h2c/ pool: a GET of /hz on a stream of its own
    connection each second; a 503 there, then a reset stream, take the
    backend out (the client gets 503, Retry-After), a 204 brings it back."""
    state = {"hz": "204"}

    def answer(c, sid, head, body, sock):
        if dict(head)[":path"] == "/hz":
            if state["hz"] == "reset":
                c.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
            else:
                c.send_headers(sid, [(":status", state["hz"])], end_stream=True)
            return
        c.send_headers(sid, [(":status", "200"), ("content-length", "3")])
        c.send_data(sid, b"up\n", end_stream=True)
    b = h2backend(answer)
    pool = "h=h2c/127.0.0.1/%d;check=/hz;interval=1;fall=1;rise=1;slowstart=0" % b.port
    srv = gatling({".proxy": ""}, args=("-T", "10", "--pool", pool, "-P", "@h/^/b"),
                  check_fds=False)
    wait_for(lambda: get(srv).status == 200, 15, "the backend up")
    for bad in ("503", "reset"):
        state["hz"] = bad
        wait_for(lambda: get(srv).status == 503, 15, "the backend out after a check's " + bad)
        r = get(srv)
        assert r.status == 503 and r.header("retry-after") == "1", r
        state["hz"] = "204"
        wait_for(lambda: get(srv).status == 200, 15, "the backend back after a 204")
