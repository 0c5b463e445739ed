#!/usr/bin/env python3
"""bench/slashdot's attackers of its own, run as processes by benchkit/slashdot/attacks.py
(standard library only, no import of the package, so that it runs from its path in any
network namespace):

    python3 bench/benchkit/slashdot/attackers.py rate|flood JSON

rate: open-loop requests at a rate over a few keep-alive connections (the bad logins, the
gzip misses); flood: silent connections past the server's cap, reopened as it closes them.
Each ends after its "seconds", or on SIGTERM/SIGINT, and prints one JSON summary line."""
import http.client
import json
import math
import resource
import signal
import socket
import struct
import threading
import os
import sys
import time

# pinned to the client CPU (or the attackers' host) at nice 19 by attacks.attack_argv
PATH = os.path.abspath(__file__)
_stop_flag = threading.Event()


def _attacker_signal(signum, frame):
    _stop_flag.set()


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(q * len(xs))) - 1)]


def rate_attacker(p):
    """Open-loop requests at p["rate"]/s over at most p["conns"] keep-alive connections: a tick
    that finds every connection busy is counted as missed (the server is slower than the rate),
    not queued."""
    import queue
    tickets = queue.Queue()
    lock = threading.Lock()
    st = {"scheduled": 0, "sent": 0, "missed": 0, "status": {}, "gzip": 0, "not_gzip": 0,
          "body_bytes": 0, "errors": {}, "lat_ms": []}
    paths, nxt, busy = p["paths"], [0], [0]

    def worker():
        c = None
        while not _stop_flag.is_set():
            try:
                tickets.get(timeout=0.2)
            except queue.Empty:
                continue
            with lock:
                path = paths[nxt[0] % len(paths)]
                nxt[0] += 1
                st["sent"] += 1
                busy[0] += 1
            t0 = time.monotonic()
            try:
                if c is None:
                    c = http.client.HTTPConnection(p["host"], p["port"], timeout=10)
                c.request("GET", path, headers=p["headers"])
                r = c.getresponse()
                body = r.read()
                ms = 1e3 * (time.monotonic() - t0)
                with lock:
                    k = str(r.status)
                    st["status"][k] = st["status"].get(k, 0) + 1
                    st["body_bytes"] += len(body)
                    st["lat_ms"].append(ms)
                    if p.get("want_gzip"):
                        st["gzip" if r.getheader("Content-Encoding") == "gzip"
                           else "not_gzip"] += 1
                if r.will_close:
                    c.close()
                    c = None
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    k = type(e).__name__
                    st["errors"][k] = st["errors"].get(k, 0) + 1
                if c is not None:
                    c.close()
                c = None
            with lock:
                busy[0] -= 1
        if c is not None:
            c.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(p["conns"])]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    end, step, n = t0 + p["seconds"], 1.0 / p["rate"], 0
    while not _stop_flag.is_set():
        now = time.monotonic()
        if now >= end:
            break
        due = t0 + n * step
        if now < due:
            time.sleep(min(due - now, 0.05))
            continue
        n += 1
        st["scheduled"] += 1
        with lock:
            full = tickets.qsize() + busy[0] >= p["conns"]
        if full:
            st["missed"] += 1
        else:
            tickets.put(1)
    wall = time.monotonic() - t0
    _stop_flag.set()
    deadline = time.monotonic() + 3  # the driver waits 8 s for the summary: do not wait longer
    for t in threads:                # for requests in flight (they are counted as unfinished)
        t.join(max(0.0, deadline - time.monotonic()))
    with lock:
        lat = st.pop("lat_ms")[:]
        st["unfinished"] = busy[0]
    st.update(seconds=round(wall, 2), answered=len(lat),
              answered_per_s=round(len(lat) / wall, 1) if wall else None,
              lat_ms={"p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "max": max(lat or [0])})
    return st


def flood_attacker(p):
    """Hold p["conns"] silent connections from p["sources"] (round robin); reopen each one the
    server closes; at most p["rate"] connects/s.  Counts what the server answered (503 and
    Retry-After), closes without an answer, resets, refused connects and connect timeouts."""
    import errno
    import selectors
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sel = selectors.DefaultSelector()
    st = {"attempts": 0, "connected": 0, "refused": 0, "connect_error": 0, "ctimeout": 0,
          "closed_silent": 0, "reset": 0, "status": {}, "retry_after": 0, "peak_open": 0}
    conns = {}  # fd -> [sock, t_start, connected, answered]
    t0 = time.monotonic()
    end, rate, tokens, last, src, sweep = t0 + p["seconds"], p["rate"], 0.0, t0, 0, t0

    def close(fd):
        c = conns.pop(fd)
        sel.unregister(c[0])
        c[0].close()

    while not _stop_flag.is_set():
        now = time.monotonic()
        if now >= end:
            break
        tokens = min(tokens + (now - last) * rate, max(1.0, rate * 0.05))
        last = now
        while len(conns) < p["conns"] and tokens >= 1:
            tokens -= 1
            s = socket.socket()
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            try:
                s.setsockopt(socket.IPPROTO_IP, 24, 1)  # IP_BIND_ADDRESS_NO_PORT
            except OSError:
                pass
            try:
                s.bind((p["sources"][src % len(p["sources"])], 0))
                src += 1
                e = s.connect_ex((p["host"], p["port"]))
            except OSError as ex:
                e = ex.errno
            st["attempts"] += 1
            if e not in (0, errno.EINPROGRESS):
                st["refused" if e == errno.ECONNREFUSED else "connect_error"] += 1
                s.close()
                continue
            conns[s.fileno()] = c = [s, now, False, False]
            sel.register(s, selectors.EVENT_WRITE, c)
        for key, _ in sel.select(0.02):
            c = key.data
            s = c[0]
            fd = s.fileno()
            if not c[2]:
                e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if e:
                    st["refused" if e == errno.ECONNREFUSED else "connect_error"] += 1
                    close(fd)
                    continue
                c[2] = True
                st["connected"] += 1
                sel.modify(s, selectors.EVENT_READ, c)
                continue
            try:
                data = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                st["reset"] += 1
                close(fd)
                continue
            if data:
                if not c[3] and data.startswith(b"HTTP/1."):
                    c[3] = True
                    code = data[9:12].decode(errors="replace")
                    st["status"][code] = st["status"].get(code, 0) + 1
                    if b"\r\nretry-after:" in data.lower():
                        st["retry_after"] += 1
                continue
            if not c[3]:
                st["closed_silent"] += 1
            close(fd)
        if now - sweep > 0.25:
            sweep = now
            for fd in [fd for fd, c in conns.items() if not c[2] and now - c[1] > 5.0]:
                st["ctimeout"] += 1
                close(fd)
            st["peak_open"] = max(st["peak_open"], sum(1 for c in conns.values() if c[2]))
    st["open_at_end"] = sum(1 for c in conns.values() if c[2])
    st["connecting_at_end"] = len(conns) - st["open_at_end"]
    st["seconds"] = round(time.monotonic() - t0, 2)
    for fd in list(conns):
        close(fd)
    return st


def attacker_main(kind, params):
    signal.signal(signal.SIGTERM, _attacker_signal)
    signal.signal(signal.SIGINT, _attacker_signal)
    fn = {"rate": rate_attacker, "flood": flood_attacker}[kind]
    print(json.dumps(fn(json.loads(params))), flush=True)
    return 0


def main(args):
    if len(args) != 2 or args[0] not in ("rate", "flood"):
        sys.stderr.write("usage: attackers.py rate|flood JSON\n")
        return 2
    return attacker_main(args[0], args[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
