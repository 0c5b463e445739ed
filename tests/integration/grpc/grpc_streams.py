"""Many bidirectional gRPC calls at once, for the tests (run by
/usr/bin/python3: Debian's python3-grpcio).  Usage:
  grpc_streams.py TARGET CA|- CALLS MESSAGES SIZE fresh|reused [ROUNDS [TIMEOUT]]
CALLS calls of test.Echo/Bidi at once, each sending MESSAGES messages of
SIZE bytes and reading each one back; fresh: each call on a channel (and a
connection) of its own, reused: all on one channel, which also carries the
ROUNDS (default 1) that follow one another.  Prints one JSON line: how many
calls were made, how many came back whole (status OK, every message), and
the status codes of the others ({"calls": 8, "ok": 8, "codes": {}})."""
import json
import sys
import threading

import grpc


def channel(target, ca, own):
    opts = [("grpc.max_receive_message_length", 64 << 20)]
    if own:  # no subchannel shared with the other channels: a connection of its own
        opts.append(("grpc.use_local_subchannel_pool", 1))
    if ca == "-":
        return grpc.insecure_channel(target, options=opts)
    creds = grpc.ssl_channel_credentials(open(ca, "rb").read())
    return grpc.secure_channel(target, creds,
                               options=opts + [("grpc.ssl_target_name_override", "localhost")])


def one_call(ch, n, size, timeout, out, i):
    msgs = (b"m" * size for _ in range(n))
    try:
        it = ch.stream_stream("/test.Echo/Bidi")(msgs, timeout=timeout)
        got = sum(1 for m in it if len(m) == size)
        out[i] = "OK" if got == n else "SHORT"
    except grpc.RpcError as e:
        out[i] = e.code().name


def main():
    target, ca, calls, n, size, mode = sys.argv[1:7]
    calls, n, size = int(calls), int(n), int(size)
    rounds = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    timeout = float(sys.argv[8]) if len(sys.argv) > 8 else 60
    shared = channel(target, ca, True) if mode == "reused" else None
    codes = {}
    for _ in range(rounds):
        chans = [shared or channel(target, ca, True) for _ in range(calls)]
        out = [None] * calls
        ts = [threading.Thread(target=one_call, args=(chans[i], n, size, timeout, out, i))
              for i in range(calls)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for c in out:
            codes[c] = codes.get(c, 0) + 1
        if not shared:
            for ch in chans:
                ch.close()
    ok = codes.pop("OK", 0)
    print(json.dumps({"calls": calls * rounds, "ok": ok, "codes": codes}), flush=True)
    if shared:
        shared.close()


if __name__ == "__main__":
    main()
