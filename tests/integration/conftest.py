"""Shared harness for gatling's integration tests.

Every server test runs once per build: GATLING_BUILDS names directories under
build/ (e.g. "epoll poll epoll-san"); without it, every build/*/ holding a
gatling binary is used.  GATLING_BUILD_DIR replaces build/ (handy for testing
a snapshot of the builds while make rewrites build/).  The `build` fixture is parametrized over them, so
the test ids carry the build name, e.g. test_get[epoll].

Pieces:
  Build            one build directory: binary, backend name, unit tests
  make_docroot()   create a tree of files, directories, symlinks, modes
  Server           a running gatling: port, pid, process, docroot, log
  start_server()   start one and wait for its "listening on" line
  Client, Response raw HTTP over a socket, pipelining, hang detection
  `server`-style fixtures check at teardown: SIGTERM -> exit 0 within 5 s,
  nothing alarming on stderr, and no descriptors leaked.
"""
import contextlib
import functools
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("GATLING_BUILD_DIR") or os.path.join(ROOT, "build")

LISTEN_RE = re.compile(r"listening on (\S+) port (\d+)")

# GATLING_SCHEME=https runs the HTTP tests over TLS: every server gets a
# certificate from a throwaway CA (dist/mkcert.sh) and an HTTPS port, srv.port
# is the HTTPS port (srv.plain_port the HTTP one), and Client speaks TLS.
# GATLING_SCHEME=h2 runs them over HTTP/2: the servers as for https, curl
# asks for h2 (ALPN), and Client is H2Client, which turns each HTTP/1.1
# request a test sends into a stream on one HTTP/2 connection (Python's h2).
# GATLING_SCHEME=h3 runs them over HTTP/3: the servers as for https (HTTP/3
# is served on UDP at the HTTPS port's number), and Client is H3Client, the
# same idea over one QUIC connection (aioquic).
SCHEME = os.environ.get("GATLING_SCHEME", "http")
TLS = SCHEME in ("https", "h2", "h3")
H2 = SCHEME == "h2"
H3 = SCHEME == "h3"
MUX = H2 or H3  # each request a stream of one connection
# what a response's status line says, and the access log's request line
HTTP_VERSION = {"h2": "HTTP/2", "h3": "HTTP/3"}.get(SCHEME, "HTTP/1.1")
LOG_VERSION = {"h2": "HTTP/2.0", "h3": "HTTP/3.0"}.get(SCHEME, "HTTP/1.1")
_pki = []


def test_pki():
    """The directory of the throwaway CA (ca.pem) and certs/server.pem."""
    if not _pki:
        import tempfile
        d = tempfile.mkdtemp(prefix="gatling-pki-")
        subprocess.run(["sh", os.path.join(ROOT, "dist", "mkcert.sh"), d], check=True,
                       capture_output=True, timeout=60)
        _pki.append(d)
    return _pki[0]


# Tests whose subject is plain TCP behaviour that TLS changes by design: a 503
# written before any handshake (HTTPS refusals just close), half-closes,
# byte-level timing of raw sockets, other tools that speak plain HTTP.  What
# the caps and rates (-N, -K, -A, -B) do on the HTTPS port is tested in
# test_tls.py instead.  They are left out of the h2 and h3 passes too (TLS).
http_only = pytest.mark.skipif(TLS, reason="plain HTTP by design (see conftest)")

# The backends after the first (the first is epoll on Linux): a module whose
# tests are about what sits above io/ (a codec's rules and defences, the
# cache) runs those on the first backend and its sanitizer build only, and
# keeps on every backend the tests that lean on the loop (deadlines, wakeups,
# writes that block); see first_backend_only.
OTHER_BACKENDS = ("uring", "sigio", "poll", "kqueue")


def first_backend_only(request, names, why):
    """Skip the test request names when it runs on one of OTHER_BACKENDS and
    its name (without parameters) is in names."""
    b = request.node.callspec.params.get("build") if hasattr(request.node, "callspec") else None
    if b in OTHER_BACKENDS and request.node.originalname in names:
        pytest.skip(why)


# Tests whose requests or assertions cannot be said in HTTP/2: the HTTP/1.1
# parser and framing (bad request lines, chunked bodies, HTTP/1.0, 100-continue),
# connection management (Connection: close, keep-alive counts, half-closes,
# pipelining limits), byte-level timing of a request, tools that speak only
# HTTP/1.1 (ab, wrk).  Mark them explicitly, with the reason; H2Client fails
# (NotH2) on a request it cannot turn into a stream, never skips one.  The same
# holds for HTTP/3 (H3Client, NotH3): h1_only skips in the h2 and h3 passes.
def h1_only(reason):
    return pytest.mark.skipif(MUX, reason="HTTP/1.1 only: " + reason)


# Tests that need a client with no HTTP/3 here: Debian 12's curl is built
# without it (curl_version_args() asks for --http3-only in the h3 pass, so an
# unmarked curl test fails there, saying so), and ab, wrk, goaccess's feeds,
# h2load's TCP modes are TCP clients.  Mark them with the reason; where it is
# cheap a test uses Client (H3Client) instead.
def no_h3_client(reason):
    return pytest.mark.skipif(H3, reason="no HTTP/3 client for this: " + reason)


# A test that shows a server bug over HTTP/2 (named in the reason): expected to
# fail in the h2 pass until the server is fixed; not strict, so the fix's own
# change can drop the mark.
def h2_bug(reason):
    return pytest.mark.xfail(H2, reason="server bug over HTTP/2: " + reason, strict=False)


# The same for HTTP/3 (the h3 pass).
def h3_bug(reason):
    return pytest.mark.xfail(H3, reason="server bug over HTTP/3: " + reason, strict=False)


def url(port, path="/"):
    """The URL of path on a test server, in the suite's scheme (curl, ab and
    wrk take it; curl trusts the test CA through CURL_CA_BUNDLE)."""
    if TLS:
        os.environ["CURL_CA_BUNDLE"] = os.path.join(test_pki(), "ca.pem")
    return "%s://127.0.0.1:%d%s" % ("https" if TLS else "http", port, path)


def curl_version_args():
    """curl's arguments for the suite's protocol: --http2 in the h2 pass (curl
    would offer h2 by ALPN anyway; this says so), --http3-only in the h3 pass
    (which Debian 12's curl refuses: a curl test there wants no_h3_client),
    none otherwise."""
    return ["--http2"] if H2 else ["--http3-only"] if H3 else []


def client_tls_context(alpn=None):
    import ssl
    ctx = ssl.create_default_context(cafile=os.path.join(test_pki(), "ca.pem"))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def import_h2():
    """Python's h2 (Debian's python3-h2, pure Python): from the interpreter's
    own packages, else from Debian's /usr/lib/python3/dist-packages (the suite
    may run under another python3 than /usr/bin/python3)."""
    import sys
    try:
        import h2.connection  # noqa: F401
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import h2.connection  # noqa: F401
        except ImportError:
            raise ImportError("GATLING_SCHEME=h2 needs Python's h2 (apt-get install "
                              "python3-h2, or pip install h2; tests/setup.sh does it)")
    import h2
    return h2


# Lines on the server's stderr that always mean a bug.
ALARMING = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
            "Segmentation fault", "AddressSanitizer:DEADLYSIGNAL", "stack smashing",
            "double free", "malloc(): ", "free(): ")

# The waits below are hang detection: each ends as soon as what it waits for
# happens, so a passing test does not spend them.  They are generous because
# make check's first phase runs ~20 passes on 2 CPUs: a sanitizer build there
# waits hundreds of milliseconds for a CPU (a close "at once" took 1.13 s).
START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0
# default: a response that takes longer than this is a hang.  15 s, not 5: a
# password check or a gzip runs on the worker threads, at SCHED_IDLE (jobs.c),
# which a CPU that other processes keep busy runs only when it has nothing
# else: a 30 ms hash took 1.4 s with the machine busy, and more is possible.
IO_TIMEOUT = 15.0
FILE_CACHE_WAIT = 6.0  # the open-file cache closes idle files after ~1 s
SOCKET_CLOSE_WAIT = 6.0  # the server notices a client's close within a few ms


# --------------------------------------------------------------------------
# Tests that measure cost or time
#
# `make check` runs the suite once per build, several builds at a time
# (tests/run-check); tests marked `serial` measure CPU or wall-clock time and
# run afterwards, one build at a time, so that the other passes do not add to
# what they measure.  Even so the machine may be shared, and the kernel
# charges a task with the softirq work of whatever traffic arrives while it
# runs, so a cost test also
#   - lets the socket tables settle first (settle()),
#   - connects from a loopback address earlier tests did not use
#     (fresh_source_address()), so its connections meet none of their
#     TIME_WAIT entries, and
#   - is judged on the least of a few runs (best_of()): other load only adds,
#     so the least is the closest to the truth, while a server that really
#     costs too much fails every run.

serial = pytest.mark.serial


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: measures cost or time: tests/run-check runs these after the "
        "parallel passes, one build at a time")


def sockstat():
    """/proc/net/sockstat's TCP line as a dict (inuse, orphan, tw, alloc, mem)."""
    try:
        with open("/proc/net/sockstat") as f:
            for line in f:
                if line.startswith("TCP:"):
                    v = line.split()[1:]
                    return {k: int(n) for k, n in zip(v[::2], v[1::2])}
    except OSError:
        pass
    return {}


def settle(timeout=3.0):
    """Wait, at most timeout s, until the TCP connections earlier tests closed
    have finished: no orphans (closed, still sending or waiting for a FIN) and
    under 4 MB of TCP buffer memory in use.  Their timers and retransmissions
    run in softirq context, charged to whatever task is running, a measured
    server included.  Best effort: other work on the machine may keep the
    counts up, which best_of() absorbs.  Returns the last counts seen."""
    deadline = time.monotonic() + timeout
    while True:
        st = sockstat()
        pages = 4 << 20 >> 12
        if not st or (st.get("orphan", 0) == 0 and st.get("mem", 0) < pages) \
                or time.monotonic() > deadline:
            return st
        time.sleep(0.1)


def fresh_source_address():
    """An address in 127.0.0.0/8 (all of it is loopback on Linux) that the
    suite's other connections, all from 127.0.0.1 and 127.0.0.2-4, never
    use: connect() from it finds a free port at once and its connections
    meet none of the tens of thousands of TIME_WAIT entries a full run leaves."""
    import random
    return "127.%d.%d.%d" % (random.randint(100, 254), random.randint(0, 255),
                             random.randint(1, 254))


def free_port():
    """A loopback TCP port to hand to another program that binds it itself
    (systemd-socket-activate, gatling -p N).  Taken below the ephemeral
    range: a port bind(0) chose would be free only until the next connect()
    of any test running beside this one picked it as a source port."""
    import random
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randint(10000, max(low - 1, 10001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port below %d for a listener" % low)


def best_of(measure, passes, rounds=3):
    """Run measure() (a dict of costs) up to `rounds` times, keeping the least
    of each cost, until passes(least) is true; return the least costs.  The
    caller asserts on them, so a server whose cost is really too high fails
    after `rounds` runs, while one that was only disturbed passes early."""
    best = {}
    for _ in range(rounds):
        settle()
        got = measure()
        best = {k: min(v, best.get(k, v)) for k, v in got.items()}
        if passes(best):
            break
    return best


# --------------------------------------------------------------------------
# Builds

class Build:
    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(BUILD_DIR, name)
        self.binary = os.path.join(self.dir, "gatling")
        # "epoll-san" is the epoll backend with sanitizers, "epoll-noh3" without
        # HTTP/3 (make H3=0), "epoll-san-noh3" both
        base = name[:-5] if name.endswith("-noh3") else name
        self.backend = base[:-4] if base.endswith("-san") else base
        self.sanitized = base.endswith("-san")

    def __repr__(self):
        return "Build(%r)" % self.name

    def unit_tests(self):
        d = os.path.join(self.dir, "tests")
        if not os.path.isdir(d):
            return []
        return sorted(os.path.join(d, f) for f in os.listdir(d)
                      if f.startswith("t_") and not f.endswith((".o", ".d"))
                      and os.access(os.path.join(d, f), os.X_OK)
                      and os.path.isfile(os.path.join(d, f)))


def build_names():
    env = os.environ.get("GATLING_BUILDS", "").split()
    if env:
        return env
    if not os.path.isdir(BUILD_DIR):
        return []
    return sorted(n for n in os.listdir(BUILD_DIR)
                  if os.access(os.path.join(BUILD_DIR, n, "gatling"), os.X_OK))


BUILDS = build_names()
_NO_BUILD = "no-build"


@pytest.fixture(scope="session", params=BUILDS or [_NO_BUILD], ids=BUILDS or [_NO_BUILD])
def build(request):
    if request.param == _NO_BUILD:
        pytest.skip("no build/*/gatling binary found (run make, or set GATLING_BUILDS)")
    b = Build(request.param)
    # A build named in GATLING_BUILDS must exist: make check built it.
    assert os.access(b.binary, os.X_OK), "%s: no executable %s" % (b.name, b.binary)
    if H3:
        skip_without_h3(b.binary, "GATLING_SCHEME=h3: ")
    return b


@functools.lru_cache(maxsize=None)
def gatling_version(binary):
    """What `gatling -V` prints: the version and the features built in."""
    return subprocess.run([str(binary), "-V"], capture_output=True, text=True,
                          timeout=10).stdout.strip()


def skip_without_h3(binary, why=""):
    """Skip the test where the gatling at `binary` was built without HTTP/3 (its -V line ends
    in " h3" where libngtcp2-dev 0.12, libngtcp2-crypto-gnutls-dev and libnghttp3-dev 0.8
    were there to build it: tests/setup.sh installs them)."""
    v = gatling_version(binary)
    if not v.endswith(" h3"):
        pytest.skip("%sthis build has no HTTP/3 (gatling -V: %r)" % (why, v))


# --------------------------------------------------------------------------
# Document roots

class Symlink:
    def __init__(self, target):
        self.target = target


class Mode:
    """File content with explicit permission bits."""

    def __init__(self, content, mode):
        self.content = content
        self.mode = mode


def make_docroot(path, tree, mtime=None):
    """Create `tree` under `path`.

    tree maps relative paths to: bytes/str (file content), None or {} (empty
    directory), a dict (a subdirectory), Symlink(target), Mode(content, mode).
    Files get `mtime` (seconds since the epoch) if given.  Returns path.
    """
    os.makedirs(path, exist_ok=True)
    for name, val in tree.items():
        p = os.path.join(path, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if val is None or isinstance(val, dict):
            make_docroot(p, val or {}, mtime)
            continue
        if isinstance(val, Symlink):
            os.symlink(val.target, p)
            continue
        mode = 0o644
        if isinstance(val, Mode):
            val, mode = val.content, val.mode
        if isinstance(val, str):
            val = val.encode()
        with open(p, "wb") as f:
            f.write(val)
        os.chmod(p, mode)
        if mtime is not None:
            os.utime(p, (mtime, mtime))
    return path


def recv_to_eof(s, bufsize=65536):
    """Everything socket s receives until the peer closes."""
    chunks = []
    while True:
        b = s.recv(bufsize)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def read_slowly_until_closed(s, seconds=10, errors=()):
    """Read s 512 bytes every 10 ms (about 50 KB/s) until the server closes or
    resets it, or seconds pass: (bytes got, closed)."""
    s.settimeout(1)
    t0 = time.monotonic()
    got = 0
    while time.monotonic() - t0 < seconds:
        try:
            d = s.recv(512)
        except (ConnectionResetError, socket.timeout) + tuple(errors):
            return got, True
        if not d:
            return got, True
        got += len(d)
        time.sleep(0.01)
    return got, False


def random_bytes(n, seed):
    """Deterministic pseudo-random bytes (fast, stdlib only)."""
    import random
    return random.Random(seed).randbytes(n)


# --------------------------------------------------------------------------
# Running servers

def wait_for(pred, timeout, what):
    """pred()'s first true value within timeout seconds, or an AssertionError
    naming what did not happen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("%s: not within %.1f s" % (what, timeout))


def tcp_listening(port):
    """Some socket of this host listens on TCP port (/proc/net/tcp and tcp6:
    state 0A), looked up without connecting, which the listener would serve:
    whether a server has run the signal handler that closes its listeners."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    local, st = line.split()[1], line.split()[3]
                    if st == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def gone(pid):
    """The process has exited (or is a zombie not yet reaped)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def end_upgrades(srv, pids):
    """The end of a binary-upgrade test: every process of the chain (pids) still there
    killed, and the first one, the fixture's child, reaped."""
    for p in pids:
        if not gone(p):
            os.kill(p, signal.SIGKILL)
    if srv.process.poll() is None:
        srv.process.kill()
    srv.process.wait()


def fd_count(pid, sockets_only=False):
    """Open descriptors of pid (or only its sockets); -1 if it is gone."""
    d = "/proc/%d/fd" % pid
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return -1
    if not sockets_only:
        return len(names)
    n = 0
    for f in names:
        try:
            n += os.readlink(os.path.join(d, f)).startswith("socket:")
        except OSError:
            pass
    return n


def fd_list(pid):
    d = "/proc/%d/fd" % pid
    out = []
    for f in sorted(os.listdir(d), key=int) if os.path.isdir(d) else []:
        try:
            out.append("%s->%s" % (f, os.readlink(os.path.join(d, f))))
        except OSError:
            pass
    return ", ".join(out)


class Server:
    """A running gatling.  `log` holds stdout lines (the access log),
    `errlog` stderr lines, both filled by reader threads."""

    def __init__(self, build, docroot, args, proc):
        self.build = build
        self.docroot = docroot
        self.args = args
        self.process = proc
        self.pid = proc.pid
        self.log = []
        self.errlog = []
        self.listeners = []  # (addr, port)
        self.port = None
        self.plain_port = None  # GATLING_SCHEME=https: the HTTP port (port is HTTPS)
        self.baseline_fds = None
        self.baseline_socks = None
        self.exit_checked = False
        self.signaled = False
        self._threads = []

    # -- helpers for tests
    def addr(self):
        return ("127.0.0.1", self.port)

    def connect(self, timeout=IO_TIMEOUT):
        return Client(self.port, timeout=timeout)

    def send_signal(self, sig):
        """Send sig; the automatic teardown checks then leave the
        listener count alone (SIGHUP/SIGTERM close the listeners)."""
        self.signaled = True
        self.process.send_signal(sig)

    def alive(self):
        return self.process.poll() is None

    def fds(self, sockets_only=False):
        return fd_count(self.pid, sockets_only)

    def stderr_text(self):
        return "\n".join(self.errlog)

    def wait_fds(self, want, timeout=SOCKET_CLOSE_WAIT, sockets_only=False):
        """Wait until the server has `want` descriptors (or sockets) open;
        return the last count."""
        deadline = time.monotonic() + timeout
        n = self.fds(sockets_only)
        while n != want and time.monotonic() < deadline:
            time.sleep(0.02)
            n = self.fds(sockets_only)
        return n

    def check_fds(self, what="all connections closed"):
        """Descriptor-leak check.  Sockets must be back to the start-up count
        once the server has seen the closes (within a few ms; SOCKET_CLOSE_WAIT
        s on a busy machine); files within FILE_CACHE_WAIT s, since the
        open-file cache keeps a served file open for up to a second."""
        n = self.wait_fds(self.baseline_socks, SOCKET_CLOSE_WAIT, sockets_only=True)
        if n != self.baseline_socks:
            before, self.baseline_socks = self.baseline_socks, n  # report a leak once
            raise AssertionError("socket leak: %d sockets open at start, %d after %s "
                                 "(/proc/%d/fd)" % (before, n, what, self.pid))

    def check_all_fds(self, what="all connections closed"):
        self.check_fds(what)
        n = self.wait_fds(self.baseline_fds, FILE_CACHE_WAIT)
        if n != self.baseline_fds:
            before, self.baseline_fds = self.baseline_fds, n
            raise AssertionError("descriptor leak: %d open at start, %d after %s and %.1f s "
                                 "(/proc/%d/fd: %s)" % (before, n, what, FILE_CACHE_WAIT,
                                                        self.pid, fd_list(self.pid)))

    def wait_log(self, n, timeout=10.0):
        deadline = time.monotonic() + timeout
        while len(self.log) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.log)

    def check_alive(self):
        assert self.alive(), "server died (status %s); stderr:\n%s" % (
            self.process.returncode, self.stderr_text())

    def check_stderr(self):
        text = self.stderr_text()
        bad = [a for a in ALARMING if a in text]
        assert not bad, "alarming output on server stderr (%s):\n%s" % (bad, text)

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Send sig, wait for exit; return the exit status (kills on timeout)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            self.join()
            raise AssertionError("server did not exit within %.0f s of signal %d; "
                                 "stderr:\n%s" % (timeout, sig, self.stderr_text()))
        self.join()
        return self.process.returncode

    def join(self):
        for t in self._threads:
            t.join(2)

    def finish(self):
        """Teardown: SIGTERM, exit 0, clean stderr."""
        if self.exit_checked:
            return
        self.exit_checked = True
        was_alive = self.alive()
        status = self.stop()
        self.check_stderr()
        assert was_alive or self.signaled, (
            "server had already exited with status %s; stderr:\n%s" % (
                status, self.stderr_text()))
        assert status == 0, "server exit status %s after SIGTERM; stderr:\n%s" % (
            status, self.stderr_text())


def _reader(stream, sink):
    for line in iter(stream.readline, b""):
        sink.append(line.decode("utf-8", "replace").rstrip("\r\n"))
    stream.close()


def start_server(build, docroot, args=("-T", "10"), env=None):
    """Start build's gatling on 127.0.0.1, kernel-chosen port, cwd = docroot.
    Waits for the "listening on ADDR port N" line on stderr.  In the h3 pass
    a server whose UDP socket could not have the HTTPS port's number (a
    client's UDP socket of another test had it: both come from the
    ephemeral range) is started again, up to 5 times."""
    for _ in range(5):
        srv = _start_server(build, docroot, args, env)
        if not (H3 and any("HTTP/3: " in l and "without it" in l for l in srv.errlog)):
            return srv
        srv.stop()
    raise AssertionError("no HTTP/3 in 5 starts; stderr:\n%s" % srv.stderr_text())


def _start_server(build, docroot, args, env):
    cmd = [build.binary, "-i", "127.0.0.1", "-p", "0"] + list(args)
    tls = TLS and "-E" not in args and "-C" not in args
    if tls:
        cmd += ["-C", os.path.join(test_pki(), "certs"), "-e", "0"]
    e = dict(os.environ)
    if build.sanitized:
        e.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1")
        e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    if env:
        e.update(env)
    proc = subprocess.Popen(cmd, cwd=docroot, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    srv = Server(build, docroot, cmd, proc)
    # stderr: read lines here until the listening line, then hand over to a thread
    deadline = time.monotonic() + START_TIMEOUT
    buf = b""
    fd = proc.stderr.fileno()
    while srv.port is None or (tls and len(srv.listeners) < 2):
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            proc.wait()
            raise AssertionError("%s: no 'listening on ... port N' line on stderr within "
                                 "%.0f s; stderr so far:\n%s" % (cmd, START_TIMEOUT,
                                                                 buf.decode(errors="replace")))
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            proc.wait()
            raise AssertionError("%s exited (status %s) before listening; stderr:\n%s"
                                 % (cmd, proc.returncode, buf.decode(errors="replace")))
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            line = line.decode("utf-8", "replace").rstrip("\r")
            srv.errlog.append(line)
            m = LISTEN_RE.search(line)
            if m:
                srv.listeners.append((m.group(1), int(m.group(2))))
                if srv.port is None:
                    srv.port = int(m.group(2))
                if tls and "(https)" in line:
                    srv.plain_port, srv.port = srv.port, int(m.group(2))
    # Anything after the listening line that we already read:
    pending = buf

    def err_reader():
        rest = pending
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            rest += chunk
            while b"\n" in rest:
                line, rest = rest.split(b"\n", 1)
                srv.errlog.append(line.decode("utf-8", "replace").rstrip("\r"))
        if rest:
            srv.errlog.append(rest.decode("utf-8", "replace"))

    t1 = threading.Thread(target=err_reader, daemon=True)
    t2 = threading.Thread(target=_reader, args=(proc.stdout, srv.log), daemon=True)
    t1.start()
    t2.start()
    srv._threads = [t1, t2]
    # The server may print more than one listening line (one per listener);
    # give it a moment to settle before taking the descriptor baseline.
    time.sleep(0.05)
    srv.baseline_fds = srv.fds()
    srv.baseline_socks = srv.fds(sockets_only=True)
    return srv


@contextlib.contextmanager
def running_server(build, docroot, args=("-T", "10"), env=None, check_fds=True):
    """Start a server, yield it, and at the end check fds, exit status, stderr."""
    srv = start_server(build, docroot, args, env)
    try:
        yield srv
    except BaseException:
        # the test failed: still stop the server, but report the test's error
        with contextlib.suppress(BaseException):
            close_all_clients()
            srv.finish()
        raise
    close_all_clients()
    if check_fds and srv.alive() and not srv.exit_checked and not srv.signaled:
        try:
            srv.check_fds()
        except AssertionError:
            with contextlib.suppress(BaseException):
                srv.finish()
            raise
    srv.finish()


@pytest.fixture
def gatling(build, tmp_path):
    """Factory for tests that need their own server (own flags / docroot):
        srv = gatling(tree, args=("-T", "1"))
    Each is checked at teardown like any server fixture."""
    stack = contextlib.ExitStack()
    count = [0]

    def start(tree=None, args=("-T", "10"), docroot=None, env=None, check_fds=True):
        count[0] += 1
        if docroot is None:
            docroot = str(tmp_path / ("root%d" % count[0]))
            make_docroot(docroot, tree if tree is not None else {"f.txt": "hello\n"})
        return stack.enter_context(running_server(build, docroot, args, env, check_fds))

    with stack:
        yield start


# --------------------------------------------------------------------------
# Raw HTTP

_open_clients = []


def close_all_clients():
    while _open_clients:
        with contextlib.suppress(OSError):
            _open_clients.pop().close()


class ServerHang(AssertionError):
    pass


class Response:
    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value) as received
        self.body = body
        self.raw_head = raw_head

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def tokens(self, name):
        """Comma-separated list header as lower-case tokens."""
        out = []
        for v in self.header_all(name):
            out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def __repr__(self):
        return "<Response %d %r, %d body bytes>\n%s" % (
            self.status, self.reason, len(self.body or b""),
            self.raw_head.decode("latin-1"))


def no_body_status(status):
    return 100 <= status < 200 or status in (204, 304)


class _SocketClient:
    """What both clients do with their socket (self.sock)."""

    def _recv_more(self, deadline, what):
        """One read before deadline (the client's _hang past it); b"" at the end
        of the connection, a reset included."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._hang(what)
        self.sock.settimeout(left)
        try:
            return self.sock.recv(1 << 20)
        except socket.timeout:
            raise self._hang(what)
        except (ConnectionResetError, BrokenPipeError):
            return b""

    def send_split(self, data, sizes, pause=0.01):
        """Send data in pieces of the given sizes (cycled), pausing between
        (over HTTP/2 a request's HEADERS go out once its head is complete)."""
        if isinstance(data, str):
            data = data.encode("latin-1")
        i = k = 0
        while i < len(data):
            n = sizes[k % len(sizes)]
            self.send(data[i:i + n])
            i += n
            k += 1
            time.sleep(pause)

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()

    def reset(self):
        """Close with RST (SO_LINGER 0)."""
        import struct
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class H1Client(_SocketClient):
    """One TCP connection to the server (TLS in the https and h2 passes), with
    a read buffer so that several pipelined responses can be taken one after
    another.  Tests use it as Client, which is H2Client in the h2 pass."""

    def __init__(self, port, host="127.0.0.1", timeout=IO_TIMEOUT, rcvbuf=None):
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        if TLS:
            self.sock = client_tls_context().wrap_socket(self.sock, server_hostname="localhost")
        self.buf = bytearray()  # += on bytes would be quadratic for big bodies
        self.sent = b""
        _open_clients.append(self)

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sent += data
        self.sock.sendall(data)

    def _hang(self, what):
        return ServerHang("server hang: no complete %s within %.1f s.\n"
                          "request(s) sent: %r\nunparsed bytes received (%d): %r"
                          % (what, self.timeout, self.sent[:600], len(self.buf),
                             bytes(self.buf[:200])))

    def read_response(self, method="GET", timeout=None):
        """Read one response. method decides whether a body follows (HEAD: none).
        Raises ServerHang on timeout, ConnectionError if the server closes
        before a complete response."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            # tolerate bare LF in responses too, but expect CRLF
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                head = bytes(self.buf[:i])
                del self.buf[:i + 4]
                break
            chunk = self._recv_more(deadline, "response head")
            if not chunk:
                raise ConnectionError("server closed the connection before a complete "
                                      "response head; request(s) sent: %r; received: %r"
                                      % (self.sent[:600], bytes(self.buf[:600])))
            self.buf += chunk
        lines = head.split(b"\r\n")
        m = re.match(rb"(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
        assert m, "malformed status line %r (full head %r)" % (lines[0], head)
        version, status, reason = m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1")
        headers = []
        for ln in lines[1:]:
            assert b":" in ln, "malformed response header line %r in %r" % (ln, head)
            k, v = ln.split(b":", 1)
            assert k == k.strip() and k, "bad response header name %r" % k
            headers.append((k.decode("latin-1"), v.strip().decode("latin-1")))
        resp = Response(version, status, reason, headers, b"", head)
        if method == "HEAD" or no_body_status(status):
            return resp
        te = resp.header("Transfer-Encoding")
        cl = resp.header("Content-Length")
        if te and "chunked" in te.lower():
            resp.body = self._read_chunked(deadline)
        elif cl is not None:
            assert re.fullmatch(r"\d+", cl), "bad Content-Length %r" % cl
            n = int(cl)
            while len(self.buf) < n:
                chunk = self._recv_more(deadline, "body (%d of %d bytes)" % (len(self.buf), n))
                if not chunk:
                    raise ConnectionError("server closed after %d of %d body bytes; head %r"
                                          % (len(self.buf), n, head))
                self.buf += chunk
            resp.body = bytes(self.buf[:n])
            del self.buf[:n]
        else:
            # delimited by close
            while True:
                chunk = self._recv_more(deadline, "close-delimited body")
                if not chunk:
                    break
                self.buf += chunk
            resp.body = bytes(self.buf)
            self.buf = bytearray()
        return resp

    def _read_chunked(self, deadline):
        body = bytearray()
        while True:
            while b"\r\n" not in self.buf:
                c = self._recv_more(deadline, "chunk size")
                if not c:
                    raise ConnectionError("closed inside chunked body")
                self.buf += c
            i = self.buf.find(b"\r\n")
            line = bytes(self.buf[:i])
            del self.buf[:i + 2]
            n = int(line.split(b";")[0], 16)
            while len(self.buf) < n + 2:
                c = self._recv_more(deadline, "chunk")
                if not c:
                    raise ConnectionError("closed inside chunked body")
                self.buf += c
            body += self.buf[:n]
            del self.buf[:n + 2]
            if n == 0:
                return bytes(body)

    def request(self, target="/", method="GET", version="HTTP/1.1", headers=None,
                host="localhost", body=b"", timeout=None):
        self.send(build_request(target, method, version, headers, host, body))
        return self.read_response(method, timeout=timeout)

    def closed_within(self, timeout):
        """True if the server closes (EOF or RST) within timeout seconds.
        Data that arrives meanwhile is kept in self.buf."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
            self.buf += chunk

    def assert_closed(self, timeout=5.0, why=""):
        t0 = time.monotonic()
        assert self.closed_within(timeout), (
            "server did not close the connection within %.1f s %s\nsent: %r\nunread data: %r"
            % (timeout, why, self.sent[:600], bytes(self.buf[:600])))
        return time.monotonic() - t0

    def assert_open(self, wait=0.3):
        assert not self.closed_within(wait), (
            "server closed the connection unexpectedly; sent: %r; unread: %r"
            % (self.sent[:600], bytes(self.buf[:300])))


class NotH2(AssertionError):
    """A test sent bytes that are not a well-formed HTTP/1.1 request, or asked
    for something only HTTP/1.1 has: it belongs under h1_only."""


class NotH3(NotH2):
    """NotH2's twin for the h3 pass (H3Client): the same requests cannot be
    streams in HTTP/3 either."""


# RFC 9113 8.2.2 (and RFC 9114 4.2): connection-specific fields are not sent
# in HTTP/2 or HTTP/3
H2_DROP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
           "host")
REQUEST_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/1\.1")


class _Stream:
    def __init__(self, method, head, length):
        self.method = method
        self.head = head  # the HTTP/1.1 head it came from, for messages
        self.heads = []  # response heads: 1xx ones, then the final one
        self.trailers = []
        self.body = bytearray()
        self.ended = False
        self.reset = None  # RST_STREAM's (RESET_STREAM's) error code
        self.need = length  # request body bytes the test has not sent yet
        self.out = b""  # request body bytes not sent yet (flow control)
        self.out_ended = length == 0  # END_STREAM (FIN) sent


class _MuxClient(_SocketClient):
    """What H2Client and H3Client share: the HTTP/1.1 bytes a test writes cut
    into requests, each a stream (the request line gives :method and :path,
    Host gives :authority, the connection-specific fields are dropped, the
    Content-Length bytes that follow go out as the stream's body as they
    come), and the responses returned in the order the requests were sent.
    A subclass opens the connection and sets up _init_streams(), and says
    how a stream is opened (_open_stream), how bodies go out (_send_bodies),
    how bytes come in (_recv, which feeds _Stream objects) and why a stream
    will get no response (_lost)."""

    VERSION = "HTTP/2"
    NOT = NotH2

    def _init_streams(self, timeout):
        self.timeout = timeout
        self.buf = bytearray()  # HTTP/1.1 bytes sent that are not a whole request head yet
        self.cur = None  # the stream whose request body is still coming
        self.sent = b""
        self.streams = {}
        self.order = []  # stream ids whose responses read_response has not returned
        self.eof = False

    # -- HTTP/1.1 in, streams out
    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sent += data
        self.buf += data
        while self.buf:
            if self.cur:
                n = min(self.cur.need, len(self.buf))
                self.cur.out += bytes(self.buf[:n])
                self.cur.need -= n
                del self.buf[:n]
                if not self.cur.need:
                    self.cur = None
            elif not self._start_stream():
                break
        self._send_bodies()
        self._flush()

    def _not_mux(self, why, head):
        return self.NOT("%s: %s cannot carry this request (mark the test h1_only): %r"
                        % (why, self.VERSION, head[:300]))

    def _start_stream(self):
        """Start a stream for the request head at the start of self.buf, if
        it is complete; False when it is not all here yet."""
        i = self.buf.find(b"\r\n\r\n")
        if i < 0:
            return False
        head = bytes(self.buf[:i])
        method, headers, hosts, length = self._split_head(head)
        del self.buf[:i + 4]
        sid = self._open_stream(method, headers, hosts, length, head)
        st = self.streams[sid] = _Stream(method, head, length)
        self.cur = st if length else None
        self.order.append(sid)
        return True

    def _split_head(self, head):
        """An HTTP/1.1 request head as a stream's (method, [(name, value)]
        as bytes, pseudo-fields first, the Host values, body length)."""
        lines = head.decode("latin-1").split("\r\n")
        m = REQUEST_LINE.fullmatch(lines[0])
        if not m:
            raise self._not_mux("not an HTTP/1.1 request line", head)
        method, target = m.groups()
        fields = []
        for ln in lines[1:]:
            k, sep, v = ln.partition(":")
            if not sep or not k or k != k.strip():
                raise self._not_mux("a malformed field line %r" % ln, head)
            fields.append((k.lower(), v.strip()))
        if any(k == "transfer-encoding" for k, _ in fields):
            raise self._not_mux("HTTP/1.1 framing (Transfer-Encoding)", head)
        cls = [v for k, v in fields if k == "content-length"]
        if len(cls) > 1 or (cls and not cls[0].isdigit()):
            raise self._not_mux("a malformed Content-Length", head)
        length = int(cls[0]) if cls else 0
        hosts = [v for k, v in fields if k == "host"]
        if len(hosts) > 1:
            raise self._not_mux("more than one Host", head)
        if method == "CONNECT":  # RFC 9113 8.5: :method and :authority only
            pseudo, hosts, target = [(":method", method)], [target], None
        else:
            pseudo = [(":method", method), (":scheme", "https")]
        m = target and re.fullmatch(r"(https?)://([^/?#]*)(.*)", target)
        if m:  # absolute form: the target names the authority (RFC 9112 3.2.2)
            pseudo[1] = (":scheme", m.group(1))
            hosts, target = [m.group(2)], m.group(3) or "/"
        if hosts:
            pseudo.append((":authority", hosts[0]))
        if target:
            pseudo.append((":path", target))
        drop = set(H2_DROP)
        for k, v in fields:
            if k == "connection":
                drop.update(t.strip().lower() for t in v.split(","))
        rest = [(k, v) for k, v in fields if k not in drop
                and not (k == "te" and v.lower() != "trailers")]
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in pseudo + rest]
        return method, headers, hosts, length

    def _check_final(self, st, status, fields):
        """A hook on each final response before it is returned."""

    def read_response(self, method="GET", timeout=None):
        """The response to the oldest request whose response was not read yet
        (a 1xx first, as it comes; the stream stays the oldest)."""
        if not self.order:
            raise self._not_mux("no complete request head sent", bytes(self.buf))
        deadline = time.monotonic() + (timeout or self.timeout)
        sid = self.order[0]
        st = self.streams[sid]
        while not st.ended and not (st.heads and self._status(st.heads[0]) < 200):
            why = self._lost(sid, st)
            if why:
                self.order.pop(0)
                raise ConnectionError("%s before a complete response; request: %r"
                                      % (why, st.head))
            self._recv(deadline, "response")
        assert st.heads, "stream %d ended without a response head" % sid
        fields = st.heads.pop(0)
        status = self._status(fields)
        if status >= 200:
            self.order.pop(0)
            del self.streams[sid]
            self._check_final(st, status, fields)
            fields += st.trailers
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in fields[1:]]
        raw = "%s %d\r\n" % (self.VERSION, status) + "".join("%s: %s\r\n" % kv
                                                           for kv in headers)
        return Response(self.VERSION, status, "", headers,
                        bytes(st.body) if status >= 200 else b"", raw.encode("latin-1"))

    def read_head(self, timeout=None):
        """Wait for the head of the oldest unread response and return its
        status, leaving the response to read_response (for a test that stalls
        a download: flow control holds the rest at the server)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        st = self.streams[self.order[0]]
        while not st.heads:
            why = self._lost(self.order[0], st)
            if why:
                raise ConnectionError(why)
            self._recv(deadline, "response head")
        return self._status(st.heads[0])

    @staticmethod
    def _status(fields):
        assert fields[0][0] == b":status", fields
        return int(fields[0][1])

    def request(self, target="/", method="GET", version="HTTP/1.1", headers=None,
                host="localhost", body=b"", timeout=None):
        self.send(build_request(target, method, version, headers, host, body))
        return self.read_response(method, timeout=timeout)

    def closed_within(self, timeout):
        """True if the server closes the connection within timeout seconds
        (frames that arrive meanwhile are taken in)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self._recv(deadline, "close")
            except ServerHang:
                return False
        return True

    def assert_closed(self, timeout=5.0, why=""):
        t0 = time.monotonic()
        assert self.closed_within(timeout), (
            "server did not close the %s connection within %.1f s %s\nsent: %r"
            % (self.VERSION, timeout, why, self.sent[:600]))
        return time.monotonic() - t0

    def assert_open(self, wait=0.3):
        assert not self.closed_within(wait), (
            "server closed the %s connection unexpectedly (%s); sent: %r"
            % (self.VERSION, self._lost(0, _Stream("", b"", 0)), self.sent[:600]))


class H2Client(_MuxClient):
    """Client's interface over one HTTP/2 connection (TLS, ALPN h2), for the
    h2 pass.  send() takes the HTTP/1.1 bytes a test writes; each well-formed
    request becomes a stream (_MuxClient: RFC 9113 8.2.2 for the fields),
    its body sent as DATA as flow control allows (after a 100, if the test
    waits for one).  Pipelined requests become concurrent streams;
    read_response() returns their responses in the order sent (a 1xx
    first), as a Response with version "HTTP/2" and the field names as
    received (lower case).  A request HTTP/2 cannot carry (not HTTP/1.1,
    chunked, a bad request line) raises NotH2: mark the test h1_only.  A
    stream the server resets, or a connection it closes before answering,
    raises ConnectionError, as a close does for H1Client.
    sni and context (an ssl.SSLContext) default to the suite's: localhost,
    trusting the test CA."""

    def __init__(self, port, host="127.0.0.1", timeout=IO_TIMEOUT, rcvbuf=None,
                 sni="localhost", context=None):
        h2 = import_h2()
        import h2.config
        import h2.connection
        import h2.events
        import h2.exceptions
        self.ev = h2.events
        self.h2_errors = h2.exceptions
        self._init_streams(timeout)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout)
        sock.connect((host, port))
        if context is None:
            context = client_tls_context()
        context.set_alpn_protocols(["h2"])
        self.sock = context.wrap_socket(sock, server_hostname=sni)
        alpn = self.sock.selected_alpn_protocol()
        assert alpn == "h2", "the server chose ALPN %r, not h2" % alpn
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        # h2 4.1 takes any GOAWAY as the end of the connection and then refuses
        # the frames of the streams the server still finishes (RFC 9113 6.8):
        # after a graceful one, keep the connection open on our side
        from h2.connection import ConnectionState
        from hyperframe.frame import GoAwayFrame
        on_goaway = self.conn._frame_dispatch_table[GoAwayFrame]

        def goaway(frame):
            out = on_goaway(frame)
            if not frame.error_code:
                self.conn.state_machine.state = ConnectionState.CLIENT_OPEN
            return out
        self.conn._frame_dispatch_table[GoAwayFrame] = goaway
        self.goaway = None  # ConnectionTerminated
        self._flush()
        _open_clients.append(self)

    def _flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def _open_stream(self, method, headers, hosts, length, head):
        sid = self.conn.get_next_available_stream_id()
        # h2 4.1 insists on :path, which a CONNECT must not have, and on
        # :authority, which a request may lack (RFC 9113 8.3.1)
        self.conn.config.validate_outbound_headers = method != "CONNECT" and bool(hosts)
        try:
            self.conn.send_headers(sid, headers, end_stream=length == 0)
        except self.h2_errors.ProtocolError as e:
            raise self._not_mux("h2 refused it (%s)" % e, head)
        finally:
            self.conn.config.validate_outbound_headers = True
        return sid

    def _send_bodies(self):
        """Send what flow control allows of the request bodies."""
        for sid, st in self.streams.items():
            while not st.out_ended and st.reset is None and not st.ended:
                n = min(len(st.out), self.conn.local_flow_control_window(sid),
                        self.conn.max_outbound_frame_size)
                if n <= 0 and (st.out or st.need):
                    break
                st.out_ended = n == len(st.out) and not st.need
                self.conn.send_data(sid, st.out[:n], end_stream=st.out_ended)
                st.out = st.out[n:]

    # -- frames in
    def _hang(self, what):
        return ServerHang("server hang: no complete %s within %.1f s over HTTP/2.\n"
                          "request(s) sent: %r\nstreams: %s"
                          % (what, self.timeout, self.sent[:600],
                             {k: (v.heads, len(v.body), v.ended, v.reset)
                              for k, v in self.streams.items()}))

    def _recv(self, deadline, what):
        """Read once and feed the frames to h2; False at the end of the connection."""
        chunk = self._recv_more(deadline, what)
        if not chunk:
            self.eof = True
            return False
        try:
            events = self.conn.receive_data(chunk)
        except self.h2_errors.ProtocolError as e:
            raise AssertionError("the server broke HTTP/2: %r; request(s) sent: %r"
                                 % (e, self.sent[:600]))
        for ev in events:
            self._event(ev)
        self._send_bodies()
        with contextlib.suppress(OSError):
            self._flush()
        return True

    def _event(self, ev):
        st = self.streams.get(getattr(ev, "stream_id", 0) or 0)
        if isinstance(ev, (self.ev.ResponseReceived, self.ev.InformationalResponseReceived)):
            st.heads.append(ev.headers)
        elif isinstance(ev, self.ev.TrailersReceived):
            st.trailers = ev.headers
        elif isinstance(ev, self.ev.DataReceived):
            st.body += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, self.ev.StreamEnded):
            st.ended = True
        elif isinstance(ev, self.ev.StreamReset):
            if st:
                st.reset = ev.error_code
        elif isinstance(ev, self.ev.ConnectionTerminated):
            self.goaway = ev

    def _lost(self, sid, st):
        """Why the stream sid will get no (more) response, or None."""
        if st.reset is not None:
            return "the server reset the stream (RST_STREAM %s)" % st.reset
        if self.goaway is not None and (sid > self.goaway.last_stream_id
                                        or self.eof or self.goaway.error_code):
            return "GOAWAY %s, last stream %d" % (self.goaway.error_code,
                                                   self.goaway.last_stream_id)
        if self.eof:
            return "the server closed the connection"
        return None


def import_aioquic():
    """aioquic (pip install aioquic; tests/setup.sh), with a subclass of its
    H3Connection that leaves the Content-Length check to H3Client: aioquic
    1.x holds a response's content-length against its DATA whatever the
    request was, and a HEAD's or a 304's rightly has none."""
    try:
        from aioquic.h3.connection import H3_ALPN, H3Connection
        from aioquic.quic import events
        from aioquic.quic.configuration import QuicConfiguration
        from aioquic.quic.connection import QuicConnection
        import aioquic.h3.events as h3_events
    except ImportError:
        raise ImportError("GATLING_SCHEME=h3 needs aioquic (pip install aioquic; "
                          "tests/setup.sh does it)")

    class Conn(H3Connection):
        def _check_content_length(self, stream):
            pass
    return Conn, H3_ALPN, events, h3_events, QuicConfiguration, QuicConnection


H3_NO_ERROR, H3_INTERNAL_ERROR = 0x100, 0x102


class H3Client(_MuxClient):
    """Client's interface over one HTTP/3 connection (QUIC over UDP at the
    HTTPS port's number, ALPN h3, aioquic's QUIC and QPACK driven here
    without asyncio), for the h3 pass: as H2Client, each HTTP/1.1 request a
    test writes becomes a request stream and read_response() returns the
    responses in order, with version "HTTP/3".  A stream the server resets
    (RESET_STREAM) or a connection it closes (CONNECTION_CLOSE) before the
    response raises ConnectionError; a request HTTP/3 cannot carry, NotH3.
    The server's frames are checked by aioquic (a violation fails the test),
    and a response's Content-Length against its body here.  sni names the
    certificate; rcvbuf and context are taken for H2Client's signature and
    ignored: a client that does not read holds the server back by QUIC's
    acknowledgements and flow control, not by a socket buffer (a small one
    would only drop datagrams), and QUIC's TLS is aioquic's."""

    VERSION = "HTTP/3"
    NOT = NotH3

    def __init__(self, port, host="127.0.0.1", timeout=IO_TIMEOUT, rcvbuf=None,
                 sni="localhost", context=None, cadata=None):
        conn, alpn, self.qev, self.ev, config, quic = import_aioquic()
        self._init_streams(timeout)
        cfg = config(is_client=True, alpn_protocols=alpn, server_name=sni,
                     max_datagram_frame_size=None)
        # cadata: PEM roots to trust instead of the test CA (test_acme_https.py: Pebble's)
        if cadata:
            cfg.load_verify_locations(cadata=cadata.encode() if isinstance(cadata, str) else cadata)
        else:
            cfg.load_verify_locations(os.path.join(test_pki(), "ca.pem"))
        self.addr = (host, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect(self.addr)
        self.quic = quic(configuration=cfg)
        # acknowledge at once: nothing runs aioquic's timers between this
        # client's calls, so a delayed ACK (1 ms) would wait for the next
        # one, and the server would hold a finished stream meanwhile
        self.quic._ack_delay = 0
        self.h3 = conn(self.quic)
        self.alpn = None
        self.closed = False
        self.quic.connect(self.addr, now=time.monotonic())
        self._flush()
        _open_clients.append(self)
        deadline = time.monotonic() + timeout
        while self.alpn is None:
            if self.eof:
                raise ConnectionError("QUIC handshake failed: %s" % self._lost(0, None))
            self._recv(deadline, "QUIC handshake")
        assert self.alpn == "h3", "the server chose ALPN %r, not h3" % self.alpn

    def _flush(self):
        for data, _ in self.quic.datagrams_to_send(now=time.monotonic()):
            self.sock.send(data)

    def _open_stream(self, method, headers, hosts, length, head):
        sid = self.quic.get_next_available_stream_id()
        self.h3.send_headers(sid, headers, end_stream=length == 0)
        return sid

    def _send_bodies(self):
        """Hand the request bodies to QUIC (which sends them as the stream's
        and the connection's flow control allow)."""
        for sid, st in self.streams.items():
            if st.out_ended or st.reset is not None or self.eof:
                continue
            if st.out or not st.need:
                st.out_ended = not st.need
                self.h3.send_data(sid, st.out, end_stream=st.out_ended)
                st.out = b""

    # -- datagrams in
    def _hang(self, what):
        return ServerHang("server hang: no complete %s within %.1f s over HTTP/3.\n"
                          "request(s) sent: %r\nstreams: %s"
                          % (what, self.timeout, self.sent[:600],
                             {k: (v.heads, len(v.body), v.ended, v.reset)
                              for k, v in self.streams.items()}))

    def _recv(self, deadline, what):
        """Wait for datagrams (or QUIC's next timer) and feed them to aioquic;
        False at the end of the connection."""
        now = time.monotonic()
        if now >= deadline:
            raise self._hang(what)
        timer = self.quic.get_timer()
        until = min(deadline, timer) if timer is not None else deadline
        self.sock.settimeout(max(until - now, 0.0005))
        try:
            data = self.sock.recv(65536)
            self.sock.setblocking(False)
            while data:  # take what else is queued before answering
                self.quic.receive_datagram(data, self.addr, now=time.monotonic())
                data = self.sock.recv(65536)
        except (socket.timeout, BlockingIOError):
            pass
        except ConnectionRefusedError:  # ICMP port unreachable: the server is gone
            self.eof = True
        self.sock.settimeout(self.timeout)  # blocking again, for a test's own sock.recv
        if timer is not None and time.monotonic() >= timer:
            self.quic.handle_timer(now=time.monotonic())
        self._events()
        if not self.eof:
            self._send_bodies()
        with contextlib.suppress(OSError):
            self._flush()
        return not self.eof

    def _events(self):
        while True:
            ev = self.quic.next_event()
            if ev is None:
                break
            if isinstance(ev, self.qev.HandshakeCompleted):
                self.alpn = ev.alpn_protocol
            elif isinstance(ev, self.qev.StreamReset) and ev.stream_id in self.streams:
                self.streams[ev.stream_id].reset = ev.error_code
            for h in self.h3.handle_event(ev):
                self._event(h)
            if self.h3._is_done:
                close = self.quic._close_event
                raise AssertionError("the server broke HTTP/3: %s (%#x); request(s) sent: %r"
                                     % (close.reason_phrase, close.error_code, self.sent[:600]))
        if self.quic._close_event is not None:  # CONNECTION_CLOSE, or the idle timeout
            self.eof = True

    def _event(self, ev):
        st = self.streams.get(ev.stream_id)
        if st is None:
            return
        if isinstance(ev, self.ev.HeadersReceived):
            if any(self._status(h) >= 200 for h in st.heads):
                st.trailers = ev.headers
            else:
                st.heads.append(ev.headers)
        elif isinstance(ev, self.ev.DataReceived):
            st.body += ev.data
        if getattr(ev, "stream_ended", False):
            st.ended = True

    def _lost(self, sid, st):
        """Why the stream sid will get no (more) response, or None."""
        if st is not None and st.reset is not None:
            return "the server reset the stream (RESET_STREAM %#x)" % st.reset
        close = self.quic._close_event
        if close is not None:
            return "the connection closed (%#x %s)" % (close.error_code, close.reason_phrase)
        if self.eof:
            return "the server is gone"
        return None

    def _check_final(self, st, status, fields):
        cl = [v for k, v in fields if k == b"content-length"]
        if cl and st.method != "HEAD" and status not in (204, 304):
            assert int(cl[0]) == len(st.body), (
                "content-length %s but %d body bytes over HTTP/3; request: %r"
                % (cl[0], len(st.body), st.head))

    def _close(self, code):
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            self.quic.close(error_code=code)
            self._flush()
        with contextlib.suppress(OSError):
            self.sock.close()

    def close(self):
        """CONNECTION_CLOSE (H3_NO_ERROR): the server forgets the connection at once."""
        self._close(H3_NO_ERROR)

    def reset(self):
        """CONNECTION_CLOSE with an error (what an RST is to TCP)."""
        self._close(H3_INTERNAL_ERROR)


Client = H3Client if H3 else H2Client if H2 else H1Client


def build_request(target="/", method="GET", version="HTTP/1.1", headers=None,
                  host="localhost", body=b""):
    lines = ["%s %s %s" % (method, target, version)]
    if host is not None:
        lines.append("Host: %s" % host)
    for h in headers or []:
        if isinstance(h, tuple):
            h = "%s: %s" % h
        lines.append(h)
    if isinstance(body, str):
        body = body.encode()
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def fetch(port, target="/", **kw):
    """One request on a fresh connection."""
    with Client(port) as c:
        return c.request(target, **kw)


def raw_exchange(port, data, timeout=3.0, method="GET"):
    """Send raw bytes, read one response.  Returns the Response, or None if
    the server closed the connection without answering."""
    with Client(port, timeout=timeout) as c:
        c.send(data)
        try:
            return c.read_response(method)
        except ConnectionError:
            return None


# --------------------------------------------------------------------------
# The standard document root and the shared (module-scoped) server

MTIME = 1700000000  # Tue, 14 Nov 2023 22:13:20 GMT
SECRET = b"TOPSECRET-9f2c61e0-outside-the-docroot\n"
BIG = random_bytes(5 << 20, seed=5)
TEXT = b"hello, gatling\n"


def standard_tree():
    return {
        "f.txt": TEXT,
        "index.html": "<html><body>root index</body></html>\n",
        "page.html": "<html><body>page</body></html>\n",
        "style.css": "body { color: red }\n",
        "img.png": b"\x89PNG\r\n\x1a\n" + random_bytes(300, 1),
        "data.json": '{"a": 1}\n',
        "noext": b"no extension\n",
        "blob.xyzzy": b"unknown extension\n",
        "empty.txt": b"",
        "a b.txt": b"file with a space\n",
        "q?.txt": b"file with a question mark\n",
        "big.bin": BIG,
        "private.txt": Mode(b"not world-readable\n", 0o600),
        "dir": {"index.html": "<html>dir index</html>\n", "f.txt": "in dir\n",
                "sub": {"index.html": "<html>sub index</html>\n"}},
        "my dir": {"index.html": "<html>my dir index</html>\n"},
        "noindex": {"x.txt": "x\n"},
        "link_ok.txt": Symlink("f.txt"),
        "dir/link_up.txt": Symlink("../f.txt"),
        "link_passwd": Symlink("/etc/passwd"),
        "link_secret.txt": Symlink("../secret.txt"),
        "link_outdir": Symlink("../outside"),
    }


def make_standard_root(base):
    """base/root is the docroot; base/secret.txt and base/outside/ lie outside it."""
    base = str(base)
    make_docroot(base, {"secret.txt": SECRET, "outside": {"secret.txt": SECRET}})
    return make_docroot(os.path.join(base, "root"), standard_tree(), mtime=MTIME)


IMF_FIXDATE = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d "
                         r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                         r"\d\d:\d\d:\d\d GMT")


def norm_ctype(v):
    """A Content-Type value lower-cased, without spaces around ';'."""
    return ";".join(p.strip() for p in (v or "").lower().split(";"))


def assert_status(resp, want, what=""):
    assert resp is not None, "%s: server closed without a response (wanted %s)" % (what, want)
    if isinstance(want, int):
        want = (want,)
    assert resp.status in want, "%s: got %d, wanted %s\n%r" % (what, resp.status, want, resp)


def assert_refused(resp, want, what=""):
    """A request the server must refuse with status want.  Over HTTP/2 a
    request with a field HTTP/2 forbids (a NUL, RFC 9113 8.2.1) is malformed:
    the stream is reset (resp None, from raw_exchange) or answered with want;
    the same over HTTP/3 (RFC 9114 4.1.2)."""
    if MUX and resp is None:
        return
    assert_status(resp, want, what)


def assert_ends_connection(c, timeout=5.0, why=""):
    """After an error that ends an HTTP/1.1 connection (a 414 or 431: the
    server cannot trust the framing that follows) the server closes it; over
    HTTP/2 and HTTP/3 only that stream is over and the connection stays open."""
    if MUX:
        c.assert_open(0.3)
    else:
        c.assert_closed(timeout, why)


def serve_then_check(srv):
    """Yield srv to a module's tests, then check it leaked no descriptor and stop it."""
    yield srv
    close_all_clients()
    try:
        if srv.alive():
            srv.check_all_fds("the module's tests")
    finally:
        srv.finish()


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    """One gatling per (module, build) on the standard docroot, -T 10."""
    base = tmp_path_factory.mktemp("std-" + build.name)
    root = make_standard_root(base)
    yield from serve_then_check(start_server(build, root, ("-T", "10")))


@pytest.fixture
def srv(server):
    """The module's server, checked after each test: still alive, and no
    socket leaked once the test's connections are closed (all descriptors,
    files included, are checked when the module is done)."""
    server.check_alive()
    yield server
    close_all_clients()
    server.check_alive()
    server.check_fds("the test's connections closed")


def https_port(srv):
    """The port of the "listening on ... port N (https)" line (it may follow
    the plain listener's line, which is all start_server waits for)."""
    deadline = time.monotonic() + 5
    while True:
        lines = [l for l in srv.errlog if "(https)" in l]
        if lines:
            return int(lines[0].split(" port ")[1].split()[0])
        assert time.monotonic() < deadline, srv.errlog
        time.sleep(0.02)
