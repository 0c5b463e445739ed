"""A client that reads nothing cannot make gatling hold an HTTP/2 backend's
answers (issue 92, item 7).

A client advertised a zero receive window and asked for large answers from
an h2c backend: gatling read and kept about 512 KiB per stream (its stream
window of 256 KiB acknowledged up to the 256 KiB an exchange may queue), so
3,000 such streams from one address took 1.5 GB.  Now an exchange fed by an
HTTP/2 backend stops at EX_STREAM_LOW (ex->tight) and the backend's window
is 64 KiB: a stream whose client reads nothing holds at most about 128 KiB.

The backend (python3-h2, written here) sends each stream's answer as fast as
its window lets it and counts what it could send; the client is raw
python3-h2 with SETTINGS_INITIAL_WINDOW_SIZE 0.  Once nothing moves, each
stream's count is what gatling holds for it; then the client opens its
windows and every answer arrives whole.
"""
import contextlib
import os
import socket
import ssl
import threading
import time

import pytest

import appservers
from conftest import H3, TLS, import_h2, wait_for
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
from h2backends import h2_serve

import_h2()
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402

pytestmark = pytest.mark.skipif(H3, reason="the client here is HTTP/2 (raw python3-h2)")

BIG = bytes(range(256)) * 4096  # 1 MiB an answer
STREAMS = 16
HELD_MAX = 160 * 1024  # EX_STREAM_LOW + the 64 KiB window, with a frame's slack


class PushingBackend:
    """Answers every request with BIG, sending whatever its windows allow,
    at once and again at each WINDOW_UPDATE; sent[path] counts the bytes."""

    def __init__(self):
        self.sent = {}
        self.lock = threading.Lock()
        self.lst = appservers.listener()
        self.port = self.lst.getsockname()[1]
        self.socks = []
        appservers.serve(self.lst, self.handle, threaded=True)

    def handle(self, sock):
        self.socks.append(sock)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        c.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100})
        todo = {}  # stream id -> [path, offset]

        def push():
            for sid, t in list(todo.items()):
                while t[1] < len(BIG):
                    w = min(c.local_flow_control_window(sid), c.max_outbound_frame_size,
                            len(BIG) - t[1])
                    if w <= 0:
                        break
                    c.send_data(sid, BIG[t[1]:t[1] + w], end_stream=t[1] + w == len(BIG))
                    t[1] += w
                    with self.lock:
                        self.sent[t[0]] = t[1]
                if t[1] == len(BIG):
                    del todo[sid]

        def on_event(c, ev):
            if isinstance(ev, h2.events.RequestReceived):
                path = dict((k.decode(), v.decode()) for k, v in ev.headers)[":path"]
                c.send_headers(ev.stream_id, [(":status", "200"),
                                              ("content-length", str(len(BIG)))])
                todo[ev.stream_id] = [path, 0]
                push()
            elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                push()
        h2_serve(sock, on_event, c)

    def close(self):
        self.lst.close()
        for s in self.socks:
            with contextlib.suppress(OSError):
                s.close()


def client_sock(srv):
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    if TLS:
        ctx = ssl.create_default_context(cafile=os.path.join(pki_dir(), "ca.pem"))
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
        assert sock.selected_alpn_protocol() == "h2"
    return sock


def settled(backend, n, quiet=1.5, limit=30):
    """The backend's counts once n streams began and nothing moved for quiet s."""
    end, last, since = time.time() + limit, None, time.time()
    while time.time() < end:
        with backend.lock:
            now = dict(backend.sent)
        if now != last:
            last, since = now, time.time()
        elif len(now) == n and time.time() - since >= quiet:
            return now
        time.sleep(0.1)
    raise AssertionError("the backend's sends never settled: %r" % last)


def test_a_client_that_reads_nothing_holds_little_of_the_backends(gatling):
    b = PushingBackend()
    try:
        srv = gatling({".proxy": "", "index.html": "static\n"}, check_fds=False,
                      args=("-T", "30", "-Q", "30", "-P", "h2c/127.0.0.1/%d/^/b" % b.port))
        sock = client_sock(srv)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.local_settings = h2.settings.Settings(client=True, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        c.initiate_connection()
        sids = {}
        for i in range(STREAMS):
            sid = c.get_next_available_stream_id()
            sids[sid] = "/b/%d" % i
            c.send_headers(sid, [(":method", "GET"), (":scheme", "https" if TLS else "http"),
                                 (":authority", "localhost"), (":path", sids[sid])],
                           end_stream=True)
        sock.sendall(c.data_to_send())
        held = settled(b, STREAMS)
        worst = max(held.values())
        assert worst <= HELD_MAX, "a stream's backend sent %d bytes to a client reading " \
            "nothing (at most %d): %r" % (worst, HELD_MAX, held)
        # the client opens its windows: every answer arrives whole
        c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
        c.increment_flow_control_window(1 << 30)
        sock.sendall(c.data_to_send())
        got, done = {sid: b"" for sid in sids}, set()
        sock.settimeout(30)
        while len(done) < len(sids):
            data = sock.recv(1 << 16)
            assert data, "gatling closed with %d of %d answers" % (len(done), len(sids))
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    got[ev.stream_id] += ev.data
                    c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    done.add(ev.stream_id)
                elif isinstance(ev, h2.events.StreamReset):
                    raise AssertionError("stream %d reset" % ev.stream_id)
            sock.sendall(c.data_to_send())
        assert all(v == BIG for v in got.values()), [len(v) for v in got.values()]
        sock.close()
    finally:
        b.close()


def test_silent_grpc_backend_is_logged(gatling):
    """A gRPC call whose backend stays silent past -Q: grpc-status 14 for the
    client and a line in the error log (the call's end was logged nowhere)."""
    b = appservers.listener()
    held = []

    def handle(sock):
        held.append(sock)
        h2_serve(sock, lambda c, ev: None)
    appservers.serve(b, handle, threaded=True)
    try:
        srv = gatling({".proxy": "", "index.html": "static\n"}, check_fds=False,
                      args=("-T", "10", "-Q", "1", "-P",
                            "h2c/127.0.0.1/%d/^/svc" % b.getsockname()[1]))
        sock = client_sock(srv)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "POST"), (":scheme", "https" if TLS else "http"),
                             (":authority", "localhost"), (":path", "/svc/M"),
                             ("content-type", "application/grpc"), ("te", "trailers")])
        c.send_data(sid, b"\0\0\0\0\0", end_stream=True)
        sock.sendall(c.data_to_send())
        fields, end = {}, time.time() + 15
        while "grpc-status" not in fields and time.time() < end:
            data = sock.recv(65536)
            if not data:
                break
            for ev in c.receive_data(data):
                if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    fields.update((k.decode(), v.decode()) for k, v in ev.headers)
            sock.sendall(c.data_to_send())
        sock.close()
        assert fields.get("grpc-status") == "14", fields
        wait_for(lambda: any("the backend did not answer in time (-Q)" in line
                             for line in srv.errlog), 10, "-Q's expiry logged: %r" % srv.errlog)
    finally:
        b.close()
        for s in held:
            with contextlib.suppress(OSError):
                s.close()
