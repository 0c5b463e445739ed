"""gatling under test: the builds (Build, BUILDS), document roots
(make_docroot, Symlink, Mode), a running server (Server, start_server,
running_server) and its HTTPS port."""

import contextlib
import functools
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from harness.env import (ALARMING, BUILD_DIR, FILE_CACHE_WAIT, H3, IO_TIMEOUT, LISTEN_RE,
                         SOCKET_CLOSE_WAIT, START_TIMEOUT, STOP_TIMEOUT, test_pki, TLS)
from harness.waits import fd_count, fd_list
from harness.clients import Client, close_all_clients


# --------------------------------------------------------------------------
# What another user runs or reads

def copy_for_others(path, where):
    """A copy of path (a program, a file or a folder of the tree) in the
    directory where, readable by all, runnable by all where path is: a test
    that runs a build's binary or reads the tree as another user (nobody)
    hands it the copy, for the clone may sit where only its owner gets in
    (root's home, 0700).  where must be crossable by that user; the copy's
    path is returned."""
    dst = os.path.join(where, os.path.basename(path.rstrip("/")))
    if os.path.isdir(path):
        shutil.copytree(path, dst, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy(path, dst)
    for d, _, files in os.walk(dst) if os.path.isdir(dst) else [(where, [], [dst])]:
        if d != where:
            os.chmod(d, 0o755)
        for f in files:
            f = os.path.join(d, f)
            os.chmod(f, 0o755 if os.stat(f).st_mode & 0o100 else 0o644)
    return dst


@contextlib.contextmanager
def copies_for_others(*paths):
    """copy_for_others of each path into a fresh directory of /tmp (0755),
    removed after; yields the copies' paths in order."""
    top = tempfile.mkdtemp(prefix="gatling-others-")
    os.chmod(top, 0o755)
    try:
        yield [copy_for_others(p, top) for p in paths]
    finally:
        shutil.rmtree(top, ignore_errors=True)


# --------------------------------------------------------------------------
# Builds

class Build:
    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(BUILD_DIR, name)
        self.binary = os.path.join(self.dir, "gatling")
        # "epoll-san" is the epoll backend with sanitizers, "epoll-noh3" without
        # HTTP/3 (make H3=0), "epoll-san-noh3" both; "epoll-tsan" with
        # ThreadSanitizer (make TSAN=1), "epoll-cov" with gcov's counters
        # (make coverage)
        base = name[:-5] if name.endswith("-noh3") else name
        self.tsan = base.endswith("-tsan")
        self.coverage = base.endswith("-cov")
        self.sanitized = base.endswith("-san")
        self.backend = base.rsplit("-", 1)[0] if (
            self.tsan or self.coverage or self.sanitized) else base

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


def once_build():
    """The build a test that runs once (whichever pass asks) runs on: make check
    runs a pass per build at once, each naming only its own, so this looks at
    what is built: epoll where it is, else the first built that is not a
    sanitizer build."""
    built = BUILDS
    if os.path.isdir(BUILD_DIR):
        built = sorted(n for n in os.listdir(BUILD_DIR)
                       if os.access(os.path.join(BUILD_DIR, n, "gatling"), os.X_OK)) or BUILDS
    plain = [b for b in built if not b.endswith(("-san", "-tsan", "-cov"))]
    return "epoll" if "epoll" in plain else (plain[0] if plain else None)


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


# --------------------------------------------------------------------------
# Running servers

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


def said(srv, rest):
    """Everything a starting server wrote on stderr: the whole lines already
    taken into its errlog, then the unfinished rest (the lines were once left
    out, and a start that failed looked silent)."""
    return "\n".join(srv.errlog + [rest.decode(errors="replace")]).strip("\n")


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
    if build.tsan:  # a race is reported on stderr (ALARMING) and the server goes on
        e.setdefault("TSAN_OPTIONS", "halt_on_error=0:second_deadlock_stop=1")
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
                                                                 said(srv, buf)))
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            proc.wait()
            raise AssertionError("%s exited (status %s) before listening; stderr:\n%s"
                                 % (cmd, proc.returncode, said(srv, buf)))
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
