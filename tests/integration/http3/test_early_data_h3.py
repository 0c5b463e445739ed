"""Early data over QUIC (issue 80: HTTP/3's 0-RTT, quic/quic_callbacks.c,
h3/h3.c), with aioquic: a connection gets a session ticket, the next one
resumes with it and sends its request in 0-RTT.  --early-data on: a GET in
0-RTT is accepted and answered (early_data true in the JSON log, the
accepted outcome counted); a POST in 0-RTT is held until the handshake
completes (counted held); a fresh server refuses early data for the replay
table's first 11 s (the request is still answered, after the handshake);
the client's first flight (Initial + 0-RTT) recorded by a UDP relay and
sent again raw, several times and from several source ports (so that under
-W 2 both workers see some) is not answered again and is counted as a
replay.  Without --early-data the server sends no ticket and 0-RTT never
happens.  Two servers with --early-data, shared by the tests of the module
(the table's 11 s youth is waited out once each)."""
import asyncio
import json
import os
import socket
import threading
import time
import urllib.request

import pytest

from conftest import make_docroot, skip_without_h3, start_server, https_port
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
from harness.checks import serve_then_check
from test_h3 import HAVE_AIOQUIC, _H3, needs_aioquic

if HAVE_AIOQUIC:
    from aioquic.asyncio import connect
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import HandshakeCompleted

TREE = {"f.txt": b"hello\n"}
YOUTH = 11.5  # site/replay.h's REPLAY_WINDOW_MS, and a margin


@pytest.fixture(autouse=True)
def h3_built(build):
    skip_without_h3(build.binary)


if HAVE_AIOQUIC:
    class Early(_H3):
        """test_h3's client, which remembers how the handshake went."""
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.hs = None

        def quic_event_received(self, event):
            if isinstance(event, HandshakeCompleted):
                self.hs = event
            super().quic_event_received(event)


def plain_port(srv):
    return srv.listeners[0][1]


def counters(srv):
    """/metrics' gatling_early_data* lines: {'name{labels}': value}."""
    url = "http://127.0.0.1:%d/metrics" % plain_port(srv)
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines()
            if ln.startswith("gatling_early_data")}


def outcome(srv, what):
    return counters(srv).get('gatling_early_data_total{outcome="%s"}' % what, 0)


def settled(f, want, timeout=8):
    """f() once it reaches want (with -W the workers publish their counters
    now and then), or its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = f()
        if v >= want or time.monotonic() > deadline:
            return v
        time.sleep(0.2)


def answer(srv, what):
    return counters(srv).get('gatling_early_data_requests_total{answer="%s"}' % what, 0)


def conn(port, requests, ticket=None, early=False):
    """One connection to port: requests [(path, method)] sent at once (in
    0-RTT when early and the ticket allows it); (answers, tickets it got,
    the HandshakeCompleted event)."""
    tickets = []

    async def main():
        cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost",
                                max_datagram_frame_size=None)
        cfg.load_verify_locations(os.path.join(pki_dir(), "ca.pem"))
        cfg.session_ticket = ticket
        async with connect("127.0.0.1", port, configuration=cfg, create_protocol=Early,
                           session_ticket_handler=tickets.append,
                           wait_connected=not early) as c:
            got = await asyncio.gather(*(c.request(p, m) for p, m in requests))
            for _ in range(40):  # the ticket follows the handshake
                if tickets or ticket is None and c.hs is None:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.1)
            return got, c.hs
    got, hs = asyncio.run(asyncio.wait_for(main(), 60))
    return got, tickets, hs


def json_lines(srv, path):
    out = []
    for ln in srv.log:
        try:
            j = json.loads(ln)
        except ValueError:
            continue
        if path in json.dumps(j):
            out.append(j)
    return out


def fresh_ticket(port):
    got, tickets, _ = conn(port, [("/f.txt", "GET")])
    assert got[0][0] == 200 and tickets, "no session ticket"
    return tickets[-1]


def early_server(build, tmp_path_factory, extra):
    base = tmp_path_factory.mktemp("early-" + build.name)
    root = os.path.join(str(base), "www")
    make_docroot(root, TREE)
    srv = start_server(build, root, ("-T", "10", "-S", "-C", os.path.join(pki_dir(), "certs"),
                                     "-e", "0", "--log-format", "json", "--early-data", "4096")
                       + tuple(extra))
    srv.started = time.monotonic()
    return srv


@pytest.fixture(scope="module")
def young(build, tmp_path_factory):
    """A server with --early-data, and what its first 11 s did with 0-RTT
    (refused: its replay table is too young), then old enough."""
    skip_without_h3(build.binary)
    if not HAVE_AIOQUIC:
        pytest.skip("no aioquic")
    srv = early_server(build, tmp_path_factory, ())
    port = https_port(srv)
    t = fresh_ticket(port)
    got, _, hs = conn(port, [("/f.txt?young", "GET")], ticket=t, early=True)
    srv.youth = (got, hs, outcome(srv, "refused"))
    time.sleep(max(0, srv.started + YOUTH - time.monotonic()))
    yield from serve_then_check(srv)


@pytest.fixture(scope="module")
def workers(build, tmp_path_factory):
    """The same with -W 2, old enough."""
    skip_without_h3(build.binary)
    if not HAVE_AIOQUIC:
        pytest.skip("no aioquic")
    srv = early_server(build, tmp_path_factory, ("-W", "2"))
    time.sleep(max(0, srv.started + YOUTH - time.monotonic()))
    yield from serve_then_check(srv)


@needs_aioquic
def test_a_fresh_start_refuses_early_data(young):
    got, hs, refused = young.youth
    assert got[0][0] == 200 and got[0][2] == b"hello\n"  # answered after the handshake
    assert hs.session_resumed and not hs.early_data_accepted
    assert refused >= 1
    assert [j["early_data"] for j in json_lines(young, "/f.txt?young")] == [False]


@needs_aioquic
def test_get_in_0rtt_is_answered(young):
    port = https_port(young)
    before = outcome(young, "accepted"), answer(young, "early")
    got, tickets, hs = conn(port, [("/f.txt?early", "GET")], ticket=fresh_ticket(port),
                            early=True)
    assert got[0][0] == 200 and got[0][2] == b"hello\n"
    assert hs.session_resumed and hs.early_data_accepted
    assert tickets  # and a ticket for the next
    assert outcome(young, "accepted") == before[0] + 1
    assert answer(young, "early") == before[1] + 1
    lines = json_lines(young, "/f.txt?early")
    assert [j["early_data"] for j in lines] == [True], lines


@needs_aioquic
def test_post_in_0rtt_waits_for_the_handshake(young):
    port = https_port(young)
    held, early = answer(young, "held"), answer(young, "early")
    got, _, hs = conn(port, [("/f.txt?post", "POST")], ticket=fresh_ticket(port), early=True)
    assert hs.early_data_accepted
    assert got[0][0] in (405, 501), got[0][:2]  # answered, once the handshake completed
    assert answer(young, "held") == held + 1
    assert answer(young, "early") == early
    lines = json_lines(young, "/f.txt?post")
    assert [j["early_data"] for j in lines] == [False], lines  # answered after: not early


def relay(server_port):
    """A UDP relay to server_port on 127.0.0.1: (its port, the datagrams
    the client sent before the server's first answer, a stop function)."""
    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", 0))
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back.connect(("127.0.0.1", server_port))
    first, state = [], {"client": None, "answered": False, "stop": False}

    def up():
        front.settimeout(0.2)
        while not state["stop"]:
            try:
                d, a = front.recvfrom(65536)
            except socket.timeout:
                continue
            state["client"] = a
            if not state["answered"]:
                first.append(d)
            back.send(d)

    def down():
        back.settimeout(0.2)
        while not state["stop"]:
            try:
                d = back.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                continue
            state["answered"] = True
            if state["client"]:
                front.sendto(d, state["client"])

    ts = [threading.Thread(target=f, daemon=True) for f in (up, down)]
    for t in ts:
        t.start()

    def stop():
        state["stop"] = True
        for t in ts:
            t.join()
        front.close()
        back.close()
    return front.getsockname()[1], first, stop


def replay_case(srv, tag, sends, count=True):
    port = https_port(srv)
    t = fresh_ticket(port)
    rport, first, stop = relay(port)
    try:
        got, _, hs = conn(rport, [("/f.txt?" + tag, "GET")], ticket=t, early=True)
    finally:
        stop()
    assert got[0][0] == 200 and hs.early_data_accepted
    assert first
    replayed = outcome(srv, "replayed")
    refused = outcome(srv, "refused")
    time.sleep(1)  # the first connection's closing period is over: its IDs are free again
    for _ in range(sends):  # from new source ports: with -W 2 on both workers
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        for d in first:
            s.sendto(d, ("127.0.0.1", port))
        time.sleep(0.1)
        s.close()
    time.sleep(1)
    lines = json_lines(srv, "/f.txt?" + tag)
    assert len(lines) == 1, lines  # no second answer
    if not count:  # refused: by the table (a replay) or by GnuTLS before it
        return settled(lambda: outcome(srv, "replayed") + outcome(srv, "refused"),
                       replayed + refused + 1) - replayed - refused
    return settled(lambda: outcome(srv, "replayed"), replayed + 1) - replayed


@needs_aioquic
def test_replayed_first_flight_is_refused(young):
    assert replay_case(young, "replay1", 3) >= 1


@needs_aioquic
def test_replay_under_workers_is_refused(workers):
    """Under -W 2 a replay of the first flight is steered by its first,
    random DCID (quic_steer.h), so to the worker the original went to, from
    any source port: it is not answered again.  It may be refused by GnuTLS
    itself before the table is asked (its anti-replay refuses a ticket made
    before its last 10 s rollover, per worker): counted refused then, else
    replayed."""
    assert replay_case(workers, "replay2", 8, count=False) >= 1


@needs_aioquic
def test_without_early_data_no_0rtt(gatling):
    srv = gatling(TREE, args=("-T", "10", "-S", "-C", os.path.join(pki_dir(), "certs"),
                              "-e", "0"))
    port = https_port(srv)
    got, tickets, hs = conn(port, [("/f.txt", "GET")])
    assert got[0][0] == 200
    assert not tickets  # no ticket: no resumption, no 0-RTT
    assert not hs.session_resumed and not hs.early_data_accepted


@needs_aioquic
def test_ticket_older_than_gnutls_rollover_is_refused_early_data(young):
    """GnuTLS 3.7's anti-replay records from a start time it moves to now
    once a check finds it older than the window (10 s), and refuses early
    data on a ticket made before it (it cannot know the ticket's first
    flights were recorded): a ticket 10 s old whose worker checked another
    0-RTT since is resumed, its 0-RTT refused (counted) and the request
    answered after the handshake."""
    port = https_port(young)
    old = fresh_ticket(port)
    time.sleep(10.5)
    got, _, hs = conn(port, [("/f.txt?roll1", "GET")], ticket=fresh_ticket(port), early=True)
    assert hs.early_data_accepted  # this check moved GnuTLS's start time
    refused = outcome(young, "refused")
    got, _, hs = conn(port, [("/f.txt?roll2", "GET")], ticket=old, early=True)
    assert got[0][0] == 200 and hs.session_resumed and not hs.early_data_accepted
    assert outcome(young, "refused") == refused + 1
