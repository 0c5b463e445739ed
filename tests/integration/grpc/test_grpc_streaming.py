"""gRPC's ordinary streaming against HTTP/2's flood defences (issue 75;
gatling.8, HTTP/2 FLOOD DEFENCES).

python3-grpcio (C-core) sends a small WINDOW_UPDATE for about every message
it reads, a PING after the DATA it reads (its bandwidth estimate) and a
5-byte WINDOW_UPDATE on every stream it opens.  Counted as frames, that was a
flood: calls of 1,000 small messages were cut by GOAWAY ENHANCE_YOUR_CALM,
and after four cut calls the client's address was refused at accept.  The
defences now count what a frame buys (h2.c's window_bought: a WINDOW_UPDATE
that gives back no more than our DATA took is free), so:

  - bidirectional calls of 1,000 and 10,000 small messages, 8 at once, on
    fresh connections and on one reused connection, through gatling to a
    grpcio backend (an h2c/ -P rule), all come back whole, and no flood
    defence counted anything;
  - a raw python3-h2 client that gives back every byte of a download in
    15-byte WINDOW_UPDATEs (as many as a gRPC client's) is served on;
  - one that sends 1-byte WINDOW_UPDATEs that buy nothing still gets GOAWAY
    ENHANCE_YOUR_CALM, counted in /metrics and named in one error log line.

grpc_streams.py makes the calls (under /usr/bin/python3, Debian's grpcio).
"""
import json
import os
import re
import socket
import subprocess
import time

import pytest

from conftest import (first_backend_only, H3, http_only, import_h2, test_pki as pki_dir, TLS,
                      wait_for)
import h2backends

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's, with python3-grpcio

pytestmark = pytest.mark.skipif(
    subprocess.run([PY, "-c", "import grpc"], capture_output=True).returncode != 0,
    reason="needs python3-grpcio (tests/setup.sh)")
no_grpcio_h3 = pytest.mark.skipif(H3, reason="grpcio has no HTTP/3")


@pytest.fixture(autouse=True)
def _codec_tests_on_the_first_backend(request):
    first_backend_only(request, ("test_bidi_streams_are_not_cut",
                                 "test_window_updates_that_give_back_our_data_are_free",
                                 "test_a_window_update_flood_is_still_cut"),
                       "HTTP/2's defences above io/: on the first backend")


@pytest.fixture
def backend(tmp_path):
    b = h2backends.GrpcBackend(tmp_path)
    yield b
    b.stop()


def metrics_floods(srv):
    """/metrics' gatling_h2_floods_total, by kind."""
    r = subprocess.run(["curl", "-sS", "-k", "%s://127.0.0.1:%d/metrics"
                        % ("https" if TLS and not srv.plain_port else "http",
                           srv.plain_port or srv.port)],
                       capture_output=True, text=True, timeout=10)
    kinds = {m.group(1): int(m.group(2)) for m in
             re.finditer(r'^gatling_h2_floods_total\{kind="(\w+)"\} (\d+)', r.stdout, re.M)}
    assert kinds, r.stdout[:500]
    return kinds


def pin_to(pid, cpu):
    """Every thread of process pid onto cpu alone."""
    for tid in os.listdir("/proc/%d/task" % pid):
        os.sched_setaffinity(int(tid), {cpu})


def streams(srv, calls, n, mode, rounds=1, limit=50, cpu=None):
    """grpc_streams.py's outcome (on cpu alone, when given)."""
    ca = os.path.join(pki_dir(), "ca.pem") if TLS else "-"
    argv = [PY, os.path.join(HERE, "grpc_streams.py"), "127.0.0.1:%d" % srv.port, ca,
            str(calls), str(n), "10", mode, str(rounds), str(limit - 5)]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + argv
    r = subprocess.run(argv, capture_output=True, text=True, timeout=limit)
    assert r.returncode == 0 and r.stdout, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


@no_grpcio_h3
@pytest.mark.parametrize("calls,n,mode,rounds,pin", [(8, 1000, "fresh", 2, False),
                                                     (8, 1000, "reused", 2, False),
                                                     (8, 10000, "fresh", 1, False),
                                                     (1, 1000, "fresh", 6, True)])
def test_bidi_streams_are_not_cut(gatling, backend, calls, n, mode, rounds, pin):
    """calls bidirectional calls at once, n 10-byte messages each way, on a
    connection each (fresh) or all on one (reused), rounds after one
    another: every call comes back whole; no flood counted or logged.
    Before (frames counted, 2 a DATA frame we sent free), with gatling, the
    backend and the client on one CPU (pin: the backend's DATA frames then
    carry several messages, the client still sends a WINDOW_UPDATE for
    each), every call was cut, and the address refused after four."""
    srv = gatling({".proxy": ""}, check_fds=False,
                  args=("-T", "10", "-S", "-P", r"h2c/127.0.0.1/%d/^/test\." % backend.port))
    cpu = min(os.sched_getaffinity(0)) if pin else None
    if pin:
        pin_to(srv.pid, cpu)
        pin_to(backend.proc.pid, cpu)
    # 20 s on a quiet machine for 8 x 10,000 on the sanitizer build: room for a busy one
    got = streams(srv, calls, n, mode, rounds, limit=120 if n > 1000 else 50, cpu=cpu)
    assert got == {"calls": calls * rounds, "ok": calls * rounds, "codes": {}}, got
    assert sum(metrics_floods(srv).values()) == 0
    assert not [l for l in srv.errlog if "flood" in l], srv.errlog


def h2_client(srv):
    """A python3-h2 client connection to srv's plain port (h2c by prior
    knowledge): (socket, H2Connection), the preface and SETTINGS sent (its
    streams' windows 16 MiB: only the connection's is given back)."""
    import_h2()
    import h2.config
    import h2.connection
    import h2.settings
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.local_settings = h2.settings.Settings(
        client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c


def events_until(s, c, done, timeout=10):
    """Read and hand to c until done(event) says so for one: that event, or
    None when the server closed first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = s.recv(65536)
        if not data:
            return None
        for ev in c.receive_data(data):
            if done(ev):
                return ev
        s.sendall(c.data_to_send())
    raise AssertionError("no end in %d s" % timeout)


def get(s, c, path):
    """GET path on a new stream: its body and the WINDOW_UPDATEs sent, each
    DATA frame's bytes given back to the connection's window in 15-byte
    pieces (a gRPC client's per-message size), as a client reading messages
    one by one would."""
    import h2.events
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                         (":authority", "localhost")], end_stream=True)
    s.sendall(c.data_to_send())
    body, given = b"", 0
    while True:
        data = s.recv(65536)
        assert data, "closed"
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                body += ev.data
                n = ev.flow_controlled_length
                while n:
                    k = min(n, 15)
                    c.increment_flow_control_window(k)
                    n -= k
                    given += 1
            if isinstance(ev, h2.events.ConnectionTerminated):
                raise AssertionError("GOAWAY %r after %d WINDOW_UPDATEs" % (ev, given))
            if isinstance(ev, h2.events.StreamEnded):
                s.sendall(c.data_to_send())
                return body, given
        s.sendall(c.data_to_send())


@http_only  # a raw h2c client; the defence is the codec's, whatever the scheme
def test_window_updates_that_give_back_our_data_are_free(gatling):
    """Every byte of a 256 KiB download given back in 15-byte
    WINDOW_UPDATEs (17,000 frames, far past the flood's 128 and 32 a second)
    on one connection, twice: served, nothing counted."""
    big = os.urandom(256 << 10)
    srv = gatling({"big.bin": big}, args=("-T", "10", "-E", "-S"))
    s, c = h2_client(srv)
    for _ in range(2):
        body, given = get(s, c, "/big.bin")
        assert body == big and given > 17000, given
    s.close()
    assert sum(metrics_floods(srv).values()) == 0
    assert not [l for l in srv.errlog if "flood" in l], srv.errlog


@http_only
def test_a_window_update_flood_is_still_cut(gatling):
    """After a download given back in full, 1,000 WINDOW_UPDATEs of 1 byte
    on the connection (none gives back anything our DATA took): GOAWAY
    ENHANCE_YOUR_CALM, /metrics' window_update floods 1, and one error log
    line naming the client, the frames and the counts."""
    import h2.events
    srv = gatling({"f.bin": b"x" * 5000}, args=("-T", "10", "-E", "-S"))
    s, c = h2_client(srv)
    assert get(s, c, "/f.bin")[0] == b"x" * 5000
    for _ in range(1000):
        c.increment_flow_control_window(1)
    try:
        s.sendall(c.data_to_send())
    except OSError:
        pass
    ev = events_until(s, c, lambda e: isinstance(e, h2.events.ConnectionTerminated))
    s.close()
    assert ev is not None and ev.error_code == 11, ev  # ENHANCE_YOUR_CALM
    assert metrics_floods(srv)["window_update"] == 1
    wait_for(lambda: [l for l in srv.errlog if "flood" in l], 5, "the log line")
    line = [l for l in srv.errlog if "flood" in l]
    assert len(line) == 1, srv.errlog
    assert re.search(r"HTTP/2 flood, GOAWAY ENHANCE_YOUR_CALM \(peer 127\.0\.0\.1\) "
                     r"WINDOW_UPDATEs beyond what our DATA took: 1[2-9]\d in \d+ ms "
                     r"\(allowed 128, then 32 a second\), \d+ more gave back what it took",
                     line[0]), line
