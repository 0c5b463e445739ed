"""HTTP/2 backends over TLS (h2/ rules and pools, --proxy-ca, name=; issue
65; gatling.8, REVERSE PROXY and POOLS), and a backend's GOAWAY.

The backends are real: grpc_backend.py (Debian's python3-grpcio) serving
TLS with a certificate of the test CA (dist/mkcert.sh: 127.0.0.1 and
localhost), hypercorn (python3-hypercorn) with --certfile/--keyfile, one
with a certificate of another CA, and a raw python3-h2 server that answers
some streams and then sends GOAWAY below the others.  The clients are
grpc_client.py and the suite's Client (HTTP/1.1, HTTP/2 or HTTP/3 by
GATLING_SCHEME).

What is proven: gRPC unary and the three streaming kinds through an h2/
rule; plain HTTP/2 over TLS (the backend sees https, HTTP/2) for every
client protocol; a backend whose certificate another CA issued, or that
names another host (name=), refused: 502 (grpc-status 14 for a gRPC call)
and the verify result in the error log; a backend that never finishes its
handshake answered within -Q, never a hang; an h2/ pool's check= (HTTP and
grpc) over TLS taking a backend out and back; --check's refusals (h2/
without --proxy-ca, name= on an h2c/ pool, a --proxy-ca that holds no CA);
streams past a GOAWAY's last stream id, and one refused by REFUSED_STREAM,
answered from a new connection.
"""
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import H3, MUX, TLS, fetch, wait_for
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
from conftest import ROOT
from h2backends import GrpcBackend, h2_serve, hypercorn

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's, with python3-grpcio and python3-hypercorn

pytestmark = pytest.mark.skipif(
    subprocess.run([PY, "-c", "import grpc, hypercorn, h2"], capture_output=True).returncode,
    reason="needs python3-grpcio, python3-hypercorn and python3-h2 (tests/setup.sh)")

no_grpcio_h3 = pytest.mark.skipif(H3, reason="grpcio has no HTTP/3: the h3 pass uses Client")


def ca():
    return os.path.join(pki_dir(), "ca.pem")


def good_pem():
    return os.path.join(pki_dir(), "certs", "server.pem")


@pytest.fixture(scope="module")
def other_pem(tmp_path_factory):
    """A leaf for 127.0.0.1 and localhost from another throwaway CA."""
    d = str(tmp_path_factory.mktemp("other-ca"))
    subprocess.run(["sh", os.path.join(ROOT, "dist", "mkcert.sh"), d], check=True,
                   capture_output=True, timeout=60)
    return os.path.join(d, "certs", "server.pem")


@pytest.fixture
def gbackend(tmp_path):
    b = GrpcBackend(tmp_path, good_pem())
    yield b
    b.stop()


def h2_srv(gatling, args):
    return gatling({".proxy": "", "index.html": "static\n"},
                   args=("-T", "10", "-S", "--proxy-ca", ca()) + tuple(args), check_fds=False)


def call(srv, kind, method, arg, timeout=None):
    """One grpc_client.py call: its JSON outcome."""
    import json
    argv = [PY, os.path.join(HERE, "grpc_client.py"), "127.0.0.1:%d" % srv.port,
            ca() if TLS else "-", kind, method, arg]
    if timeout is not None:
        argv.append(str(timeout))
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def raw_call(srv, msg):
    """A unary call by the suite's Client (HTTP/2 or HTTP/3)."""
    import struct
    body = b"\0" + struct.pack(">I", len(msg)) + msg
    h = [("Content-Type", "application/grpc"), ("TE", "trailers"),
         ("Content-Length", str(len(body)))]
    with srv.connect(timeout=20) as c:
        return c.request("/test.Echo/Unary", method="POST", headers=h, body=body, timeout=20)


@no_grpcio_h3
def test_grpc_through_an_h2_tls_rule(gatling, gbackend):
    srv = h2_srv(gatling, ("-P", r"h2/127.0.0.1/%d/^/test\." % gbackend.port))
    r = call(srv, "unary", "Unary", "hello")
    assert r == {"code": "OK", "result": "hello", "trailers": {"x-echo-trailer": "yes"}}, r
    assert call(srv, "sstream", "ServerStream", "3:4")["result"] == ["AAAA", "BBBB", "CCCC"]
    assert call(srv, "cstream", "ClientStream", "a,bb,ccc")["result"] == "6"
    assert call(srv, "bidi", "Bidi", "a,bb,ccc")["result"] == [1, 2, 3]
    assert call(srv, "unary", "Unary", "big:3000000")["result"] == "3000000 bytes"


@pytest.mark.skipif(not MUX, reason="a raw gRPC call needs an HTTP/2 or HTTP/3 Client")
def test_grpc_over_h2_tls_for_h2_and_h3_clients(gatling, gbackend):
    srv = h2_srv(gatling, ("-P", r"h2/127.0.0.1/%d/^/test\." % gbackend.port))
    r = raw_call(srv, b"over TLS to the backend")
    assert r.status == 200 and r.header("grpc-status") == "0", r
    assert r.body[5:] == b"over TLS to the backend" and r.header("x-echo-trailer") == "yes"


def test_plain_http_over_h2_tls(gatling, tmp_path):
    """The backend sees HTTP/2 over TLS whatever the client's protocol; a
    pool's name= is the name verified (and SNI)."""
    with hypercorn(tmp_path, good_pem()) as (port, _):
        srv = h2_srv(gatling, ("--pool", "n=h2/127.0.0.1/%d;name=localhost" % port,
                               "-P", "h2/127.0.0.1/%d/^/hc" % port, "-P", "@n/^/named"))
        with srv.connect() as c:
            r = c.request("/hc/a")
            assert r.status == 200 and r.body == b"2 https GET /hc/a 0\n", r
            big = b"z" * 2000000
            r = c.request("/hc/b", method="POST", body=big,
                          headers=[("Content-Length", str(len(big)))])
            assert r.status == 200 and r.body == b"2 https POST /hc/b 2000000\n", r
            r = c.request("/named/x")
            assert r.status == 200 and r.body == b"2 https GET /named/x 0\n", r


def test_certificate_of_another_ca_refused(gatling, tmp_path, other_pem):
    with hypercorn(tmp_path, other_pem) as (port, _):
        srv = h2_srv(gatling, ("-P", "h2/127.0.0.1/%d/^/hc" % port))
        t0 = time.monotonic()
        r = fetch(srv.port, "/hc/a")
        assert r.status == 502 and time.monotonic() - t0 < 8, r
        wait_for(lambda: any("certificate did not verify: unable to get local issuer"
                             in x for x in srv.errlog), 5, "the verify result logged")
        assert any("HTTP/2 (TLS) backend 127.0.0.1/%d" % port in x for x in srv.errlog)


def test_certificate_for_another_name_refused(gatling, tmp_path):
    with hypercorn(tmp_path, good_pem()) as (port, _):
        srv = h2_srv(gatling, ("--pool", "w=h2/127.0.0.1/%d;name=wrong.example" % port,
                               "-P", "@w/^/hc"))
        r = fetch(srv.port, "/hc/a")
        assert r.status == 502, r
        wait_for(lambda: any("did not verify: hostname mismatch" in x for x in srv.errlog), 5,
                 "hostname mismatch logged")


@pytest.mark.skipif(not MUX, reason="a raw gRPC call needs an HTTP/2 or HTTP/3 Client")
def test_grpc_backend_of_another_ca_is_unavailable(gatling, tmp_path, other_pem):
    b = GrpcBackend(tmp_path, other_pem)
    try:
        srv = h2_srv(gatling, ("-P", r"h2/127.0.0.1/%d/^/test\." % b.port))
        r = raw_call(srv, b"anyone?")
        assert r.status == 200 and r.header("grpc-status") == "14", r
        wait_for(lambda: any("certificate did not verify" in x for x in srv.errlog), 5,
                 "the verify result logged")
    finally:
        b.stop()


def test_silent_backend_answered_within_q(gatling):
    """A backend that accepts the connection and never answers the
    ClientHello: the client gets its answer within -Q, never a hang."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)  # never accepted: the kernel completes the TCP handshake alone
    try:
        srv = h2_srv(gatling, ("-Q", "2", "-P", "h2/127.0.0.1/%d/^/hc" % lst.getsockname()[1]))
        t0 = time.monotonic()
        r = fetch(srv.port, "/hc/a", timeout=15)
        assert r.status == 502 and time.monotonic() - t0 < 6, r
        wait_for(lambda: any("did not complete its TLS handshake in time (-Q)" in x
                             for x in srv.errlog), 5, "the handshake's timeout logged")
    finally:
        lst.close()


def test_h2_tls_pool_http_check(gatling, tmp_path):
    """check= over TLS: a stopped member is taken out, its requests go to
    the other, and it comes back."""
    with hypercorn(tmp_path, good_pem()) as (p1, proc1), \
            hypercorn(tmp_path, good_pem()) as (p2, _):
        pool = ("two=h2/127.0.0.1/%d,127.0.0.1/%d;check=/health;interval=1;fall=1;rise=1;"
                "timeout=1;slowstart=0" % (p1, p2))
        srv = h2_srv(gatling, ("--pool", pool, "-P", "@two/^/hc"))

        def states():
            import json
            st = json.loads(fetch(srv.port, "/server-status?json").body)
            return {b["backend"]: b["state"] for b in st["backends"]}
        wait_for(lambda: states() == {"127.0.0.1/%d" % p1: "up", "127.0.0.1/%d" % p2: "up"},
                 10, "both up")
        proc1.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: states()["127.0.0.1/%d" % p1] == "down", 15,
                     "the stopped member taken out by its checks")
            for _ in range(4):
                assert fetch(srv.port, "/hc/x").status == 200
        finally:
            proc1.send_signal(signal.SIGCONT)
        wait_for(lambda: states()["127.0.0.1/%d" % p1] != "down", 15, "back once it answers")


@no_grpcio_h3
def test_h2_tls_pool_grpc_check(gatling, gbackend):
    pool = "g=h2/127.0.0.1/%d;check=grpc;interval=1;fall=1;rise=1;slowstart=0" % gbackend.port
    srv = h2_srv(gatling, ("--pool", pool, "-P", r"@g/^/test\."))
    assert call(srv, "unary", "Unary", "up")["code"] == "OK"
    open(gbackend.sick, "w").close()
    wait_for(lambda: call(srv, "unary", "Unary", "x").get("details") == "no backend is up", 15,
             "the backend taken out by its gRPC health check over TLS")
    os.unlink(gbackend.sick)
    wait_for(lambda: call(srv, "unary", "Unary", "back")["code"] == "OK", 15,
             "the backend back once SERVING")


def test_check_refuses_what_cannot_verify(build, tmp_path):
    def check(*args):
        r = subprocess.run([build.binary] + list(args) + ["--check"], capture_output=True,
                           text=True, timeout=10)
        return r.returncode, r.stderr
    rc, err = check("-P", "h2/127.0.0.1/1/^/x")
    assert rc == 2 and "need --proxy-ca" in err, err
    rc, err = check("--pool", "p=h2c/127.0.0.1/1;name=a.example", "-P", "@p/^/x")
    assert rc == 2 and "name=" in err and "h2/ pools" in err, err
    rc, err = check("--proxy-ca", ca(), "-P", "h2/unix:/run/x.sock:^/x")
    assert rc == 2 and "unix socket needs" in err, err
    empty = tmp_path / "empty.pem"
    empty.write_text("not a certificate\n")
    rc, err = check("--proxy-ca", str(empty), "-P", "h2/127.0.0.1/1/^/x")
    assert rc == 2 and "no CA certificate" in err, err
    rc, err = check("--proxy-ca", ca(), "--pool", "p=h2/127.0.0.1/1;name=api.example",
                    "-P", "@p/^/x")
    assert rc == 0, err


def goaway_backend(conns, answered):
    """A raw HTTP/2 backend (python3-h2): its first connection waits for
    four requests, answers the first, refuses the second (REFUSED_STREAM)
    and sends GOAWAY with the second's id as the last: the third and fourth
    are past it.  Later connections answer everything."""
    import h2.errors
    import h2.events

    def handle(sock):
        n = len(conns)
        conns.append(sock)
        ended = []

        def on_event(c, ev):
            if not isinstance(ev, h2.events.StreamEnded):
                return
            if n > 0:
                answered.append((n, ev.stream_id))
                c.send_headers(ev.stream_id, [(":status", "200"), ("x-conn", str(n))])
                c.send_data(ev.stream_id, b"conn %d\n" % n, end_stream=True)
                return
            ended.append(ev.stream_id)
            if len(ended) == 4:
                first, second = sorted(ended)[:2]
                answered.append((0, first))
                c.send_headers(first, [(":status", "200"), ("x-conn", "0")])
                c.send_data(first, b"conn 0\n", end_stream=True)
                c.reset_stream(second, h2.errors.ErrorCodes.REFUSED_STREAM)
                c.close_connection(last_stream_id=second)
        h2_serve(sock, on_event)
    return handle


def test_goaway_last_stream_id_retried(gatling):
    """Four POSTs at once on one backend connection: the backend answers one,
    refuses one and sends GOAWAY below the other two.  Every client gets its
    answer, the three others from a second connection (they never reached
    the application, so even a POST goes again)."""
    import appservers
    from conftest import import_h2
    import_h2()
    conns, answered = [], []
    lst = appservers.listener()
    appservers.serve(lst, goaway_backend(conns, answered), threaded=True)
    try:
        srv = gatling({".proxy": ""}, args=("-T", "10", "-P", "h2c/127.0.0.1/%d/^/g"
                                            % lst.getsockname()[1]), check_fds=False)
        out = [None] * 4

        def one(i):
            with srv.connect(timeout=20) as c:
                out[i] = c.request("/g/%d" % i, method="POST", body=b"x%d" % i,
                                   headers=[("Content-Length", "2")], timeout=20)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert all(r is not None and r.status == 200 for r in out), out
        by_conn = sorted(r.header("x-conn") for r in out)
        assert by_conn == ["0", "1", "1", "1"], (by_conn, answered)
        assert len(conns) == 2 and len(answered) == 4, (len(conns), answered)
    finally:
        lst.close()
        for sock in conns:
            sock.close()
