"""HTTP/3's defences (issue 34; quic/quic_retry.c, quic/quic.c, h3/h3.c),
each with a real client and a counter:

- Retry (--h3-retry): aioquic and gtlsclient follow it and fetch (aioquic
  checks the original and Retry connection IDs the server then announces);
  a hand-made Initial (aioquic's, sent by hand) gets a Retry and no
  connection with `always`, a connection with `never`; in the default
  `busy`, a burst of Initials from one address gets Retries past 8 a
  second; a forged Retry token gets CONNECTION_CLOSE and no connection.
- Rapid reset: an aioquic client that opens request streams and resets them
  at once is closed with H3_EXCESSIVE_LOAD, counted, and remembered against
  its address (--flood-memory): each next connection gets half the streams,
  and the fifth is refused.
- QPACK, written by hand on aioquic's QUIC: a bomb (one 3000-byte value put
  in the dynamic table, then a request of 60 references to it: 180 KB of
  fields from 90 bytes) gets 431 and the connection goes on; a table over
  4 KiB, too many blocked streams and a 70 KB value end the connection with
  the QPACK or HTTP/3 error RFC 9204 names.
- -R (the connection's n-th request, then GOAWAY and the close), -s (a
  connection with no request head, and a stream whose head never ends, are
  closed), and 421 for a Host that another certificate answers.

Skipped where the build has no HTTP/3 (test_h3.py's h3_built fixture) or the
client is missing."""
import asyncio
import http.client
import json
import os
import socket
import time

import pytest

from conftest import OTHER_BACKENDS, https_port
from conftest import test_pki as pki_dir
from test_h3 import (GTLS, HAVE_AIOQUIC, QuicConnectionProtocol, _H3,  # noqa: F401
                     aioquic_run, gtls,
                     h3_built, h3_log_lines, h3_server, needs_aioquic, needs_gtls,
                     plain_port, server_status)
from test_tls import pki, tls_args  # noqa: F401  (pki: a fixture)

if HAVE_AIOQUIC:
    from aioquic.asyncio import connect
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection
    from aioquic.quic.events import ConnectionTerminated, StreamDataReceived, StreamReset



@pytest.fixture(autouse=True)
def _on_the_first_backend(build):
    """QUIC's and HTTP/3's defences sit above io/ (test_h3.py drives each
    backend's datagram path): on the first backend and its sanitizer build."""
    if build.name in OTHER_BACKENDS:
        pytest.skip("QUIC's defences are above io/: on the first backend")


H3_NO_ERROR = 0x100
H3_EXCESSIVE_LOAD = 0x107
H3_REQUEST_CANCELLED = 0x10C


def client_config(server_name="localhost", **kw):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=server_name,
                            **kw)
    cfg.load_verify_locations(os.path.join(pki_dir(), "ca.pem"))
    return cfg


class Client(_H3):
    """test_h3's client, that also sees how its connection ended."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.ended = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated) and not self.ended.done():
            self.ended.set_result(event.error_code)
        try:
            evs = self.h3.handle_event(event)
        except Exception:  # noqa: BLE001  (the attacker's own streams confuse aioquic's H3)
            return
        self.take(evs)

    def send_request(self, path, authority="localhost", headers=()):
        sid = self._quic.get_next_available_stream_id()
        self.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                   (b":authority", authority.encode()),
                                   (b":path", path.encode())] + list(headers), end_stream=True)
        return sid

    async def request(self, path, authority="localhost", headers=(), timeout=20):
        sid = self.send_request(path, authority, headers)
        st = {"headers": [], "body": bytearray(),
              "done": asyncio.get_running_loop().create_future()}
        self.streams[sid] = st
        self.transmit()
        await asyncio.wait_for(asyncio.shield(st["done"]), timeout)
        hd = {k.decode(): v.decode() for k, v in st["headers"]}
        return int(hd[":status"]), hd, bytes(st["body"])


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def udp_exchange(port, datagram, tries=3, timeout=2):
    """Send a datagram (again, as a client would, if no reply came within
    timeout): the first reply, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        for _ in range(tries):
            s.sendto(datagram, ("127.0.0.1", port))
            try:
                return s.recvfrom(4096)[0]
            except socket.timeout:
                pass
        return None
    finally:
        s.close()


def first_initial(port):
    """aioquic's first Initial for a new connection (a datagram of 1200 bytes)."""
    q = QuicConnection(configuration=client_config())
    q.connect(("127.0.0.1", port), now=time.time())
    return q.datagrams_to_send(now=time.time())[0][0]


def long_type(pkt):
    """A long-header packet's type: 0 Initial, 2 Handshake, 3 Retry (RFC 9000 17.2)."""
    assert pkt and pkt[0] & 0xC0 == 0xC0, pkt[:8]
    return (pkt[0] >> 4) & 3


# -- Retry ---------------------------------------------------------------------

@needs_aioquic
def test_retry_always_aioquic_follows_it(gatling):
    """--h3-retry always: aioquic's first Initial gets a Retry, its second
    (with the token) a connection, which serves; aioquic checks that the
    server's transport parameters name its first connection ID and the
    Retry's (RFC 9000 7.3), so wrong ones would fail the handshake."""
    srv, port = h3_server(gatling, extra=("--h3-retry", "always"))
    made = []

    def protocol(*a, **kw):
        made.append(Client(*a, **kw))
        return made[-1]

    async def main():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=protocol) as c:
            return await c.request("/f.txt")
    try:
        s, _, body = run(main())
    except ConnectionError:  # say how it ended, and what the server counted
        ended = made[-1].ended
        pytest.fail("closed in the handshake: %r, server %r\n%s" % (
            ended.result() if ended.done() else None, server_status(srv), srv.stderr_text()))
    assert (s, body) == (200, b"hello\n")
    st = server_status(srv)
    assert st["h3_retries"] >= 1 and st["h3_connections"] == 1, st  # (>1: Initial resent)
    assert st["h3_handshakes"] == 1 and st["h3_bad_tokens"] == 0, st


@needs_aioquic
def test_new_token_spares_the_next_retry(gatling):
    """--h3-retry always: the first connection goes through a Retry and is
    given a NEW_TOKEN token; the client's next connection, from another
    port, sends it and begins validated without a Retry."""
    srv, port = h3_server(gatling, extra=("--h3-retry", "always"))
    tokens = []

    async def main(token=b""):
        async with connect("127.0.0.1", port, configuration=client_config(token=token),
                           create_protocol=Client, token_handler=tokens.append) as c:
            return (await c.request("/f.txt"))[0]
    assert run(main()) == 200
    st = server_status(srv)
    assert tokens and st["h3_retries"] >= 1 and st["h3_validated"] == 1, (tokens, st)
    retries = st["h3_retries"]
    assert run(main(tokens[-1])) == 200
    st = server_status(srv)
    assert st["h3_retries"] == retries and st["h3_validated"] == 2, st
    assert st["h3_connections"] == 2 and st["h3_bad_tokens"] == 0, st


@needs_gtls
def test_retry_always_gtlsclient_follows_it(gatling, tmp_path):
    srv, port = h3_server(gatling, extra=("--h3-retry", "always"))
    rc, dl, out = gtls(port, ["/f.txt"], tmp_path)
    assert rc == 0, out
    assert open(os.path.join(dl, "f.txt"), "rb").read() == b"hello\n"
    st = server_status(srv)
    assert st["h3_retries"] >= 1 and st["h3_handshakes"] == 1, st


@needs_aioquic
@pytest.mark.parametrize("mode", ["always", "never"])
def test_retry_keeps_no_state(gatling, mode):
    """An Initial sent by hand: with `always` the answer is a Retry (small:
    no amplification) and the server begins no connection; with `never` it
    is the server's Initial, and a connection is begun."""
    srv, port = h3_server(gatling, extra=("--h3-retry", mode))
    reply = udp_exchange(port, first_initial(port))
    st = server_status(srv)
    if mode == "always":
        assert long_type(reply) == 3 and len(reply) < 200, reply[:8]
        assert st["h3_retries"] >= 1 and st["h3_connections"] == 0, st
    else:
        assert long_type(reply) == 0, reply[:8]
        assert st["h3_retries"] == 0 and st["h3_connections"] == 1, st


@needs_aioquic
@pytest.mark.parametrize("mode", ["busy", "never"])
def test_retry_for_many_initials_from_one_address(gatling, mode):
    """The default (busy): 30 new connections at once from one address, more
    than 8 in a second: past the 8th each gets a Retry instead of a
    connection (a second may turn over mid-burst: at least 10 Retries).
    With `never` every one begins a connection."""
    extra = ("--h3-retry", "never") if mode == "never" else ()
    srv, port = h3_server(gatling, extra=extra)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    pkts = [first_initial(port) for _ in range(30)]
    for p in pkts:
        s.sendto(p, ("127.0.0.1", port))
    types, deadline = [], time.monotonic() + 5
    while time.monotonic() < deadline:  # every reply, until a second of silence
        try:
            types.append(long_type(s.recvfrom(4096)[0]))
        except socket.timeout:
            break
    s.close()
    # the silence may have been a busy machine's pause: the counts are waited for
    deadline = time.monotonic() + 10
    st = server_status(srv)
    while st["h3_retries"] + st["h3_connections"] < 30 and time.monotonic() < deadline:
        time.sleep(0.1)
        st = server_status(srv)
    assert st["h3_retries"] + st["h3_connections"] == 30, st
    if mode == "busy":
        assert st["h3_retries"] >= 10 and 8 <= st["h3_connections"] <= 20, st
        assert 3 in types, types
    else:
        assert st["h3_retries"] == 0 and st["h3_connections"] == 30, st
        assert 3 not in types, types


@needs_aioquic
def test_forged_retry_token_is_refused(gatling):
    """An Initial with a token that looks like the server's Retry token but
    does not verify: CONNECTION_CLOSE (INVALID_TOKEN), no connection; aioquic
    gives up at once.  A token of another kind counts as none."""
    srv, port = h3_server(gatling)

    async def main(token):
        async with connect("127.0.0.1", port, configuration=client_config(token=token),
                           create_protocol=Client) as c:
            return await c.request("/f.txt")

    with pytest.raises(ConnectionError):
        run(main(b"\xb6" + os.urandom(90)), 20)
    st = server_status(srv)
    assert st["h3_bad_tokens"] == 1 and st["h3_connections"] == 0, st
    assert run(main(b"\x01" + os.urandom(40)))[0] == 200  # not ours: as if none
    st = server_status(srv)
    assert st["h3_bad_tokens"] == 1 and st["h3_connections"] == 1, st


# -- rapid reset and the memory of floods ---------------------------------------

def status_from_elsewhere(srv):
    """/server-status asked from 127.0.0.2 (an address with no offences)."""
    c = http.client.HTTPConnection("127.0.0.1", plain_port(srv), timeout=10,
                                   source_address=("127.0.0.2", 0))
    try:
        c.request("GET", "/server-status?json")
        return json.loads(c.getresponse().read())
    finally:
        c.close()


async def reset_flood(port, n=3000, budget_s=15):
    """Open request streams and reset each at once (RESET_STREAM and
    STOP_SENDING), n of them or until the server closes the connection:
    (the close's error code or None, streams the server said it allows)."""
    async with connect("127.0.0.1", port, configuration=client_config(),
                       create_protocol=Client) as c:
        q = c._quic
        allowed = q._remote_max_streams_bidi
        deadline = time.monotonic() + budget_s
        i = 0
        while i < n and not c.ended.done() and time.monotonic() < deadline:
            if q.get_next_available_stream_id() // 4 >= q._remote_max_streams_bidi:
                c.transmit()  # (aioquic would send RESET_STREAM past the limit)
                await asyncio.sleep(0.002)
                continue
            sid = c.send_request("/nope.txt")
            q.reset_stream(sid, H3_REQUEST_CANCELLED)
            q.stop_stream(sid, H3_REQUEST_CANCELLED)
            i += 1
            if i % 10 == 0:
                c.transmit()
                await asyncio.sleep(0)
        c.transmit()
        try:
            code = await asyncio.wait_for(asyncio.shield(c.ended), 5)
        except asyncio.TimeoutError:
            code = None
        return code, allowed


@needs_aioquic
def test_rapid_reset_closes_and_is_remembered(gatling):
    """Streams reset as fast as they open: past 200 (then 50 a second) the
    connection is closed with H3_EXCESSIVE_LOAD, counted, and remembered:
    each next connection from the address is told half the streams at once
    (100, 50, 25, 12) and trips sooner; the fifth is refused outright."""
    srv, port = h3_server(gatling, extra=("--flood-memory", "60"))
    allowed = []
    for k in range(4):
        code, streams = run(reset_flood(port))
        assert code == H3_EXCESSIVE_LOAD, (k, code, server_status(srv))
        allowed.append(streams)
    assert allowed == [100, 50, 25, 12], allowed
    st = status_from_elsewhere(srv)  # 127.0.0.1 is refused now, over TCP too
    assert st["h3_rapid_reset"] == 4 and st["flood_offences"] == 4, st
    assert st["flood_reduced"] == 3, st
    lines = [l for l in srv.errlog if "HTTP/3 rapid reset" in l]
    assert len(lines) == 4 and all("(peer 127.0.0.1) request streams reset: " in l
                                   for l in lines), srv.errlog  # one line each, naming it

    async def refused():
        async with connect("127.0.0.1", port, configuration=client_config(idle_timeout=2),
                           create_protocol=Client, wait_connected=True) as c:
            return await c.request("/f.txt")
    with pytest.raises((ConnectionError, asyncio.TimeoutError)):
        run(refused(), 4)
    st = status_from_elsewhere(srv)
    assert st["refused_offender"] >= 1 and st["h3_refused"] >= 1, st


@needs_aioquic
def test_cancelling_a_few_requests_is_no_flood(gatling):
    """A client that cancels some of its requests (as a browser leaving a
    page) is not a flood: 50 cancelled, then 100 answered on one connection."""
    srv, port = h3_server(gatling)

    async def main():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=Client) as c:
            for _ in range(50):
                sid = c.send_request("/f.txt")
                c._quic.reset_stream(sid, H3_REQUEST_CANCELLED)
            c.transmit()
            res = await asyncio.gather(*(c.request("/f.txt") for _ in range(100)))
            return [(s, b) for s, _, b in res]
    assert run(main()) == [(200, b"hello\n")] * 100
    st = server_status(srv)
    assert st["h3_rapid_reset"] == 0 and st["flood_offences"] == 0, st


# -- QPACK bomb ------------------------------------------------------------------
# By hand (RFC 9204), on aioquic's QUIC without its HTTP/3 layer: the client's
# control, encoder and decoder streams, and request streams whose field
# sections refer to what its encoder stream put in the server's table.

def varint(n):
    for size, tag in ((1, 0), (2, 0x40), (4, 0x80), (8, 0xC0)):
        if n < 1 << (8 * size - 2):
            return ((tag << (8 * size - 8)) | n).to_bytes(size, "big")
    raise ValueError(n)


def prefix_int(n, bits, first=0):
    """RFC 7541 5.1's integer with an n-bit prefix, first's high bits kept."""
    top = (1 << bits) - 1
    if n < top:
        return bytes([first | n])
    out, n = [first | top], n - top
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + [n])


def frame(ftype, payload):
    return varint(ftype) + varint(len(payload)) + payload


def literal(static_index, value):
    """A field line with a static name and a literal value (not Huffman)."""
    return prefix_int(static_index, 4, 0x50) + prefix_int(len(value), 7) + value


def get_fields(path, ric=0):
    """GET path's field section: static :method GET (17), :scheme https (23),
    :path and :authority literal; encoded Required Insert Count ric (Base = it)."""
    return bytes([ric, 0]) + b"\xd1\xd7" + literal(1, path.encode()) + literal(0, b"localhost")


def insert(name, value):
    """Encoder instruction: insert name: value, both literal."""
    return prefix_int(len(name), 5, 0x40) + name + prefix_int(len(value), 7) + value


class RawH3(QuicConnectionProtocol):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.data, self.done = {}, {}
        self.ended = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated) and not self.ended.done():
            self.ended.set_result(event.error_code)
        elif isinstance(event, StreamDataReceived):
            self.data[event.stream_id] = self.data.get(event.stream_id, b"") + event.data
            fut = self.done.get(event.stream_id)
            if event.end_stream and fut and not fut.done():
                fut.set_result(None)

    def streams(self, encoder=b""):
        """The control stream (an empty SETTINGS), the encoder stream with
        encoder's instructions, the decoder stream."""
        for data in (b"\x00" + frame(4, b""), b"\x02" + encoder, b"\x03"):
            sid = self._quic.get_next_available_stream_id(is_unidirectional=True)
            self._quic.send_stream_data(sid, data)

    async def request(self, fields, timeout=10):
        """A request stream with the HEADERS frame fields: what comes back."""
        sid = self._quic.get_next_available_stream_id()
        self.done[sid] = asyncio.get_running_loop().create_future()
        self._quic.send_stream_data(sid, frame(1, fields), end_stream=True)
        self.transmit()
        await asyncio.wait_for(asyncio.shield(self.done[sid]), timeout)
        return self.data.get(sid, b"")


CAPACITY_4K = prefix_int(4096, 5, 0x20)  # Set Dynamic Table Capacity (the server's maximum)


@needs_aioquic
def test_qpack_bomb_gets_431(gatling):
    """One 3000-byte value in the dynamic table, then a request of 60
    references to it: 180 KB of fields from about 90 bytes.  Past 16 KiB
    decoded the server stops keeping them and answers 431 (counted); the
    same connection goes on with a normal request.  Without the limit the
    request would be served (or the server would hold 180 KB a stream)."""
    srv, port = h3_server(gatling)

    async def main():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=RawH3) as c:
            c.streams(CAPACITY_4K + insert(b"x-bomb", b"b" * 3000))
            bomb = get_fields("/f.txt", ric=2) + b"\x80" * 60  # 2: Required Insert Count 1
            assert len(bomb) < 100
            first = await c.request(bomb)
            second = await c.request(get_fields("/f.txt"))
            return first, second, c.ended.done()
    first, second, ended = run(main())
    assert b"431" in first and b"hello" not in first, first[:200]
    assert second.endswith(b"hello\n") and not ended, second[:200]
    st = server_status(srv)
    assert st["h3_fields_refused"] == 1 and st["h3_failed"] == 0, st


def field(name, value):
    """A field line with a literal name and value (not Huffman)."""
    return prefix_int(len(name), 3, 0x20) + name + prefix_int(len(value), 7) + value


class HeldH3(RawH3):
    """RawH3 that also records the streams the server reset, and their codes."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.resets = {}

    def quic_event_received(self, event):
        if isinstance(event, StreamReset):
            self.resets[event.stream_id] = event.error_code
        super().quic_event_received(event)


H3_REQUEST_REJECTED = 0x10B


@needs_aioquic
def test_request_fields_are_bounded_per_connection(gatling):
    """As over HTTP/2: a connection's streams together hold at most 256 KiB
    of request fields; past it a stream is reset with H3_REQUEST_REJECTED
    (h3_streams_refused), which a client may send again, instead of costing
    up to 16 KiB more each (1.6 MiB for 100 streams).  50 requests of 8 KiB
    of fields whose streams do not end: each one held says so with its 100
    Continue (Expect), so every stream's fate is seen; ended, the held ones
    are answered."""
    srv, port = h3_server(gatling)
    pad = field(b"x-pad", b"v" * 8000) + field(b"expect", b"100-continue")

    async def main():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=HeldH3) as c:
            c.streams()
            sids = []
            for _ in range(50):
                sid = c._quic.get_next_available_stream_id()
                c.done[sid] = asyncio.get_running_loop().create_future()
                c._quic.send_stream_data(sid, frame(1, get_fields("/f.txt") + pad))
                sids.append(sid)
            c.transmit()
            for _ in range(600):  # until every stream is held (a 100) or reset; 30 s: a hang
                if all(s in c.resets or s in c.data for s in sids):
                    break
                await asyncio.sleep(0.05)
            refused = [s for s in sids if s in c.resets]
            held = [s for s in sids if s not in c.resets]
            for sid in held:
                c._quic.send_stream_data(sid, b"", end_stream=True)
            c.transmit()
            await asyncio.wait_for(asyncio.gather(*(c.done[s] for s in held)), 30)
            return {s: c.resets[s] for s in refused}, [c.data[s] for s in held]
    refused, answers = run(main())
    assert 10 <= len(refused) <= 30, (len(refused), len(answers))
    assert set(refused.values()) == {H3_REQUEST_REJECTED}, refused
    assert all(a[0] == 1 and a.endswith(b"hello\n") for a in answers), answers[:2]  # 100, 200
    st = server_status(srv)
    assert st["h3_streams_refused"] == len(refused) and st["h3_failed"] == 0, st


@needs_aioquic
@pytest.mark.parametrize("what", ["capacity", "reference", "huge_value"])
def test_qpack_rules_close_the_connection(gatling, what):
    """Breaking QPACK's rules ends the connection with the right error: a
    table larger than the server's 4 KiB (QPACK_ENCODER_STREAM_ERROR), a
    reference past what was inserted, with a Required Insert Count that
    will never come (the stream waits, blocked; 17 of them, one more than
    the 16 allowed: QPACK_DECOMPRESSION_FAILED), a value over nghttp3's 64
    KiB (H3_GENERAL_PROTOCOL_ERROR).  The server serves the next client."""
    srv, port = h3_server(gatling)
    want = {"capacity": 0x201, "reference": 0x200, "huge_value": 0x101}[what]

    async def main():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=RawH3) as c:
            if what == "capacity":
                c.streams(prefix_int(8192, 5, 0x20))
                c.transmit()
            elif what == "reference":
                c.streams(CAPACITY_4K)
                for _ in range(17):
                    sid = c._quic.get_next_available_stream_id()
                    c._quic.send_stream_data(sid, frame(1, get_fields("/f.txt", ric=2) + b"\x80"),
                                             end_stream=True)
                c.transmit()
            else:
                c.streams()
                huge = bytes([0, 0]) + b"\xd1\xd7" + literal(1, b"/f.txt") + \
                    prefix_int(6, 3, 0x20) + b"x-huge" + prefix_int(70000, 7) + b"a" * 70000
                sid = c._quic.get_next_available_stream_id()
                c._quic.send_stream_data(sid, frame(1, huge), end_stream=True)
                c.transmit()
            return await asyncio.wait_for(asyncio.shield(c.ended), 10)
    assert run(main()) == want
    (s, _, body), = aioquic_run(port, [("/f.txt", "GET", ())])
    assert (s, body) == (200, b"hello\n")
    assert server_status(srv)["h3_failed"] == 1


# -- -R, -s, 421 -----------------------------------------------------------------

@needs_aioquic
def test_max_requests_per_connection(gatling):
    """-R 3: the third request is answered, a GOAWAY goes with it, and the
    connection closes (H3_NO_ERROR) once it is done; counted as max_requests."""
    srv, port = h3_server(gatling, extra=("-R", "3"))

    async def main():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=Client) as c:
            got = [(await c.request("/f.txt"))[0] for _ in range(3)]
            code = await asyncio.wait_for(asyncio.shield(c.ended), 5)
            return got, code
    got, code = run(main())
    assert got == [200, 200, 200] and code == H3_NO_ERROR, (got, code)
    assert len(h3_log_lines(srv, "/f.txt", 3)) == 3
    assert server_status(srv)["max_requests"] == 1


@needs_aioquic
def test_no_request_head_in_time(gatling):
    """-s 1: a connection that sends no request, and one whose request's
    fields began and never end (a HEADERS frame cut short), are closed
    after a second (timeout_head); a prompt request is answered."""
    srv, port = h3_server(gatling, extra=("-s", "1"))

    async def silent():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=Client) as c:
            return await asyncio.wait_for(asyncio.shield(c.ended), 9)

    async def dripping():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=Client) as c:
            assert (await c.request("/f.txt"))[0] == 200
            sid = c._quic.get_next_available_stream_id()
            c._quic.send_stream_data(sid, b"\x01\x40\x64" + b"\x00\x00")  # HEADERS, 100 bytes
            c.transmit()
            t0 = time.monotonic()
            code = await asyncio.wait_for(asyncio.shield(c.ended), 9)
            return code, time.monotonic() - t0
    # -s 1, not -T 10 (8: room for a busy machine and aioquic's handshake)
    t0 = time.monotonic()
    assert run(silent()) == H3_NO_ERROR
    assert 0.8 < time.monotonic() - t0 < 8
    code, took = run(dripping())
    assert code == H3_NO_ERROR and 0.8 < took < 8, (code, took)
    assert server_status(srv)["timeout_head"] == 2


@needs_aioquic
def test_misdirected_421(gatling, pki):  # noqa: F811  (pki: test_tls's fixture)
    """The TLS server name chose other.test's certificate: a Host of
    le.test's (another certificate) is 421, one of *.wild.test's (the same)
    is served, as over HTTP/1.1 and HTTP/2 (test_tls.py)."""
    srv = gatling(args=tls_args(pki))
    port = https_port(srv)

    async def ask(sni, authority):
        cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=sni)
        cfg.load_verify_locations(pki + "/ca.pem")
        async with connect("127.0.0.1", port, configuration=cfg, create_protocol=Client) as c:
            return (await c.request("/f.txt", authority=authority))[0]
    assert run(ask("other.test", "other.test")) == 200
    assert run(ask("other.test", "a.wild.test:443")) == 200
    assert run(ask("other.test", "le.test")) == 421
    assert run(ask("localhost", "localhost")) == 200
    assert run(ask("localhost", "unknown.example")) == 200
    assert server_status(srv)["tls_misdirected"] == 1


H3_MESSAGE_ERROR = 0x10E


@needs_aioquic
def test_authority_and_host_that_disagree(gatling):
    """Issue 92: a host field naming another than :authority is a malformed
    request (RFC 9114 4.3.1), a stream error H3_MESSAGE_ERROR (4.1.2), never
    served as either name nor answered 431; the connection and its other
    streams go on, and a host that agrees but for case is the same name (as
    test_h2.py's over HTTP/2)."""
    srv, port = h3_server(gatling)

    async def main():
        async with connect("127.0.0.1", port, configuration=client_config(),
                           create_protocol=HeldH3) as c:
            c.streams()
            sids = []
            for host in (b"other.example", b"LOCALHOST", b"localhost.evil"):
                sid = c._quic.get_next_available_stream_id()
                c.done[sid] = asyncio.get_running_loop().create_future()
                c._quic.send_stream_data(sid, frame(1, get_fields("/f.txt") + field(b"host", host)),
                                         end_stream=True)
                sids.append(sid)
            c.transmit()
            for _ in range(400):  # until each stream is answered or reset; 20 s: a hang
                if all(s in c.resets or c.done[s].done() for s in sids):
                    break
                await asyncio.sleep(0.05)
            after = await c.request(get_fields("/f.txt"))
            return sids, dict(c.resets), dict(c.data), after, c.ended.done()
    sids, resets, data, after, ended = run(main())
    assert resets == {sids[0]: H3_MESSAGE_ERROR, sids[2]: H3_MESSAGE_ERROR}, (resets, data)
    assert data[sids[1]].endswith(b"hello\n"), data
    assert not any(b"431" in data.get(s, b"") for s in (sids[0], sids[2])), data
    assert after.endswith(b"hello\n") and not ended, after[:200]
    assert server_status(srv)["h3_failed"] == 0
