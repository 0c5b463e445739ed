"""A gRPC client for the tests (run by /usr/bin/python3): one call, its
outcome as a JSON line.  Usage:
  grpc_client.py TARGET CA|- KIND METHOD ARG [TIMEOUT] [N]
TARGET host:port; CA the test CA's file for TLS (the name checked is
localhost), - for h2c; KIND unary, sstream, cstream, bidi or many (N unary
calls at once, on one channel); ARG the request (for cstream and bidi,
comma-separated messages; "@N*SIZE" for N messages of SIZE bytes)."""
import json
import sys
from concurrent import futures

import grpc


def channel(target, ca):
    opts = [("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20)]
    if ca == "-":
        return grpc.insecure_channel(target, options=opts)
    creds = grpc.ssl_channel_credentials(open(ca, "rb").read())
    return grpc.secure_channel(target, creds,
                               options=opts + [("grpc.ssl_target_name_override", "localhost")])


def messages(arg):
    if arg.startswith("@"):
        n, size = arg[1:].split("*")
        return [b"m" * int(size) for _ in range(int(n))]
    return [m.encode() for m in arg.split(",")]


def summary(x):
    if isinstance(x, list):
        return [summary(m) for m in x]
    return x.decode() if len(x) < 64 else "%d bytes" % len(x)


def call(ch, kind, method, arg, timeout):
    path = "/test.Echo/" + method
    if kind == "unary":
        r, c = ch.unary_unary(path).with_call(arg.encode(), timeout=timeout)
        return summary(r), dict(c.trailing_metadata() or ())
    if kind == "sstream":
        it = ch.unary_stream(path)(arg.encode(), timeout=timeout)
        return summary(list(it)), dict(it.trailing_metadata() or ())
    if kind == "cstream":
        r, c = ch.stream_unary(path).with_call(iter(messages(arg)), timeout=timeout)
        return summary(r), dict(c.trailing_metadata() or ())
    it = ch.stream_stream(path)(iter(messages(arg)), timeout=timeout)
    return [len(m) for m in it], dict(it.trailing_metadata() or ())


def main():
    target, ca, kind, method, arg = sys.argv[1:6]
    timeout = float(sys.argv[6]) if len(sys.argv) > 6 else 30
    ch = channel(target, ca)
    out = {}
    try:
        if kind == "many":
            n = int(sys.argv[7])
            with futures.ThreadPoolExecutor(n) as ex:
                rs = list(ex.map(lambda i: call(ch, "unary", method, arg, timeout)[0], range(n)))
            out = {"code": "OK", "result": rs}
        else:
            r, trailers = call(ch, kind, method, arg, timeout)
            out = {"code": "OK", "result": r, "trailers": trailers}
    except grpc.RpcError as e:
        out = {"code": e.code().name, "details": e.details()}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
