"""grpcpeers: compare-grpc's backends, run as their own processes by Debian's
/usr/bin/python3 (python3-grpcio, python3-hypercorn), never imported by a driver:

  python3 -m benchkit.grpcpeers grpc PORT [WORKERS]
      a gRPC server (grpcio's, a thread pool of WORKERS, default 16) with raw-bytes
      methods and no stubs to generate (as tests/integration/grpc/grpc_backend.py):
      bench.Echo/Unary gives the request back; bench.Echo/Stream takes b"N:SIZE" and
      gives N messages of SIZE bytes; bench.Echo/Count gives the calls served so far
      (unary and streams) as ASCII.
  python3 -m benchkit.grpcpeers h2c PORT HOLD
      a plain HTTP/2 backend (hypercorn, asyncio, h2c by prior knowledge): every GET
      is held HOLD seconds, then answered 200 with 2 bytes; GET /stats answers at
      once with {"inflight", "peak", "served"} as JSON, and /reset zeroes the peak.

Each prints "ready" once it listens.  Standard library, grpcio and hypercorn only.
"""
import json
import sys
import threading


def grpc_main(port, workers):
    from concurrent import futures

    import grpc

    served = [0]
    lock = threading.Lock()

    def count():
        with lock:
            served[0] += 1

    def unary(req, ctx):
        count()
        return req

    def stream(req, ctx):
        count()
        n, size = (int(x) for x in req.split(b":"))
        msg = b"m" * size
        for _ in range(n):
            yield msg

    def calls(req, ctx):
        with lock:
            return str(served[0]).encode()

    h = grpc.method_handlers_generic_handler("bench.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
        "Count": grpc.unary_unary_rpc_method_handler(calls)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((h,))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def h2c_main(port, hold):
    import asyncio

    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    st = {"inflight": 0, "peak": 0, "served": 0}

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                m = await receive()
                if m["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif m["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b"ok"
        if scope["path"] == "/stats":
            body = json.dumps(st).encode()
        elif scope["path"] == "/reset":
            st["peak"] = st["inflight"]
        else:
            st["inflight"] += 1
            st["peak"] = max(st["peak"], st["inflight"])
            try:
                await asyncio.sleep(hold)
            finally:
                st["inflight"] -= 1
            st["served"] += 1
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    cfg = Config()
    cfg.bind = ["127.0.0.1:%d" % port]
    cfg.backlog = 4096
    cfg.keep_alive_timeout = 600
    cfg.errorlog = None
    cfg.accesslog = None

    async def run():
        task = asyncio.ensure_future(serve(app, cfg))
        while True:  # ready once it accepts
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        print("ready", flush=True)
        await task

    asyncio.run(run())


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "grpc":
        grpc_main(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 16)
    elif len(sys.argv) == 4 and sys.argv[1] == "h2c":
        h2c_main(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit(__doc__)
