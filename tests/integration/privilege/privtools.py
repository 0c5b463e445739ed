"""What the privilege modules share: root and a real unprivileged user
(nobody), a scratch tree others can cross, a gatling that may refuse to
start (so not the `gatling` fixture, which fails when it does), and a
process's children and shared mappings as /proc shows them."""
import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import Build, once_build, recv_to_eof

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="the privilege tests need root and a user to drop to")


def user():
    """nobody's passwd entry (the -u user, the attacker)."""
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody on this host")


def build():
    """The build the folder runs on: once_build()'s, or GATLING_PRIV_BUILD's
    (make coverage's: run-check --acme-once names its gcov build, whose
    counters would not see a plain build's runs)."""
    b = os.environ.get("GATLING_PRIV_BUILD") or once_build()
    if not b:
        pytest.skip("no gatling built")
    return Build(b)


@contextlib.contextmanager
def scratch():
    """A directory of root's that nobody may cross (pytest's own is root's
    alone, 0700), removed after."""
    base = tempfile.mkdtemp(prefix="gatling-priv-")
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def users_dir(path, mode=0o755):
    """A directory of nobody's (a log directory as debian/postinst makes it)."""
    os.mkdir(path, mode)
    os.chown(path, user().pw_uid, user().pw_gid)
    return path


def as_nobody(path):
    """What the attacker made is the attacker's (lchown: the link itself)."""
    os.lchown(path, user().pw_uid, user().pw_gid)


class Run:
    """A gatling that was started: its process, stderr lines, port (None if
    it exited before listening)."""

    def __init__(self, proc, lines, port):
        self.proc, self.lines, self.port = proc, lines, port

    def text(self):
        return "\n".join(self.lines)

    def get(self, path="/"):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
            return recv_to_eof(s)


@contextlib.contextmanager
def launch(args, cwd, timeout=15):
    """gatling -i 127.0.0.1 -p 0 ARGS in cwd: yields a Run once it listens or
    has exited; a start that does neither within timeout s (a FIFO's open
    waiting for a reader) fails the test.  Stopped after."""
    cmd = [build().binary, "-i", "127.0.0.1", "-p", "0"] + list(args)
    # LeakSanitizer cannot read /proc after -u or in a chroot (feature_helpers.no_leak_env)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
    lines, port = [], []

    def read():
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            m = re.search(r"listening on \S+ port (\d+)", line)
            if m and not port:
                port.append(int(m.group(1)))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while not port and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    run = Run(proc, lines, port[0] if port else None)
    try:
        if not port and proc.poll() is None:
            raise AssertionError("gatling neither listened nor exited in %d s (hung at start?):"
                                 "\n%s" % (timeout, run.text()))
        if not port:
            proc.wait()
            time.sleep(0.1)  # the reader's last lines
        yield run
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(5)
    bad = [l for l in lines if "Sanitizer" in l or "runtime error:" in l]
    assert not bad, "a sanitizer spoke:\n%s" % run.text()


def snapshot(v, contents=False):
    """Every name below v (v too) with its owner, group and mode (and, with
    contents, its size and mtime): compared before and after, what root
    changed there."""
    out = {}
    for d, dirs, files in os.walk(v):
        for n in [""] + dirs + files:
            p = os.path.join(d, n) if n else d
            st = os.lstat(p)
            out[p] = (st.st_uid, st.st_gid, st.st_mode) + (
                (st.st_size, st.st_mtime_ns) if contents else ())
    return out


def owner(path):
    return os.lstat(path).st_uid


def wait_until(pred, timeout=10):
    """pred()'s first true value within timeout s, or its last (false) one."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(0.05)


def open_dir(tmp_path, name):
    """A directory below tmp_path that nobody can reach: pytest's own are 0700
    (its ancestors too), so make them searchable by all."""
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    p = d
    while str(p) not in ("/", "/tmp"):
        os.chmod(p, os.stat(p).st_mode | stat.S_IXOTH | stat.S_IROTH)
        p = p.parent
    return str(d)


def proc_status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == key:
                return v.split()
    return None


def running(pid):
    """pid is a process that has not ended (not a zombie).  A process that
    ends while its status is read is not running: /proc's files of a dead
    task fail with ENOENT or ESRCH."""
    try:
        state = proc_status(pid, "State")
    except OSError:
        return False
    return bool(state) and state[0] != "Z"


def children(pid):
    """(pid, real uid) of pid's children."""
    out = []
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                for c in f.read().split():
                    try:
                        out.append((int(c), int(proc_status(int(c), "Uid")[0])))
                    except (OSError, TypeError):
                        pass
        except OSError:
            pass
    return out


def shared_mappings(pid):
    """[(start, end)] of pid's writable MAP_SHARED anonymous mappings."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[1] == "rw-s" and parts[5].startswith("/dev/zero"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi))
    return out
