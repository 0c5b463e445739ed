"""HTTP/2 backends the grpc/ modules share, each by h2c prior knowledge
(test_grpc) or over TLS (test_grpc_tls): grpc_backend.py and hypercorn
serving one small ASGI app, both run by /usr/bin/python3 (Debian's
python3-grpcio and python3-hypercorn); and the read loop of a raw
python3-h2 server (test_grpc_tls's GOAWAY backend, test_grpc's
REFUSED_STREAM one, test_h2_backend_errors's H2Backend).
"""
import contextlib
import os
import signal
import socket
import subprocess

from conftest import free_port, import_h2, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's, with python3-grpcio and python3-hypercorn


class GrpcBackend:
    """grpc_backend.py on a port of its own, over TLS with pem's certificate
    and key when given; its health turns NOT_SERVING while the file
    self.sick exists."""

    def __init__(self, tmp, pem=None):
        self.port = free_port()
        self.sick = str(tmp / "sick")
        argv = [PY, os.path.join(HERE, "grpc_backend.py"), str(self.port), self.sick]
        self.proc = subprocess.Popen(argv + ([pem] if pem else []), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", "the gRPC backend did not start: %r" % line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

# The app: its answer says what it saw, "VERSION SCHEME METHOD PATH BODY-LENGTH".
HC_APP = r'''
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    out = ("%s %s %s %s %d\n" % (scope["http_version"], scope["scheme"], scope["method"],
                                 scope["path"], len(body))).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"x-backend", b"hc")]})
    await send({"type": "http.response.body", "body": out})
'''


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def hypercorn(tmp, pem=None):
    """hypercorn serving HC_APP (written to the folder tmp) on a port of its
    own, over TLS with pem's certificate and key when given: (its port, its
    process), killed at the end."""
    (tmp / "hcapp.py").write_text(HC_APP)
    port = free_port()
    argv = [PY, "-m", "hypercorn", "hcapp:app", "--bind", "127.0.0.1:%d" % port]
    if pem:
        argv += ["--certfile", pem, "--keyfile", pem]
    p = subprocess.Popen(argv, cwd=str(tmp), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: listening(port), 20, "hypercorn listening")
        yield port, p
    finally:
        p.kill()
        p.wait(10)


def h2_serve(sock, on_event, c=None):
    """Serves the connection sock as python3-h2's server c (made by the
    caller for a configuration or settings of its own; else a plain one):
    its preface sent, each event of what comes given to on_event(c, ev)
    (DataReceived acknowledged first) and what that queued sent, until the
    peer closes, a read fails, its bytes are not HTTP/2, or on_event
    returns "close" (what is queued is sent, then the socket shut down)."""
    import_h2()
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    if c is None:
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    c.initiate_connection()
    sock.sendall(c.data_to_send())
    while True:
        try:
            data = sock.recv(65536)
        except OSError:  # closed by the test's end
            return
        if not data:
            return
        try:
            events = c.receive_data(data)
        except h2.exceptions.ProtocolError:
            return
        for ev in events:
            if isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if on_event(c, ev) == "close":
                with contextlib.suppress(OSError):
                    sock.sendall(c.data_to_send())
                    sock.shutdown(socket.SHUT_RDWR)
                return
        with contextlib.suppress(OSError):
            sock.sendall(c.data_to_send())
