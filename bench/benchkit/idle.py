"""Idle connections held against a server, for the drivers' memory-per-connection rows.

A driver measures them one way: the server's memory (Server.memory()) before, helper
processes that each open and hold a share of the connections, one JSON line from each
once they are held, the server's memory again after the last allocations settled, and
the helpers stopped.  Holders does all of that but the figures, which are the driver's
own (its results.json records); the helpers are this module, run by Holders as

    cd bench && python3 -m benchkit.idle KIND PORT COUNT

pinned to the client CPU, KIND one of
    http  COUNT plain TCP connections (RST on close: no TIME_WAIT pile-up across rounds),
          then per line on stdin: `seq` (a GET of the 1 KiB file on each in turn, each
          answered before the next) or `burst` (one on every connection at once, then
          every response read), a JSON line each (compare-servers)
    ftp   COUNT anonymous sessions logged in (greeting, USER, PASS, TYPE I), at most 16 in
          the login at once, as bench: fewer than vsftpd's listen backlog of 32, since a
          connection its full queue dropped would wait for its greeting forever (compare-ftp)
    h2    COUNT TLS 1.3 connections with ALPN h2, preface and SETTINGS exchanged both ways,
          at most 100 not yet idle at once (compare-h2)
Each prints {"idle"|"opened": held, "failed": n, "error": first error} and holds the
connections until its stdin closes (http: until a line that is not seq or burst).
"""
import json
import os
import re
import resource
import selectors
import socket
import ssl
import struct
import subprocess
import sys
import time

from benchkit import benchlib as bl
from benchkit.servers import HOST, SMALL

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def argv(kind, port, count):
    """The command line of one helper holding count connections of kind to port."""
    return bl.pinned(bl.CLIENT_CPU, [sys.executable, "-m", "benchkit.idle", kind, str(port),
                                     str(count)])


class Holders:
    """`with Holders(server, kind, count, cmd_log) as h:` the server's memory before in
    h.base (and its sockets in h.base_sockets with sockets=True), count connections held
    by ceil(count / per_proc) helpers (one without per_proc), their first JSON lines in
    h.reports; h.settle() waits for the last allocations and returns the server's memory.
    At the end each helper's stdin is closed (its signal to close its connections), and
    after wait seconds it is stopped.  With cmds (argv lists) and popen (Popen's keywords)
    instead of kind, those are the holders (bench --idle, httpbench), and the driver waits
    for their connections itself (h.procs; h.reports stays empty)."""

    def __init__(self, server, kind=None, count=0, cmd_log=None, per_proc=None, sockets=False,
                 wait=0.0, cmds=None, popen=None):
        self.server, self.kind, self.count, self.cmd_log = server, kind, count, cmd_log
        self.per_proc, self.want_sockets, self.wait = per_proc or count or 1, sockets, wait
        self.cmds, self.popen = cmds, popen
        self.procs, self.reports, self.base, self.base_sockets = [], [], None, None

    def __enter__(self):
        self.base = self.server.memory()
        if self.want_sockets:
            self.base_sockets = self.server.sockets()
        procs = -(-self.count // self.per_proc) or 1
        shares = [self.count // procs + (i < self.count % procs) for i in range(procs)]
        cmds = self.cmds or [argv(self.kind, self.server.port, n) for n in shares]
        popen = self.popen if self.cmds else dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                  text=True, cwd=BENCH_DIR)
        try:
            for cmd in cmds:
                if self.cmd_log is not None:
                    self.cmd_log.append(" ".join(cmd))
                self.procs.append(bl.spawn(cmd, **popen))
            if not self.cmds:
                self.reports = [json.loads(p.stdout.readline() or "{}") for p in self.procs]
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def total(self, key):
        return sum(r.get(key, 0) for r in self.reports)

    def first(self, key, default=""):
        """The first report's non-empty key (the first error, the cipher)."""
        return next((r[key] for r in self.reports if r.get(key)), default)

    def command(self, line):
        """Send line to the (first) helper and return its JSON answer ({} if none)."""
        p = self.procs[0]
        p.stdin.write(line + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline() or "{}")

    def settle(self, secs=1.0):
        """The server's memory once the last connections' allocations settled."""
        time.sleep(secs)
        return self.server.memory()

    def close(self):
        for p in self.procs:
            try:
                if p.stdin:
                    p.stdin.close()
            except OSError:
                pass
        for p in self.procs:
            if self.wait:
                try:
                    p.wait(self.wait)
                except subprocess.TimeoutExpired:
                    pass
            bl.stop_session(p)
        self.procs = []


# ---------------------------------------------------------------------------------------------
# The helpers

def _raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _linger0(s):
    """Close with RST later: no TIME_WAIT pile-up across rounds."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _read_response(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ValueError("connection closed before the response")
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 200"):
        raise ValueError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    need = int(m.group(1)) if m else SMALL[1]
    while len(body) < need:
        chunk = s.recv(65536)
        if not chunk:
            raise ValueError("connection closed mid-body")
        body += chunk


def _requests(socks, req, burst):
    """One request on every connection (seq: each answered before the next): the JSON line."""
    bad, first_err, live = 0, "", []
    for i, s in enumerate(socks):
        if bad >= 20:  # the server is not answering: do not wait 3 s on each of thousands
            bad += len(socks) - i
            break
        try:
            s.sendall(req)
            if burst:
                live.append(s)
            else:
                _read_response(s)
        except (OSError, ValueError) as e:
            bad += 1
            first_err = first_err or str(e)
    for s in live:
        if bad >= 20:
            bad += 1
            continue
        try:
            _read_response(s)
        except (OSError, ValueError) as e:
            bad += 1
            first_err = first_err or str(e)
    return {"answered": len(socks) - bad, "failed": bad, "error": first_err}


def http_client(port, count):
    count = min(count, _raise_nofile() - 64)
    socks, failed, first_err = [], 0, ""
    deadline = time.monotonic() + 120
    while len(socks) < count and failed < 20 and time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect((HOST, port))
            _linger0(s)
            socks.append(s)
        except OSError as e:
            failed += 1
            first_err = first_err or str(e)
            s.close()
    print(json.dumps({"opened": len(socks), "failed": failed, "error": first_err}), flush=True)
    req = f"GET /{SMALL[0]} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    for cmd in sys.stdin:
        cmd = cmd.strip()
        if cmd not in ("seq", "burst"):
            break
        print(json.dumps(_requests(socks, req, cmd == "burst")), flush=True)
    for s in socks:
        s.close()


FTP_LOGIN = [b"USER anonymous\r\n", b"PASS compare-ftp@\r\n", b"TYPE I\r\n", None]
FTP_FINAL = re.compile(rb"(?:^|\n)([1-5]\d\d) [^\n]*\n$")


class FtpSession:
    """A control connection walking through the login: greeting, USER, PASS, TYPE I."""
    events = selectors.EVENT_READ

    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.sock.setblocking(False)
        self.fd, self.buf, self.step = self.sock.fileno(), b"", -1

    def advance(self):
        """Read a reply; True when logged in.  Raises OSError on a refusal or a close."""
        data = self.sock.recv(4096)
        if not data:
            raise OSError("closed by the server during the login")
        self.buf += data
        m = FTP_FINAL.search(self.buf)
        if not m:
            return False
        code, self.buf = int(m.group(1)), b""
        if code < 200:  # 120: wait for the real greeting
            return False
        if code >= 400:
            raise OSError(f"reply {code} to "
                          f"{'the greeting' if self.step < 0 else FTP_LOGIN[self.step]}")
        if code == 230 and self.step == 0:  # no password wanted
            self.step += 1
        self.step += 1
        if FTP_LOGIN[self.step] is None:
            return True
        self.sock.sendall(FTP_LOGIN[self.step])
        return False

    def close(self):
        self.sock.close()


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, ACK = 4, 1


def h2_frame(ftype, flags, payload=b"", stream=0):
    return struct.pack(">I", len(payload))[1:] + bytes((ftype, flags)) + \
        struct.pack(">I", stream) + payload


class H2Conn:
    """One h2 connection: connect, TLS handshake (ALPN h2), preface + SETTINGS, until the
    server's SETTINGS and its ACK of ours have arrived; then it idles."""
    events = selectors.EVENT_WRITE
    ctx = None

    def __init__(self, port):
        if H2Conn.ctx is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
            ctx.set_alpn_protocols(["h2"])
            H2Conn.ctx = ctx
        sock = socket.socket()
        sock.setblocking(False)
        _linger0(sock)
        sock.connect_ex((HOST, port))
        # wrap_socket() moves the descriptor to a new object: the selector knows it by number
        self.sock, self.fd, self.tls, self.buf = sock, sock.fileno(), None, b""
        self.got_settings = self.got_ack = False
        self.advance = self.connected

    def connected(self):
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise OSError(err, os.strerror(err))
        self.tls = self.ctx.wrap_socket(self.sock, do_handshake_on_connect=False)
        self.advance = self.handshake
        return self.handshake()

    def handshake(self):
        self.tls.do_handshake()  # SSLWant{Read,Write}Error: the caller waits and calls again
        if self.tls.selected_alpn_protocol() != "h2":
            raise OSError(f"ALPN chose {self.tls.selected_alpn_protocol()!r}, not h2")
        self.tls.sendall(H2_PREFACE + h2_frame(SETTINGS, 0))
        self.advance = self.settings
        return self.settings()

    def settings(self):
        while True:
            data = self.tls.recv(16384)
            if not data:
                raise OSError("the server closed the connection")
            self.buf += data
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                ftype, flags = self.buf[3], self.buf[4]
                self.buf = self.buf[9 + n:]
                if ftype == SETTINGS and flags & ACK:
                    self.got_ack = True
                elif ftype == SETTINGS:
                    self.got_settings = True
                    self.tls.sendall(h2_frame(SETTINGS, ACK))
            if self.got_settings and self.got_ack:
                return True

    def cipher(self):
        return self.tls.cipher()[0]

    def close(self):
        (self.tls or self.sock).close()


def hold(conn, port, count, inflight):
    """Open count connections (conn(port): FtpSession, H2Conn), at most inflight not yet
    idle at a time, each advanced as its socket is ready until it says it is idle: (idle
    connections, failed, first error)."""
    _raise_nofile()
    sel, idle, failed, first_err, started = selectors.DefaultSelector(), [], 0, "", 0
    deadline = time.monotonic() + 120
    while (started < count or sel.get_map()) and failed < 50 and time.monotonic() < deadline:
        while started < count and len(sel.get_map()) < inflight:
            c = conn(port)
            sel.register(c.fd, c.events, c)
            started += 1
        for key, _ in sel.select(1.0):
            c = key.data
            try:
                done = c.advance()
            except ssl.SSLWantReadError:
                sel.modify(c.fd, selectors.EVENT_READ, c)
                continue
            except ssl.SSLWantWriteError:
                sel.modify(c.fd, selectors.EVENT_WRITE, c)
                continue
            except BlockingIOError:
                continue
            except (OSError, ValueError) as e:
                failed += 1
                first_err = first_err or str(e)
                sel.unregister(c.fd)
                c.close()
                continue
            if done:
                sel.unregister(c.fd)
                idle.append(c)
    return idle, failed + len(sel.get_map()), first_err


def held_client(conn, port, count, inflight, extra=None):
    """hold(), its JSON line (with extra(idle connections)'s keys), then hold them until
    stdin says anything or closes."""
    idle, failed, err = hold(conn, port, count, inflight)
    rep = {"idle": len(idle), "failed": failed, "error": err}
    rep.update(extra(idle) if extra else {})
    print(json.dumps(rep), flush=True)
    sys.stdin.readline()
    for c in idle:
        c.close()


def main(args):
    if len(args) != 3 or args[0] not in ("http", "ftp", "h2"):
        sys.stderr.write("usage: python3 -m benchkit.idle http|ftp|h2 PORT COUNT\n")
        return 2
    kind, port, count = args[0], int(args[1]), int(args[2])
    if kind == "http":
        http_client(port, count)
    elif kind == "ftp":
        held_client(FtpSession, port, count, 16)
    else:
        held_client(H2Conn, port, count, 100,
                    lambda idle: {"cipher": idle[0].cipher() if idle else None})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
