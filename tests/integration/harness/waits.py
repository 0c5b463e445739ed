"""Waiting without sleeping, and the machine's state: wait_for, tcp_listening,
gone, the socket tables (settle) and a fresh source address for cost tests
(best_of), free ports, reading a socket to its end, descriptor counts."""

import contextlib
import os
import signal
import socket
import time


# --------------------------------------------------------------------------
# Tests that measure cost or time

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


_HANDED = []  # the last ports free_port gave in this process (at most _HANDED_MAX)
_HANDED_MAX = 4096  # a sixth of the range: any picks made together are in it
_TAKEN_S = 120  # across processes: a port another test process took this long ago is not free


def _take_across_processes(port):
    """Mark port as handed out for every test process of this machine (make
    check's passes run side by side, and a second check or make coverage may
    run beside them): a port another process handed out in the last
    _TAKEN_S seconds is refused, as its program may not have bound it yet
    (Pebble found its ACME port taken so, in make coverage beside make
    check-all).  One marker file per port, read and written under one lock."""
    import fcntl
    import tempfile
    d = os.path.join(tempfile.gettempdir(), "gatling-test-ports")
    try:
        os.makedirs(d, mode=0o1777, exist_ok=True)
        with open(os.path.join(d, "lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            marker = os.path.join(d, str(port))
            try:
                if time.time() - os.stat(marker).st_mtime < _TAKEN_S:
                    return False
            except FileNotFoundError:
                pass
            with open(marker, "w"):
                pass
            os.utime(marker)
            return True
    except PermissionError:  # a test running as another user: this process's list only
        return True


def free_port(udp=False):
    """A loopback TCP port (with udp, its UDP twin free too: HTTP/3) to hand to
    another program that binds it itself (systemd-socket-activate, gatling -p
    N, Pebble).  Taken below the ephemeral range: a port bind(0) chose would
    be free only until the next connect() of any test running beside this one
    picked it as a source port.  Never one of the last _HANDED_MAX it gave in
    this process: ports asked for together are bound later, so each is still
    free at the next pick (Pebble's DNS and ACME ports came out the same once,
    and its ACME listener found the port taken); nor one another test process
    took in the last _TAKEN_S seconds."""
    import random
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randint(10000, max(low - 1, 10001))
        if port in _HANDED:
            continue
        with socket.socket() as s, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            try:
                s.bind(("127.0.0.1", port))
                if udp:
                    u.bind(("127.0.0.1", port))
            except OSError:
                continue
            if not _take_across_processes(port):
                continue
            _HANDED.append(port)
            del _HANDED[:-_HANDED_MAX]
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


def wait_for(pred, timeout, what, step=0.05):
    """pred()'s first true value within timeout seconds (asked at least once),
    or an AssertionError naming what did not happen."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("%s: not within %.1f s" % (what, timeout))
        time.sleep(step)


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
    killed, with its children (a -W supervisor's workers, which a SIGKILLed
    supervisor would leave serving), and the first one, the fixture's child,
    reaped."""
    for p in pids:
        if gone(p):
            continue
        kids = []
        with contextlib.suppress(OSError):
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                kids = [int(k) for k in f.read().split()]
        for k in [p] + kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(k, signal.SIGKILL)
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
