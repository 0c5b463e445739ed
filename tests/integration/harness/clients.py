"""The raw clients: Response, H1Client (HTTP/1.1 over a socket, TLS in the
https pass), H2Client (Python's h2) and H3Client (aioquic) behind one
interface (_MuxClient), Client (the scheme's), fetch and raw_exchange."""

import contextlib
import os
import re
import socket
import time

from harness.env import client_tls_context, H2, H3, import_h2, IO_TIMEOUT, test_pki, TLS


# --------------------------------------------------------------------------
# Raw HTTP

_open_clients = []


def close_all_clients():
    while _open_clients:
        with contextlib.suppress(OSError):
            _open_clients.pop().close()


class ServerHang(AssertionError):
    pass


class Response:
    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value) as received
        self.body = body
        self.raw_head = raw_head

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def tokens(self, name):
        """Comma-separated list header as lower-case tokens."""
        out = []
        for v in self.header_all(name):
            out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def __repr__(self):
        return "<Response %d %r, %d body bytes>\n%s" % (
            self.status, self.reason, len(self.body or b""),
            self.raw_head.decode("latin-1"))


def no_body_status(status):
    return 100 <= status < 200 or status in (204, 304)


class _SocketClient:
    """What both clients do with their socket (self.sock)."""

    def _recv_more(self, deadline, what):
        """One read before deadline (the client's _hang past it); b"" at the end
        of the connection, a reset included."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._hang(what)
        self.sock.settimeout(left)
        try:
            return self.sock.recv(1 << 20)
        except socket.timeout:
            raise self._hang(what)
        except (ConnectionResetError, BrokenPipeError):
            return b""

    def send_split(self, data, sizes, pause=0.01):
        """Send data in pieces of the given sizes (cycled), pausing between
        (over HTTP/2 a request's HEADERS go out once its head is complete)."""
        if isinstance(data, str):
            data = data.encode("latin-1")
        i = k = 0
        while i < len(data):
            n = sizes[k % len(sizes)]
            self.send(data[i:i + n])
            i += n
            k += 1
            time.sleep(pause)

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()

    def reset(self):
        """Close with RST (SO_LINGER 0)."""
        import struct
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class H1Client(_SocketClient):
    """One TCP connection to the server (TLS in the https and h2 passes), with
    a read buffer so that several pipelined responses can be taken one after
    another.  Tests use it as Client, which is H2Client in the h2 pass."""

    def __init__(self, port, host="127.0.0.1", timeout=IO_TIMEOUT, rcvbuf=None):
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        if TLS:
            self.sock = client_tls_context().wrap_socket(self.sock, server_hostname="localhost")
        self.buf = bytearray()  # += on bytes would be quadratic for big bodies
        self.sent = b""
        _open_clients.append(self)

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sent += data
        self.sock.sendall(data)

    def _hang(self, what):
        return ServerHang("server hang: no complete %s within %.1f s.\n"
                          "request(s) sent: %r\nunparsed bytes received (%d): %r"
                          % (what, self.timeout, self.sent[:600], len(self.buf),
                             bytes(self.buf[:200])))

    def read_response(self, method="GET", timeout=None):
        """Read one response. method decides whether a body follows (HEAD: none).
        Raises ServerHang on timeout, ConnectionError if the server closes
        before a complete response."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            # tolerate bare LF in responses too, but expect CRLF
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                head = bytes(self.buf[:i])
                del self.buf[:i + 4]
                break
            chunk = self._recv_more(deadline, "response head")
            if not chunk:
                raise ConnectionError("server closed the connection before a complete "
                                      "response head; request(s) sent: %r; received: %r"
                                      % (self.sent[:600], bytes(self.buf[:600])))
            self.buf += chunk
        lines = head.split(b"\r\n")
        m = re.match(rb"(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
        assert m, "malformed status line %r (full head %r)" % (lines[0], head)
        version, status, reason = m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1")
        headers = []
        for ln in lines[1:]:
            assert b":" in ln, "malformed response header line %r in %r" % (ln, head)
            k, v = ln.split(b":", 1)
            assert k == k.strip() and k, "bad response header name %r" % k
            headers.append((k.decode("latin-1"), v.strip().decode("latin-1")))
        resp = Response(version, status, reason, headers, b"", head)
        if method == "HEAD" or no_body_status(status):
            return resp
        te = resp.header("Transfer-Encoding")
        cl = resp.header("Content-Length")
        if te and "chunked" in te.lower():
            resp.body = self._read_chunked(deadline)
        elif cl is not None:
            assert re.fullmatch(r"\d+", cl), "bad Content-Length %r" % cl
            n = int(cl)
            while len(self.buf) < n:
                chunk = self._recv_more(deadline, "body (%d of %d bytes)" % (len(self.buf), n))
                if not chunk:
                    raise ConnectionError("server closed after %d of %d body bytes; head %r"
                                          % (len(self.buf), n, head))
                self.buf += chunk
            resp.body = bytes(self.buf[:n])
            del self.buf[:n]
        else:
            # delimited by close
            while True:
                chunk = self._recv_more(deadline, "close-delimited body")
                if not chunk:
                    break
                self.buf += chunk
            resp.body = bytes(self.buf)
            self.buf = bytearray()
        return resp

    def _read_chunked(self, deadline):
        body = bytearray()
        while True:
            while b"\r\n" not in self.buf:
                c = self._recv_more(deadline, "chunk size")
                if not c:
                    raise ConnectionError("closed inside chunked body")
                self.buf += c
            i = self.buf.find(b"\r\n")
            line = bytes(self.buf[:i])
            del self.buf[:i + 2]
            n = int(line.split(b";")[0], 16)
            while len(self.buf) < n + 2:
                c = self._recv_more(deadline, "chunk")
                if not c:
                    raise ConnectionError("closed inside chunked body")
                self.buf += c
            body += self.buf[:n]
            del self.buf[:n + 2]
            if n == 0:
                return bytes(body)

    def request(self, target="/", method="GET", version="HTTP/1.1", headers=None,
                host="localhost", body=b"", timeout=None):
        self.send(build_request(target, method, version, headers, host, body))
        return self.read_response(method, timeout=timeout)

    def closed_within(self, timeout):
        """True if the server closes (EOF or RST) within timeout seconds.
        Data that arrives meanwhile is kept in self.buf."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
            self.buf += chunk

    def assert_closed(self, timeout=5.0, why=""):
        t0 = time.monotonic()
        assert self.closed_within(timeout), (
            "server did not close the connection within %.1f s %s\nsent: %r\nunread data: %r"
            % (timeout, why, self.sent[:600], bytes(self.buf[:600])))
        return time.monotonic() - t0

    def assert_open(self, wait=0.3):
        assert not self.closed_within(wait), (
            "server closed the connection unexpectedly; sent: %r; unread: %r"
            % (self.sent[:600], bytes(self.buf[:300])))


class NotH2(AssertionError):
    """A test sent bytes that are not a well-formed HTTP/1.1 request, or asked
    for something only HTTP/1.1 has: it belongs under h1_only."""


class NotH3(NotH2):
    """NotH2's twin for the h3 pass (H3Client): the same requests cannot be
    streams in HTTP/3 either."""


# RFC 9113 8.2.2 (and RFC 9114 4.2): connection-specific fields are not sent
# in HTTP/2 or HTTP/3
H2_DROP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
           "host")
REQUEST_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/1\.1")


class _Stream:
    def __init__(self, method, head, length):
        self.method = method
        self.head = head  # the HTTP/1.1 head it came from, for messages
        self.heads = []  # response heads: 1xx ones, then the final one
        self.trailers = []
        self.body = bytearray()
        self.ended = False
        self.reset = None  # RST_STREAM's (RESET_STREAM's) error code
        self.need = length  # request body bytes the test has not sent yet
        self.out = b""  # request body bytes not sent yet (flow control)
        self.out_ended = length == 0  # END_STREAM (FIN) sent


class _MuxClient(_SocketClient):
    """What H2Client and H3Client share: the HTTP/1.1 bytes a test writes cut
    into requests, each a stream (the request line gives :method and :path,
    Host gives :authority, the connection-specific fields are dropped, the
    Content-Length bytes that follow go out as the stream's body as they
    come), and the responses returned in the order the requests were sent.
    A subclass opens the connection and sets up _init_streams(), and says
    how a stream is opened (_open_stream), how bodies go out (_send_bodies),
    how bytes come in (_recv, which feeds _Stream objects) and why a stream
    will get no response (_lost)."""

    VERSION = "HTTP/2"
    NOT = NotH2

    def _init_streams(self, timeout):
        self.timeout = timeout
        self.buf = bytearray()  # HTTP/1.1 bytes sent that are not a whole request head yet
        self.cur = None  # the stream whose request body is still coming
        self.sent = b""
        self.streams = {}
        self.order = []  # stream ids whose responses read_response has not returned
        self.eof = False

    # -- HTTP/1.1 in, streams out
    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sent += data
        self.buf += data
        while self.buf:
            if self.cur:
                n = min(self.cur.need, len(self.buf))
                self.cur.out += bytes(self.buf[:n])
                self.cur.need -= n
                del self.buf[:n]
                if not self.cur.need:
                    self.cur = None
            elif not self._start_stream():
                break
        self._send_bodies()
        self._flush()

    def _not_mux(self, why, head):
        return self.NOT("%s: %s cannot carry this request (mark the test h1_only): %r"
                        % (why, self.VERSION, head[:300]))

    def _start_stream(self):
        """Start a stream for the request head at the start of self.buf, if
        it is complete; False when it is not all here yet."""
        i = self.buf.find(b"\r\n\r\n")
        if i < 0:
            return False
        head = bytes(self.buf[:i])
        method, headers, hosts, length = self._split_head(head)
        del self.buf[:i + 4]
        sid = self._open_stream(method, headers, hosts, length, head)
        st = self.streams[sid] = _Stream(method, head, length)
        self.cur = st if length else None
        self.order.append(sid)
        return True

    def _split_head(self, head):
        """An HTTP/1.1 request head as a stream's (method, [(name, value)]
        as bytes, pseudo-fields first, the Host values, body length)."""
        lines = head.decode("latin-1").split("\r\n")
        m = REQUEST_LINE.fullmatch(lines[0])
        if not m:
            raise self._not_mux("not an HTTP/1.1 request line", head)
        method, target = m.groups()
        fields = []
        for ln in lines[1:]:
            k, sep, v = ln.partition(":")
            if not sep or not k or k != k.strip():
                raise self._not_mux("a malformed field line %r" % ln, head)
            fields.append((k.lower(), v.strip()))
        if any(k == "transfer-encoding" for k, _ in fields):
            raise self._not_mux("HTTP/1.1 framing (Transfer-Encoding)", head)
        cls = [v for k, v in fields if k == "content-length"]
        if len(cls) > 1 or (cls and not cls[0].isdigit()):
            raise self._not_mux("a malformed Content-Length", head)
        length = int(cls[0]) if cls else 0
        hosts = [v for k, v in fields if k == "host"]
        if len(hosts) > 1:
            raise self._not_mux("more than one Host", head)
        if method == "CONNECT":  # RFC 9113 8.5: :method and :authority only
            pseudo, hosts, target = [(":method", method)], [target], None
        else:
            pseudo = [(":method", method), (":scheme", "https")]
        m = target and re.fullmatch(r"(https?)://([^/?#]*)(.*)", target)
        if m:  # absolute form: the target names the authority (RFC 9112 3.2.2)
            pseudo[1] = (":scheme", m.group(1))
            hosts, target = [m.group(2)], m.group(3) or "/"
        if hosts:
            pseudo.append((":authority", hosts[0]))
        if target:
            pseudo.append((":path", target))
        drop = set(H2_DROP)
        for k, v in fields:
            if k == "connection":
                drop.update(t.strip().lower() for t in v.split(","))
        rest = [(k, v) for k, v in fields if k not in drop
                and not (k == "te" and v.lower() != "trailers")]
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in pseudo + rest]
        return method, headers, hosts, length

    def _check_final(self, st, status, fields):
        """A hook on each final response before it is returned."""

    def read_response(self, method="GET", timeout=None):
        """The response to the oldest request whose response was not read yet
        (a 1xx first, as it comes; the stream stays the oldest)."""
        if not self.order:
            raise self._not_mux("no complete request head sent", bytes(self.buf))
        deadline = time.monotonic() + (timeout or self.timeout)
        sid = self.order[0]
        st = self.streams[sid]
        while not st.ended and not (st.heads and self._status(st.heads[0]) < 200):
            why = self._lost(sid, st)
            if why:
                self.order.pop(0)
                raise ConnectionError("%s before a complete response; request: %r"
                                      % (why, st.head))
            self._recv(deadline, "response")
        assert st.heads, "stream %d ended without a response head" % sid
        fields = st.heads.pop(0)
        status = self._status(fields)
        if status >= 200:
            self.order.pop(0)
            del self.streams[sid]
            self._check_final(st, status, fields)
            fields += st.trailers
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in fields[1:]]
        raw = "%s %d\r\n" % (self.VERSION, status) + "".join("%s: %s\r\n" % kv
                                                           for kv in headers)
        return Response(self.VERSION, status, "", headers,
                        bytes(st.body) if status >= 200 else b"", raw.encode("latin-1"))

    def read_head(self, timeout=None):
        """Wait for the head of the oldest unread response and return its
        status, leaving the response to read_response (for a test that stalls
        a download: flow control holds the rest at the server)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        st = self.streams[self.order[0]]
        while not st.heads:
            why = self._lost(self.order[0], st)
            if why:
                raise ConnectionError(why)
            self._recv(deadline, "response head")
        return self._status(st.heads[0])

    @staticmethod
    def _status(fields):
        assert fields[0][0] == b":status", fields
        return int(fields[0][1])

    def request(self, target="/", method="GET", version="HTTP/1.1", headers=None,
                host="localhost", body=b"", timeout=None):
        self.send(build_request(target, method, version, headers, host, body))
        return self.read_response(method, timeout=timeout)

    def closed_within(self, timeout):
        """True if the server closes the connection within timeout seconds
        (frames that arrive meanwhile are taken in)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self._recv(deadline, "close")
            except ServerHang:
                return False
        return True

    def assert_closed(self, timeout=5.0, why=""):
        t0 = time.monotonic()
        assert self.closed_within(timeout), (
            "server did not close the %s connection within %.1f s %s\nsent: %r"
            % (self.VERSION, timeout, why, self.sent[:600]))
        return time.monotonic() - t0

    def assert_open(self, wait=0.3):
        assert not self.closed_within(wait), (
            "server closed the %s connection unexpectedly (%s); sent: %r"
            % (self.VERSION, self._lost(0, _Stream("", b"", 0)), self.sent[:600]))


class H2Client(_MuxClient):
    """Client's interface over one HTTP/2 connection (TLS, ALPN h2), for the
    h2 pass.  send() takes the HTTP/1.1 bytes a test writes; each well-formed
    request becomes a stream (_MuxClient: RFC 9113 8.2.2 for the fields),
    its body sent as DATA as flow control allows (after a 100, if the test
    waits for one).  Pipelined requests become concurrent streams;
    read_response() returns their responses in the order sent (a 1xx
    first), as a Response with version "HTTP/2" and the field names as
    received (lower case).  A request HTTP/2 cannot carry (not HTTP/1.1,
    chunked, a bad request line) raises NotH2: mark the test h1_only.  A
    stream the server resets, or a connection it closes before answering,
    raises ConnectionError, as a close does for H1Client.
    sni and context (an ssl.SSLContext) default to the suite's: localhost,
    trusting the test CA."""

    def __init__(self, port, host="127.0.0.1", timeout=IO_TIMEOUT, rcvbuf=None,
                 sni="localhost", context=None):
        h2 = import_h2()
        import h2.config
        import h2.connection
        import h2.events
        import h2.exceptions
        self.ev = h2.events
        self.h2_errors = h2.exceptions
        self._init_streams(timeout)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout)
        sock.connect((host, port))
        if context is None:
            context = client_tls_context()
        context.set_alpn_protocols(["h2"])
        self.sock = context.wrap_socket(sock, server_hostname=sni)
        alpn = self.sock.selected_alpn_protocol()
        assert alpn == "h2", "the server chose ALPN %r, not h2" % alpn
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        # h2 4.1 takes any GOAWAY as the end of the connection and then refuses
        # the frames of the streams the server still finishes (RFC 9113 6.8):
        # after a graceful one, keep the connection open on our side
        from h2.connection import ConnectionState
        from hyperframe.frame import GoAwayFrame
        on_goaway = self.conn._frame_dispatch_table[GoAwayFrame]

        def goaway(frame):
            out = on_goaway(frame)
            if not frame.error_code:
                self.conn.state_machine.state = ConnectionState.CLIENT_OPEN
            return out
        self.conn._frame_dispatch_table[GoAwayFrame] = goaway
        self.goaway = None  # ConnectionTerminated
        self._flush()
        _open_clients.append(self)

    def _flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def _open_stream(self, method, headers, hosts, length, head):
        sid = self.conn.get_next_available_stream_id()
        # h2 4.1 insists on :path, which a CONNECT must not have, and on
        # :authority, which a request may lack (RFC 9113 8.3.1)
        self.conn.config.validate_outbound_headers = method != "CONNECT" and bool(hosts)
        try:
            self.conn.send_headers(sid, headers, end_stream=length == 0)
        except self.h2_errors.ProtocolError as e:
            raise self._not_mux("h2 refused it (%s)" % e, head)
        finally:
            self.conn.config.validate_outbound_headers = True
        return sid

    def _send_bodies(self):
        """Send what flow control allows of the request bodies."""
        for sid, st in self.streams.items():
            while not st.out_ended and st.reset is None and not st.ended:
                n = min(len(st.out), self.conn.local_flow_control_window(sid),
                        self.conn.max_outbound_frame_size)
                if n <= 0 and (st.out or st.need):
                    break
                st.out_ended = n == len(st.out) and not st.need
                self.conn.send_data(sid, st.out[:n], end_stream=st.out_ended)
                st.out = st.out[n:]

    # -- frames in
    def _hang(self, what):
        return ServerHang("server hang: no complete %s within %.1f s over HTTP/2.\n"
                          "request(s) sent: %r\nstreams: %s"
                          % (what, self.timeout, self.sent[:600],
                             {k: (v.heads, len(v.body), v.ended, v.reset)
                              for k, v in self.streams.items()}))

    def _recv(self, deadline, what):
        """Read once and feed the frames to h2; False at the end of the connection."""
        chunk = self._recv_more(deadline, what)
        if not chunk:
            self.eof = True
            return False
        try:
            events = self.conn.receive_data(chunk)
        except self.h2_errors.ProtocolError as e:
            raise AssertionError("the server broke HTTP/2: %r; request(s) sent: %r"
                                 % (e, self.sent[:600]))
        for ev in events:
            self._event(ev)
        self._send_bodies()
        with contextlib.suppress(OSError):
            self._flush()
        return True

    def _event(self, ev):
        st = self.streams.get(getattr(ev, "stream_id", 0) or 0)
        if isinstance(ev, (self.ev.ResponseReceived, self.ev.InformationalResponseReceived)):
            st.heads.append(ev.headers)
        elif isinstance(ev, self.ev.TrailersReceived):
            st.trailers = ev.headers
        elif isinstance(ev, self.ev.DataReceived):
            st.body += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, self.ev.StreamEnded):
            st.ended = True
        elif isinstance(ev, self.ev.StreamReset):
            if st:
                st.reset = ev.error_code
        elif isinstance(ev, self.ev.ConnectionTerminated):
            self.goaway = ev

    def _lost(self, sid, st):
        """Why the stream sid will get no (more) response, or None."""
        if st.reset is not None:
            return "the server reset the stream (RST_STREAM %s)" % st.reset
        if self.goaway is not None and (sid > self.goaway.last_stream_id
                                        or self.eof or self.goaway.error_code):
            return "GOAWAY %s, last stream %d" % (self.goaway.error_code,
                                                   self.goaway.last_stream_id)
        if self.eof:
            return "the server closed the connection"
        return None


def import_aioquic():
    """aioquic (pip install aioquic; tests/setup.sh), with a subclass of its
    H3Connection that leaves the Content-Length check to H3Client: aioquic
    1.x holds a response's content-length against its DATA whatever the
    request was, and a HEAD's or a 304's rightly has none."""
    try:
        from aioquic.h3.connection import H3_ALPN, H3Connection
        from aioquic.quic import events
        from aioquic.quic.configuration import QuicConfiguration
        from aioquic.quic.connection import QuicConnection
        import aioquic.h3.events as h3_events
    except ImportError:
        raise ImportError("GATLING_SCHEME=h3 needs aioquic (pip install aioquic; "
                          "tests/setup.sh does it)")

    class Conn(H3Connection):
        def _check_content_length(self, stream):
            pass
    return Conn, H3_ALPN, events, h3_events, QuicConfiguration, QuicConnection


H3_NO_ERROR, H3_INTERNAL_ERROR = 0x100, 0x102


class H3Client(_MuxClient):
    """Client's interface over one HTTP/3 connection (QUIC over UDP at the
    HTTPS port's number, ALPN h3, aioquic's QUIC and QPACK driven here
    without asyncio), for the h3 pass: as H2Client, each HTTP/1.1 request a
    test writes becomes a request stream and read_response() returns the
    responses in order, with version "HTTP/3".  A stream the server resets
    (RESET_STREAM) or a connection it closes (CONNECTION_CLOSE) before the
    response raises ConnectionError; a request HTTP/3 cannot carry, NotH3.
    The server's frames are checked by aioquic (a violation fails the test),
    and a response's Content-Length against its body here.  sni names the
    certificate (cert: the client's own, a PEM file, for mutual TLS); rcvbuf and context are taken for H2Client's signature and
    ignored: a client that does not read holds the server back by QUIC's
    acknowledgements and flow control, not by a socket buffer (a small one
    would only drop datagrams), and QUIC's TLS is aioquic's."""

    VERSION = "HTTP/3"
    NOT = NotH3

    def __init__(self, port, host="127.0.0.1", timeout=IO_TIMEOUT, rcvbuf=None,
                 sni="localhost", context=None, cadata=None, cert=None,
                 cipher_suites=None):
        conn, alpn, self.qev, self.ev, config, quic = import_aioquic()
        self._init_streams(timeout)
        cfg = config(is_client=True, alpn_protocols=alpn, server_name=sni,
                     max_datagram_frame_size=None)
        if cipher_suites:  # names of aioquic.tls.CipherSuite, the ones offered
            from aioquic.tls import CipherSuite
            cfg.cipher_suites = [CipherSuite[c] for c in cipher_suites]
        # cadata: PEM roots to trust instead of the test CA (test_acme_https.py: Pebble's)
        if cadata:
            cfg.load_verify_locations(cadata=cadata.encode() if isinstance(cadata, str) else cadata)
        else:
            cfg.load_verify_locations(os.path.join(test_pki(), "ca.pem"))
        if cert:  # a client certificate (PEM: certificate and key) for mutual TLS
            cfg.load_cert_chain(cert)
        self.addr = (host, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect(self.addr)
        self.quic = quic(configuration=cfg)
        # acknowledge at once: nothing runs aioquic's timers between this
        # client's calls, so a delayed ACK (1 ms) would wait for the next
        # one, and the server would hold a finished stream meanwhile
        self.quic._ack_delay = 0
        self.h3 = conn(self.quic)
        self.alpn = None
        self.closed = False
        self.quic.connect(self.addr, now=time.monotonic())
        self._flush()
        _open_clients.append(self)
        deadline = time.monotonic() + timeout
        while self.alpn is None:
            if self.eof:
                raise ConnectionError("QUIC handshake failed: %s" % self._lost(0, None))
            self._recv(deadline, "QUIC handshake")
        assert self.alpn == "h3", "the server chose ALPN %r, not h3" % self.alpn

    def _flush(self):
        for data, _ in self.quic.datagrams_to_send(now=time.monotonic()):
            self.sock.send(data)

    def _open_stream(self, method, headers, hosts, length, head):
        sid = self.quic.get_next_available_stream_id()
        self.h3.send_headers(sid, headers, end_stream=length == 0)
        return sid

    def _send_bodies(self):
        """Hand the request bodies to QUIC (which sends them as the stream's
        and the connection's flow control allow)."""
        for sid, st in self.streams.items():
            if st.out_ended or st.reset is not None or self.eof:
                continue
            if st.out or not st.need:
                st.out_ended = not st.need
                self.h3.send_data(sid, st.out, end_stream=st.out_ended)
                st.out = b""

    # -- datagrams in
    def _hang(self, what):
        return ServerHang("server hang: no complete %s within %.1f s over HTTP/3.\n"
                          "request(s) sent: %r\nstreams: %s"
                          % (what, self.timeout, self.sent[:600],
                             {k: (v.heads, len(v.body), v.ended, v.reset)
                              for k, v in self.streams.items()}))

    def _recv(self, deadline, what):
        """Wait for datagrams (or QUIC's next timer) and feed them to aioquic;
        False at the end of the connection."""
        now = time.monotonic()
        if now >= deadline:
            raise self._hang(what)
        timer = self.quic.get_timer()
        until = min(deadline, timer) if timer is not None else deadline
        self.sock.settimeout(max(until - now, 0.0005))
        try:
            data = self.sock.recv(65536)
            self.sock.setblocking(False)
            while data:  # take what else is queued before answering
                self.quic.receive_datagram(data, self.addr, now=time.monotonic())
                data = self.sock.recv(65536)
        except (socket.timeout, BlockingIOError):
            pass
        except ConnectionRefusedError:  # ICMP port unreachable: the server is gone
            self.eof = True
        self.sock.settimeout(self.timeout)  # blocking again, for a test's own sock.recv
        if timer is not None and time.monotonic() >= timer:
            self.quic.handle_timer(now=time.monotonic())
        self._events()
        if not self.eof:
            self._send_bodies()
        with contextlib.suppress(OSError):
            self._flush()
        return not self.eof

    def _events(self):
        while True:
            ev = self.quic.next_event()
            if ev is None:
                break
            if isinstance(ev, self.qev.HandshakeCompleted):
                self.alpn = ev.alpn_protocol
            elif isinstance(ev, self.qev.StreamReset) and ev.stream_id in self.streams:
                self.streams[ev.stream_id].reset = ev.error_code
            for h in self.h3.handle_event(ev):
                self._event(h)
            if self.h3._is_done:
                close = self.quic._close_event
                raise AssertionError("the server broke HTTP/3: %s (%#x); request(s) sent: %r"
                                     % (close.reason_phrase, close.error_code, self.sent[:600]))
        if self.quic._close_event is not None:  # CONNECTION_CLOSE, or the idle timeout
            self.eof = True

    def _event(self, ev):
        st = self.streams.get(ev.stream_id)
        if st is None:
            return
        if isinstance(ev, self.ev.HeadersReceived):
            if any(self._status(h) >= 200 for h in st.heads):
                st.trailers = ev.headers
            else:
                st.heads.append(ev.headers)
        elif isinstance(ev, self.ev.DataReceived):
            st.body += ev.data
        if getattr(ev, "stream_ended", False):
            st.ended = True

    def _lost(self, sid, st):
        """Why the stream sid will get no (more) response, or None."""
        if st is not None and st.reset is not None:
            return "the server reset the stream (RESET_STREAM %#x)" % st.reset
        close = self.quic._close_event
        if close is not None:
            return "the connection closed (%#x %s)" % (close.error_code, close.reason_phrase)
        if self.eof:
            return "the server is gone"
        return None

    def _check_final(self, st, status, fields):
        cl = [v for k, v in fields if k == b"content-length"]
        if cl and st.method != "HEAD" and status not in (204, 304):
            assert int(cl[0]) == len(st.body), (
                "content-length %s but %d body bytes over HTTP/3; request: %r"
                % (cl[0], len(st.body), st.head))

    def _close(self, code):
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            self.quic.close(error_code=code)
            self._flush()
        with contextlib.suppress(OSError):
            self.sock.close()

    def close(self):
        """CONNECTION_CLOSE (H3_NO_ERROR): the server forgets the connection at once."""
        self._close(H3_NO_ERROR)

    def reset(self):
        """CONNECTION_CLOSE with an error (what an RST is to TCP)."""
        self._close(H3_INTERNAL_ERROR)


Client = H3Client if H3 else H2Client if H2 else H1Client


def build_request(target="/", method="GET", version="HTTP/1.1", headers=None,
                  host="localhost", body=b""):
    lines = ["%s %s %s" % (method, target, version)]
    if host is not None:
        lines.append("Host: %s" % host)
    for h in headers or []:
        if isinstance(h, tuple):
            h = "%s: %s" % h
        lines.append(h)
    if isinstance(body, str):
        body = body.encode()
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def fetch(port, target="/", **kw):
    """One request on a fresh connection."""
    with Client(port) as c:
        return c.request(target, **kw)


def raw_exchange(port, data, timeout=3.0, method="GET"):
    """Send raw bytes, read one response.  Returns the Response, or None if
    the server closed the connection without answering."""
    with Client(port, timeout=timeout) as c:
        c.send(data)
        try:
            return c.read_response(method)
        except ConnectionError:
            return None
