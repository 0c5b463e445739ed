"""A gRPC backend for the tests (run by /usr/bin/python3: Debian's
python3-grpcio), with no stubs to generate: the methods of test.Echo take and
give raw bytes, and grpc.health.v1.Health/Check answers with a hand-built
HealthCheckResponse.  Usage: grpc_backend.py PORT [sick-file [PEM]]; prints
"ready" once it listens: with PEM (a certificate, its chain and its key in
one file), over TLS (ALPN h2) instead of h2c.

  test.Echo/Unary         the request back; b"sleep:S" sleeps S seconds
                          first; b"big:N" gives N bytes; b"fail" ends
                          NOT_FOUND "no such thing"; b"die" kills the process
                          before answering
  test.Echo/ServerStream  b"N:SIZE[:die]": N messages of SIZE bytes (die:
                          the process exits after the first)
  test.Echo/ClientStream  the total bytes of the messages, as ASCII
  test.Echo/Bidi          each message back as it comes
  test.Echo/Peers         the number of connections (distinct peers) the
                          server has seen, as ASCII
"""
import os
import sys
import threading
import time
from concurrent import futures

import grpc

PEERS = set()
LOCK = threading.Lock()
SICK = sys.argv[2] if len(sys.argv) > 2 else None


def seen(ctx):
    with LOCK:
        PEERS.add(ctx.peer())


def unary(req, ctx):
    seen(ctx)
    if req.startswith(b"sleep:"):
        time.sleep(float(req[6:]))
    if req.startswith(b"big:"):
        return b"x" * int(req[4:])
    if req == b"fail":
        ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
    if req == b"die":
        os._exit(1)
    ctx.set_trailing_metadata((("x-echo-trailer", "yes"),))
    return req


def server_stream(req, ctx):
    seen(ctx)
    parts = req.split(b":")
    for i in range(int(parts[0])):
        yield bytes([65 + i % 26]) * int(parts[1])
        if len(parts) > 2 and parts[2] == b"die":
            time.sleep(0.2)
            os._exit(1)


def client_stream(it, ctx):
    seen(ctx)
    return str(sum(len(m) for m in it)).encode()


def bidi(it, ctx):
    seen(ctx)
    for m in it:
        yield m


def peers(req, ctx):
    with LOCK:
        return str(len(PEERS)).encode()


def health(req, ctx):
    serving = not (SICK and os.path.exists(SICK))
    return b"\x08\x01" if serving else b"\x08\x02"  # status: SERVING (1), NOT_SERVING (2)


def main():
    port = int(sys.argv[1])
    h = grpc.method_handlers_generic_handler("test.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Peers": grpc.unary_unary_rpc_method_handler(peers),
    })
    hh = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(health)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64),
                         options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((h, hh))
    pem = sys.argv[3] if len(sys.argv) > 3 else None
    if pem:
        text = open(pem).read()
        key = text[text.index("-----BEGIN PRIVATE KEY-----"):].encode()
        chain = text[:text.index("-----BEGIN PRIVATE KEY-----")].encode()
        creds = grpc.ssl_server_credentials([(key, chain)])
        server.add_secure_port("127.0.0.1:%d" % port, creds)
    else:
        server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
