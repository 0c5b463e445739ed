#!/usr/bin/env python3
"""fuzz_h2bc's seeds (tests/fuzz/corpus/fuzz_h2bc/) and the inputs that
crashed proxy_h2.c (tests/fuzz/repro/fuzz_h2bc/), written from the
operations fuzz_h2bc.c's header describes:

    python3 tests/fuzz/h2bc-seeds.py [CORPUS_DIR [REPRO_DIR]]
"""
import os
import sys

OPS = ["OPEN", "DATA", "RST", "WINDOW", "CLOSE", "bACCEPT", "bABORT", "bCLOSE", "bSTALL",
       "bHEADERS", "bDATA", "bRST", "bGOAWAY", "bWINDOW", "bRAW", "TURN", "TIME"]
GET, POST, GRPC, POSTLEN, END, TE = 0, 1, 2, 3, 4, 8   # OPEN's kind
S200, S204, S404, S500, S103, SGRPC, S304, SLEN5 = range(8)  # b HEADERS' v
HEND, TRAILERS = 8, 16
CANCEL, REFUSED = 8, 7


def enc(*ops):
    out = bytearray()
    for op in ops:
        if isinstance(op, bytes):  # an input as the fuzzer wrote it
            out += op
            continue
        out.append(OPS.index(op[0]))
        for a in op[1:]:
            out += a if isinstance(a, bytes) else bytes([a])
    return bytes(out)


def up(settings=1):  # the backend takes the connection, says SETTINGS
    return [("TURN", 0), ("bACCEPT", settings), ("TURN", 1)]


SEEDS = {
    "get_answered": [("OPEN", GET | END)] + up() +
                    [("bHEADERS", 0, 0, S200), ("bDATA", 0, 0, 5, 1), ("TURN", 2)],
    "post_answered": [("OPEN", POST)] + up() + [("DATA", 0, 100, 0), ("TURN", 0),
                      ("DATA", 0, 0, 1), ("TURN", 0), ("bHEADERS", 0, 0, S200 | HEND),
                      ("TURN", 2)],
    "post_len_answered": [("OPEN", POSTLEN | 0x20), ("DATA", 0, 127 + 2, 1)] + up() +
                         [("bHEADERS", 0, 0, SLEN5), ("bDATA", 0, 0, 5, 3), ("TURN", 2)],
    "grpc_trailers": [("OPEN", GRPC | TE), ("DATA", 0, 5, 1)] + up() +
                     [("bHEADERS", 0, 0, SGRPC), ("bDATA", 0, 0, 5, 0),
                      ("bHEADERS", 0, 0, TRAILERS), ("TURN", 2)],
    "reset_get_while_connecting": [("OPEN", GET | END), ("RST", 0, CANCEL)] + up() +
                                  [("bHEADERS", 0, 0, S200 | HEND), ("TURN", 3)],
    "reset_before_settings": [("OPEN", POST), ("TURN", 0), ("bACCEPT", 0), ("RST", 0, 0),
                              ("TURN", 1), ("bRAW", 0, 9, bytes(9)), ("TURN", 1)],
    "reset_mid_body": [("OPEN", POST)] + up() + [("DATA", 0, 200, 0), ("TURN", 0),
                       ("RST", 0, CANCEL), ("TURN", 0), ("bHEADERS", 0, 0, S200),
                       ("TURN", 1)],
    "reset_after_answer": [("OPEN", GET | END)] + up() +
                          [("bHEADERS", 0, 0, S200), ("bDATA", 0, 0, 100, 0), ("TURN", 0),
                           ("RST", 0, CANCEL), ("bDATA", 0, 0, 100, 1), ("TURN", 2)],
    "end_after_answer": [("OPEN", POST)] + up() + [("DATA", 0, 10, 0),
                         ("bHEADERS", 0, 0, S200), ("TURN", 0), ("DATA", 0, 0, 1),
                         ("bDATA", 0, 0, 10, 1), ("TURN", 1)],
    "connect_fails": [("OPEN", GET | END), ("OPEN", POST), ("bABORT", 0), ("TURN", 3),
                      ("DATA", 1, 0, 1), ("TURN", 1)],
    "timeout": [("OPEN", GET | END), ("OPEN", GRPC | TE)] + up() + [("TIME", 60), ("TURN", 1)],
    "grpc_timeout": [("OPEN", GRPC | TE | 0x08)] + up() + [("TIME", 2), ("DATA", 0, 5, 1),
                     ("TURN", 1)],
    "goaway_refused": [("OPEN", GET | END), ("OPEN", POST)] + up() +
                      [("bGOAWAY", 0, 0, 0), ("TURN", 0), ("DATA", 1, 20, 1), ("TURN", 0),
                       ("bACCEPT", 1), ("TURN", 1), ("bHEADERS", 1, 0, S200 | HEND),
                       ("bHEADERS", 0, 0, S404 | HEND), ("TURN", 1)],
    "refused_stream": [("OPEN", POST)] + up() + [("bRST", 0, 0, REFUSED), ("RST", 0, CANCEL),
                      ("TURN", 0), ("bACCEPT", 1), ("TURN", 1)],
    "one_stream_at_a_time": [("OPEN", GET | END), ("OPEN", POST), ("TURN", 0),
                             ("bACCEPT", 2), ("TURN", 0), ("bACCEPT", 1), ("TURN", 1),
                             ("DATA", 1, 5, 1), ("RST", 0, CANCEL), ("TURN", 1)],
    "window_zero": [("OPEN", POST)] + up(3) + [("DATA", 0, 140, 0), ("TURN", 0),
                    ("RST", 0, CANCEL), ("bWINDOW", 0, 0, 4), ("TURN", 1)],
    # gatling's socket to the backend fills: its frames wait in wb
    "stalled_backend": [("OPEN", POST), ("TURN", 0), ("bACCEPT", 1), ("bSTALL", 0),
                        ("TURN", 0)] + [("bWINDOW", 0, 0xff, 255), ("bWINDOW", 0, 0, 255)] * 6 +
                       [("DATA", 0, 255, 0), ("TURN", 0)] * 20 +
                       [("OPEN", GET | END), ("RST", 1, CANCEL), ("TURN", 1),
                        ("RST", 0, CANCEL), ("bSTALL", 0), ("TURN", 2)],
    "slow_client": [("OPEN", GET | END)] + up() + [("bHEADERS", 0, 0, S200)] +
                   [("bDATA", 0, 0, 255, 0), ("TURN", 0)] * 8 +
                   [("WINDOW", 0x80, 255), ("WINDOW", 0, 255), ("TURN", 1)] * 4 +
                   [("bDATA", 0, 0, 255, 0), ("RST", 0, CANCEL), ("TURN", 1)],
    "idle_close": [("OPEN", GET | END)] + up() + [("bHEADERS", 0, 0, S204 | HEND),
                   ("TURN", 0), ("TIME", 80), ("TURN", 1), ("OPEN", POST), ("TURN", 0),
                   ("bACCEPT", 1), ("TURN", 0), ("RST", 1, CANCEL), ("TURN", 1)],
    "client_goaway": [("OPEN", POST), ("CLOSE", 1, 0)] + up() + [("DATA", 0, 5, 1),
                      ("bHEADERS", 0, 0, S200 | HEND), ("TURN", 1)],
    "early_hints": [("OPEN", GET | END)] + up() + [("bHEADERS", 0, 0, S103),
                    ("RST", 0, CANCEL), ("bHEADERS", 0, 0, S200 | HEND), ("TURN", 1)],
}

# Inputs that failed on the proxy_h2.c of their day (each once a seed above,
# or found by the fuzzer): make fuzz-repro replays them.
REPRO = {
    # the client resets (or its session goes) while the backend connection is
    # being opened, before the stream's HEADERS went out: nghttp2 still holds
    # the HEADERS item, whose body source is the freed request
    # (heap-use-after-free in h2b_body_read, from nghttp2_session_mem_send)
    "reset_while_connecting": [("OPEN", POST), ("RST", 0, CANCEL)] + up() + [("TURN", 3)],
    "close_while_connecting": [("OPEN", POST), ("OPEN", GET | END), ("CLOSE", 0, 0)] + up(),
    # ... or while gatling's socket to the backend is full (the backend stopped
    # reading): the new stream's HEADERS wait in nghttp2 as while connecting
    "reset_while_backend_full": [("OPEN", POST), ("TURN", 0), ("bACCEPT", 1), ("bSTALL", 0),
                                 ("TURN", 0), ("bWINDOW", 0, 0xff, 255),
                                 ("bWINDOW", 0, 0, 255)] + [("DATA", 0, 255, 0)] * 2 +
                                [("TURN", 0), ("OPEN", POST), ("TURN", 0), ("RST", 1, CANCEL),
                                 ("TURN", 0), ("bSTALL", 0), ("TURN", 3)],
    # ... as libFuzzer found it from an empty corpus in under a second: 22 02 02
    # (OPEN gRPC, RST_STREAM; the backend accepted at the end, by finish())
    "fuzzer_grpc_reset": [b"\x22\x02\x02"],
    # ... or gatling's codec resets it (1024 bytes for a content-length of 512)
    "length_mismatch_while_connecting": [("OPEN", POSTLEN | 0x10), ("DATA", 0, 127 + 2, 1)] +
                                        up() + [("TURN", 1)],
    # a request body ended by an empty DATA frame (END_STREAM, no byte):
    # px_out of 0 bytes with no buffer yet failed, "out of memory" (a 502)
    "empty_end_while_connecting": [("OPEN", POST), ("DATA", 0, 0, 1)] + up() + [("TURN", 3)],
    "empty_end_connected": [("OPEN", POST)] + up() + [("DATA", 0, 0, 1), ("TURN", 1),
                            ("bHEADERS", 0, 0, S204 | HEND), ("TURN", 1)],
    # gatling's write to a backend that reset the connection failed outside
    # the connection's own event (a client's DATA): the connection was marked
    # and its interest cleared, so nothing ever closed it; the request waited
    # for -Q (a 504) and the connection stayed for good
    "backend_resets_mid_body": [("OPEN", POST)] + up() + [("DATA", 0, 100, 0), ("TURN", 0),
                                ("bABORT", 0), ("DATA", 0, 10, 1), ("TURN", 2)],
}

if __name__ == "__main__":
    dirs = sys.argv[1:] + ["tests/fuzz/corpus/fuzz_h2bc",
                           "tests/fuzz/repro/fuzz_h2bc"][len(sys.argv) - 1:]
    for d, seeds in zip(dirs, (SEEDS, REPRO)):
        os.makedirs(d, exist_ok=True)
        for name, ops in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(enc(*ops))
