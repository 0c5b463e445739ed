"""HTTP/3 under -W workers and across the binary upgrade (quic/quic_steer.c):
the UDP port is one SO_REUSEPORT group, two banks of a socket per worker,
and a classic BPF program steers each datagram to the socket its
Destination Connection ID names.  With aioquic (test_h3's client): many
connections across -W 2 all succeed and reach both workers; a connection
whose client moves to a new source port (with and without a new connection
ID) keeps going on the same worker, six moves in a row (with the kernel's
4-tuple hash alone each move would land on the other worker half the time);
SIGTERM with a connection open: GOAWAY, the connection closed, exit 0;
SIGUSR2 while clients keep making requests, one connection after another
and on connections that stay open: no request fails (one the draining
process refused, with H3_REQUEST_REJECTED or by closing the connection
before answering, is sent again on a new connection, as RFC 9114 allows),
the new connections are served by the new process, a download begun before
goes on with the old process and arrives whole, and the old one drains and
exits 0; a second SIGUSR2 is refused while the first old process drains (two
banks, both in use) and once it has exited takes its bank again.  The
upgrades run on the first backend and the sanitizer build
(to the others the sockets are the same descriptors on another loop)."""
import asyncio
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import (Mode, client_tls_context, end_upgrades, gone, https_port,
                      make_docroot, skip_without_h3, start_server, wait_for)
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
from test_h3 import HAVE_AIOQUIC, OTHER_BACKENDS, _H3, h3_server, needs_aioquic

if HAVE_AIOQUIC:
    from aioquic.asyncio import connect
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ConnectionTerminated, StreamReset

TREE = {"f.txt": b"hello\n"}
BIG = os.urandom(24 << 20)
BIG_SHA = hashlib.sha256(BIG).hexdigest()
UPGRADES = ("test_upgrade_under_h3_load", "test_second_upgrade_waits_for_the_first")


@pytest.fixture(autouse=True)
def h3_built(request, build):
    skip_without_h3(build.binary)
    if build.name in OTHER_BACKENDS and request.node.originalname in UPGRADES:
        pytest.skip("the upgrade under load runs on the first backend and the sanitizer build")


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return {int(x) for x in f.read().split()}
    except OSError:
        return set()


def metrics(port):
    """The plain-HTTP port's /metrics: {name: value} of the lines without labels."""
    out = subprocess.run(["curl", "-sS", "http://127.0.0.1:%d/metrics" % port],
                         capture_output=True, text=True, timeout=20).stdout
    return {ln.split()[0]: float(ln.split()[1]) for ln in out.splitlines()
            if ln and not ln.startswith("#") and "{" not in ln}


class Refused(Exception):
    """The server did not take the request (it may be sent again)."""


class Client(_H3):
    """test_h3's client, whose pending requests fail (Refused) when their
    stream is reset or the connection ends, instead of waiting."""

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            for st in self.streams.values():
                if not st["done"].done():
                    st["done"].set_exception(Refused("connection closed (%#x)" % event.error_code))
        elif isinstance(event, StreamReset):
            st = self.streams.get(event.stream_id)
            if st and not st["done"].done():
                st["done"].set_exception(Refused("stream reset (%#x)" % event.error_code))
        super().quic_event_received(event)


def config():
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost",
                            max_datagram_frame_size=None)
    cfg.load_verify_locations(os.path.join(pki_dir(), "ca.pem"))
    return cfg


async def opened(port):
    """A connection: (its exit stack, the protocol)."""
    stack = contextlib.AsyncExitStack()
    c = await asyncio.wait_for(stack.enter_async_context(
        connect("127.0.0.1", port, configuration=config(), create_protocol=Client)), 10)
    return stack, c


async def pid_of(c):
    """The pid of the process that answers on c (/server-status?json)."""
    status, _, body = await asyncio.wait_for(c.request("/server-status?json"), 10)
    assert status == 200, (status, body[:200])
    return json.loads(body)["pid"]


async def rebind(c, new_cid):
    """The client moves to a new UDP socket (a new source port), as a NAT
    rebinding would; with new_cid it also takes a new connection ID."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", 0, 0, 0))
    old = c._transport
    if new_cid:
        c.change_connection_id()
    await loop.create_datagram_endpoint(lambda: c, sock=sock)
    old.close()
    return sock.getsockname()[1]


@needs_aioquic
@pytest.mark.parametrize("retry", ["busy", "always"])
def test_many_connections_across_workers(gatling, retry):
    """-W 2: 40 connections, 10 at a time (busy: 20), each with two requests,
    all answered; both workers serve some; Alt-Svc over HTTPS names the UDP
    port.  Most of them get a Retry (more than 8 a second from one address; or
    every one): its connection ID names the worker that made it, whose secret
    alone checks the token the client's next Initial brings back.  busy, 20 at
    once: one of the two workers has 10 or more of them in the same moment,
    past the 8 a second it allows (10 at once, split between the workers,
    stayed under it when a loaded machine spread the batches over seconds)."""
    srv, port = h3_server(gatling, TREE, ("-W", "2", "--h3-retry", retry))

    async def one():
        stack, c = await opened(port)
        try:
            status, _, body = await asyncio.wait_for(c.request("/f.txt"), 10)
            assert (status, body) == (200, b"hello\n")
            return await pid_of(c)
        finally:
            await stack.aclose()

    async def main():
        pids = []
        at_once = 20 if retry == "busy" else 10
        for _ in range(40 // at_once):
            pids += await asyncio.gather(*(one() for _ in range(at_once)))
        return pids
    pids = asyncio.run(asyncio.wait_for(main(), 120))
    assert len(pids) == 40
    workers = children(srv.pid)
    assert set(pids) <= workers and len(set(pids)) == 2, (pids, workers)
    m = metrics(srv.port)  # summed over the workers
    assert m["gatling_h3_retries_total"] >= (40 if retry == "always" else 1), m  # busy: per worker
    assert m["gatling_h3_bad_tokens_total"] == 0, m
    out = subprocess.run(["curl", "-sS", "-k", "-D", "-", "-o", "/dev/null",
                          "https://127.0.0.1:%d/f.txt" % port], capture_output=True, text=True,
                         timeout=20).stdout
    assert ('alt-svc: h3=":%d"' % port) in out.lower(), out


@needs_aioquic
def test_migration_stays_with_its_worker(gatling):
    """-W 2: the client moves to a new source port six times, every other
    time with a new connection ID too; each time its next request is
    answered by the same worker."""
    srv, port = h3_server(gatling, TREE, ("-W", "2"))

    async def main():
        stack, c = await opened(port)
        try:
            first = await pid_of(c)
            ports = set()
            for k in range(6):
                ports.add(await rebind(c, new_cid=k % 2 == 1))
                status, _, body = await asyncio.wait_for(c.request("/f.txt"), 10)
                assert (status, body) == (200, b"hello\n"), k
                assert await pid_of(c) == first, k
            return first, ports
        finally:
            await stack.aclose()
    first, ports = asyncio.run(asyncio.wait_for(main(), 120))
    assert first in children(srv.pid) and len(ports) == 6, (first, ports)


@needs_aioquic
def test_sigterm_under_workers(gatling):
    """-W 2, SIGTERM with a connection open on a worker: it gets GOAWAY and
    is closed by the server (the client learns it), and the supervisor and
    its workers exit 0 within a few seconds (the fixture checks the status)."""
    srv, port = h3_server(gatling, TREE, ("-W", "2"))

    async def main():
        stack, c = await opened(port)
        try:
            assert await pid_of(c) in children(srv.pid)
            t0 = time.monotonic()
            srv.process.send_signal(signal.SIGTERM)
            srv.signaled = True
            await asyncio.wait_for(c.wait_closed(), 12)
            while srv.process.poll() is None and time.monotonic() - t0 < 15:
                await asyncio.sleep(0.05)
            return time.monotonic() - t0
        finally:
            await stack.aclose()
    took = asyncio.run(asyncio.wait_for(main(), 30))
    assert srv.process.poll() == 0 and took < 8, (took, srv.stderr_text())  # 8: a busy machine


class Download(threading.Thread):
    """A large file on a connection of its own, begun now: its pid, status,
    body's sha256, and when it ended."""

    def __init__(self, port, path):
        super().__init__(daemon=True)
        self.port, self.path = port, path
        self.begun = threading.Event()
        self.result, self.end = None, None

    def run(self):
        async def main():
            stack, c = await opened(self.port)
            try:
                pid = await pid_of(c)
                self.begun.set()
                status, _, body = await asyncio.wait_for(c.request(self.path), 60)
                self.end = time.monotonic()
                return pid, status, hashlib.sha256(body).hexdigest()
            finally:
                await stack.aclose()
        try:
            self.result = asyncio.run(main())
        except Exception as e:  # noqa: BLE001 (the test reports it)
            self.result = e


class Load:
    """Clients in a thread: `keep` connections that stay open (a new one when
    the server closes theirs) and `fresh` that open one per request, each
    asking /server-status?json in a loop.  A request that the server refused
    is sent again on a new connection; any other failure counts."""

    def __init__(self, port, keep=3, fresh=2):
        self.port, self.keep, self.fresh = port, keep, fresh
        self.stop = False
        self.done = []      # (time asked, fresh?, pid)
        self.failed = []    # what went wrong
        self.retried = 0
        self.thread = threading.Thread(target=lambda: asyncio.run(self.main()), daemon=True)

    async def ask(self, conn, fresh):
        """One request, on conn (a (stack, protocol) pair, or None: a new one);
        returns the connection to use next."""
        for attempt in range(2):
            t = time.monotonic()
            if conn is None or conn[1]._closed.is_set():
                if conn:
                    await conn[0].aclose()
                conn = await opened(self.port)
            try:
                self.done.append((t, fresh, await pid_of(conn[1])))
                return conn
            except Refused as e:
                if attempt:
                    raise
                self.retried += 1
                await conn[0].aclose()
                conn = None
        return conn

    async def client(self, fresh):
        conn = None
        while not self.stop:
            try:
                conn = await self.ask(conn, fresh)
            except Exception as e:  # noqa: BLE001 (each failure is reported)
                self.failed.append(repr(e))
                conn = None
            if fresh and conn:
                await conn[0].aclose()
                conn = None
            await asyncio.sleep(0.01)
        if conn:
            await conn[0].aclose()

    async def main(self):
        await asyncio.gather(*([self.client(False) for _ in range(self.keep)] +
                               [self.client(True) for _ in range(self.fresh)]))


@needs_aioquic
@pytest.mark.parametrize("workers", [1, 2])
def test_upgrade_under_h3_load(build, tmp_path, workers):
    """SIGUSR2 while HTTP/3 clients keep asking: no request fails, every
    request begun after the new process said it serves is answered by the
    new process's pids, a download begun before goes on with the old process
    and arrives whole after the new one serves (with the kernel's hash its
    datagrams would go to the new process's sockets too), the old process
    exits 0 and the new one stops on SIGTERM.  -e 0: the new process knows the
    HTTPS socket by its name (LISTEN_FDNAMES), not by a port it was told, and
    serves HTTPS and advertises HTTP/3 on the port the first one's kernel chose."""
    root = str(tmp_path / "www")
    make_docroot(root, dict(TREE, **{"big.bin": BIG}))
    srv = start_server(build, root, ("-T", "10", "-S", "-C", os.path.join(pki_dir(), "certs"),
                                     "-e", "0", "-W", str(workers)))
    tls = https_port(srv)
    pids = [srv.pid]
    load = Load(tls)
    try:
        old = {srv.pid} | children(srv.pid)
        load.thread.start()
        wait_for(lambda: len(load.done) > 20 or load.failed, 10, "the load running")
        dl = Download(tls, "/big.bin")
        dl.start()
        assert dl.begun.wait(10), dl.result
        mark = len(srv.errlog)
        os.kill(srv.pid, signal.SIGUSR2)
        pid = wait_for(lambda: next((int(m.group(1)) for l in srv.errlog[mark:]
                                     for m in [re.search(r"pid (\d+) serves", l)] if m), None),
                       15, "the new process serving")
        serving = time.monotonic()
        pids.append(pid)
        # the old process drains until the download it serves is over (24 MiB
        # through aioquic, a Python QUIC stack sharing the GIL with the load's
        # thread: past 15 s on a busy machine, twice in make check's phase 1
        # here), then exits
        dl.join(60)
        wait_for(lambda: gone(srv.pid), 15, "the old process draining and exiting")
        time.sleep(1)
        load.stop = True
        load.thread.join(30)
        assert srv.process.wait(5) == 0, srv.stderr_text()
        assert isinstance(dl.result, tuple), dl.result
        assert dl.result[0] in old and dl.result[1:] == (200, BIG_SHA), dl.result[:2]
        assert dl.end > serving, "the download was over before the new process served"
        assert not load.failed, (load.failed[:5], len(load.done), srv.stderr_text())
        before = [p for t, _, p in load.done if t < serving]
        after = [p for t, fresh, p in load.done if t > serving + 0.1 and fresh]
        assert len(before) > 20 and len(after) >= 3, (len(before), len(after))
        assert set(before) & old, (set(before), old)
        assert not set(after) & old, ("new connections served by the old process",
                                      set(after), old)
        # and HTTPS over TCP, announcing HTTP/3 on that port
        with urllib.request.urlopen("https://localhost:%d/f.txt" % tls, timeout=10,
                                    context=client_tls_context()) as r:
            assert r.status == 200 and r.read() == TREE["f.txt"], r.status
            assert r.headers["Alt-Svc"].startswith('h3=":%d"' % tls), r.headers["Alt-Svc"]
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: gone(pid), 10, "the new process stopping on SIGTERM")
        text = srv.stderr_text()
        assert "AddressSanitizer" not in text and "runtime error" not in text, text
    finally:
        load.stop = True
        end_upgrades(srv, pids)


def serves_line(srv, mark):
    """The pid of "binary upgrade: pid N serves" after errlog[mark:], or None."""
    for line in srv.errlog[mark:]:
        m = re.search(r"pid (\d+) serves", line)
        if m:
            return int(m.group(1))
    return None


@needs_aioquic
def test_second_upgrade_waits_for_the_first(build, tmp_path):
    """-W 2: while the first process still drains (a download keeps it), a
    second SIGUSR2 is refused with a message (the group has two banks, both
    in use); once it has exited, the second upgrade takes the first one's
    bank again and the third process serves new HTTP/3 connections."""
    root = str(tmp_path / "www")
    started, release = tmp_path / "started", tmp_path / "release"
    # the request that keeps the first process draining ends when the test says so (a
    # download could end, on a quiet machine, before the second SIGUSR2)
    slow = ("#!/bin/sh\ntouch %s\nprintf 'Content-Type: text/plain\\r\\n\\r\\nbegun\\n'\n"
            "while [ ! -e %s ]; do sleep 0.05; done\necho done\n" % (started, release))
    make_docroot(root, dict(TREE, **{"slow.sh": Mode(slow.encode(), 0o755)}))
    srv = start_server(build, root, ("-T", "10", "-S", "-C", os.path.join(pki_dir(), "certs"),
                                     "-e", "0", "-W", "2", "-w", r"\.sh$"))
    tls = https_port(srv)
    pids = [srv.pid]

    async def pids_of_new(n):
        out = []
        for _ in range(n):
            stack, c = await opened(tls)
            try:
                out.append(await pid_of(c))
            finally:
                await stack.aclose()
        return out
    try:
        dl = Download(tls, "/slow.sh")
        dl.start()
        wait_for(lambda: started.exists() or dl.result, 10, "the slow answer begun")
        mark = len(srv.errlog)
        os.kill(srv.pid, signal.SIGUSR2)
        second = wait_for(lambda: serves_line(srv, mark), 15, "the second process serving")
        pids.append(second)
        mark = len(srv.errlog)
        os.kill(second, signal.SIGUSR2)
        wait_for(lambda: any("pid %d) still runs" % srv.pid in l for l in srv.errlog[mark:]), 15,
                 "the refusal while the first one drains")
        assert not gone(srv.pid) and dl.result is None, dl.result
        release.touch()
        dl.join(60)
        want = (200, hashlib.sha256(b"begun\ndone\n").hexdigest())
        assert isinstance(dl.result, tuple) and dl.result[1:] == want, dl.result
        wait_for(lambda: gone(srv.pid), 15, "the first process exiting")
        assert srv.process.wait(5) == 0, srv.stderr_text()
        mark = len(srv.errlog)
        os.kill(second, signal.SIGUSR2)
        third = wait_for(lambda: serves_line(srv, mark), 15, "the third process serving")
        pids.append(third)
        wait_for(lambda: gone(second), 15, "the second process exiting")
        try:
            got = asyncio.run(asyncio.wait_for(pids_of_new(6), 60))
        except Exception as e:
            raise AssertionError("new connections to the third process: %r\n%s"
                                 % (e, srv.stderr_text())) from e
        assert set(got) <= children(third), (got, children(third))
        os.kill(third, signal.SIGTERM)
        wait_for(lambda: gone(third), 10, "the third process stopping on SIGTERM")
    finally:
        end_upgrades(srv, pids)


def test_bench_h3_across_reloads(build, tmp_path):
    """bench --h3 (10 connections x 4 streams, -R 0) across three gatling
    --reload: the old process's GOAWAY in two steps (RFC 9114 5.2: the
    largest id first, the last stream a second later) answers every request
    on its way, none is rejected (bench's retried) or lost.  With one GOAWAY
    with the last stream, one reload in three lost 20 and had them rejected.
    (-d 8: make check's loaded machine took more than -d 4's seconds for the
    first 2,000 requests and the reload, and the test was inconclusive.)"""
    from test_h2 import reload_under_load
    bench = os.path.join(build.dir, "bench")
    if not os.access(bench, os.X_OK):
        pytest.skip("no bench built")
    root = str(tmp_path / "www")
    make_docroot(root, TREE)
    srv = start_server(build, root, ("-T", "10", "-n", "-S", "-R", "0", "-C",
                                     os.path.join(pki_dir(), "certs"), "-e", "0"))
    tls = https_port(srv)
    pids = [srv.pid]
    got = []
    try:
        for _ in range(3):
            load = subprocess.Popen([bench, "-q", "--h3", "--insecure", "-c", "10", "--streams",
                                     "4", "-d", "12", "-J", "https://127.0.0.1:%d/f.txt" % tls],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = reload_under_load(srv, build, pids, load, "bench")
            res = json.loads(out)
            got.append({k: res[k] for k in ("requests", "responses", "retried", "lost",
                                            "errors_total")})
            wait_for(lambda: gone(pids[-2]), 20, "the old process draining and exiting")
        assert all(g["retried"] == g["lost"] == g["errors_total"] == 0 and
                   g["requests"] == g["responses"] > 1000 for g in got), got
    finally:
        end_upgrades(srv, pids)
