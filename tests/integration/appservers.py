"""The application servers the proxy tests run behind gatling's -P: Debian's
gunicorn (a WSGI application the test writes) and php-fpm (a master process
of its own, with its own configuration), each started in a session of its own
so that a test can stop or kill it with its workers.  test_proxy.py,
test_cache.py and test_pool.py share them."""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading

import pytest

from conftest import wait_for


class _Served(socket.socket):
    """A listener serve() accepts on: its close() ends the accepting thread first.
    A plain close() raced it: the thread, between taking the descriptor's number
    and its accept() (descheduled there on a loaded machine), accepted later on
    whatever socket the number was given to next -- another test's backend's
    listener, whose requests then went to this backend (make check-all met an
    HTTP request at an SCGI backend of an earlier module)."""

    _thread = None
    _stopping = False

    def close(self):
        if self._thread is not None and self.fileno() >= 0:
            self._stopping = True
            try:
                self.shutdown(socket.SHUT_RDWR)  # wakes an accept(): EINVAL
            except OSError:
                pass
            if self._thread is not threading.current_thread():
                self._thread.join(5)
        super().close()


def listener(family=socket.AF_INET, backlog=16):
    """A socket listening on loopback (127.0.0.1 or ::1), on a port the kernel picks
    (a _Served, whose close() ends serve()'s thread first)."""
    lst = _Served(family)
    lst.bind(("127.0.0.1", 0) if family == socket.AF_INET else ("::1", 0))
    lst.listen(backlog)
    return lst


def serve(lst, handle, threaded=False):
    """Accept on the listening socket lst until it is closed, calling handle(conn) for
    each connection, in a thread of its own when threaded; in a daemon thread: a backend
    written in the test itself."""
    def run():
        while True:
            try:
                c, _ = lst.accept()
            except OSError:
                return
            if isinstance(lst, _Served) and lst._stopping:
                c.close()
                return
            if threaded:
                threading.Thread(target=handle, args=(c,), daemon=True).start()
            else:
                handle(c)
    t = threading.Thread(target=run, daemon=True)
    if isinstance(lst, _Served):
        lst._thread = t
    t.start()
    return lst


def read_head(c):
    """What a backend's connection c brings up to and with a request head's
    blank line (what came after it too); None when the peer closed first."""
    got = b""
    while b"\r\n\r\n" not in got:
        data = c.recv(65536)
        if not data:
            return None
        got += data
    return got


def wait_port(port, timeout=15.0):
    def up():
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    wait_for(up, timeout, "a backend on port %d" % port)


def group_gone(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def stop(proc, sig=signal.SIGTERM):
    """Stop proc's session (the master and its workers): sig, then SIGKILL
    after 5 s; returns when none of them is left (a worker still alive
    would hold the listening socket)."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if not group_gone(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
        wait_for(lambda: group_gone(proc.pid), 10, "the workers of %d gone" % proc.pid)


def kill(proc):
    """SIGKILL to the master and its workers at once: the application dies
    as a crash would, its requests in flight cut."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_for(lambda: group_gone(proc.pid), 10, "the workers of %d gone" % proc.pid)


def gunicorn(d, port, app="app:application", threads=8, keepalive=60, env=None, wait=True):
    """gunicorn serving d/app.py on 127.0.0.1:port (one worker process; the
    gthread worker, which keeps connections: the sync one closes each).
    threads=None: gunicorn's default thread count; keepalive=None: its
    default.  env: more environment for the application."""
    exe = shutil.which("gunicorn")
    if not exe:
        pytest.fail("gunicorn is not installed: run sh tests/setup.sh as root")
    args = [exe, "-b", "127.0.0.1:%d" % port, "-w", "1", "-k", "gthread"]
    if threads:
        args += ["--threads", str(threads)]
    if keepalive:
        args += ["--keep-alive", str(keepalive)]
    proc = subprocess.Popen(args + ["--chdir", str(d), app], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=dict(os.environ, **(env or {})))
    if wait:
        try:
            wait_port(port)
        except BaseException:
            stop(proc)
            raise
    return proc


def php_fpm_exe():
    exe = shutil.which("php-fpm8.2") or shutil.which("php-fpm")
    if not exe:
        pytest.fail("php-fpm is not installed: run sh tests/setup.sh as root")
    return exe


def php_fpm(d, listen=None, pool="pm = static\npm.max_children = 2\n", name="www"):
    """A php-fpm master of its own with d/fpm.conf: one pool `name` listening
    on listen (a unix socket path, or a TCP port on 127.0.0.1; default
    d/fpm.sock) with the pool lines given (pm settings, ping.path, env[...],
    access.log...).  Returns the process once it listens."""
    d = str(d)
    listen = listen or os.path.join(d, "fpm.sock")
    where = "127.0.0.1:%d" % listen if isinstance(listen, int) else listen
    with open(os.path.join(d, "fpm.conf"), "w") as f:
        f.write("[global]\npid = %s/fpm.pid\nerror_log = %s/fpm.log\ndaemonize = no\n"
                "[%s]\nlisten = %s\ncatch_workers_output = yes\n%s"
                % (d, d, name, where, pool))
    if not isinstance(listen, int) and os.path.exists(listen):
        os.unlink(listen)  # a killed master's: waited for below, it would be there at once
    args = [php_fpm_exe(), "-y", os.path.join(d, "fpm.conf"), "-F"]
    if os.geteuid() == 0:
        args.append("-R")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if isinstance(listen, int):
            wait_port(listen)
        else:
            wait_for(lambda: os.path.exists(listen), 15, "php-fpm's socket")
    except BaseException:
        stop(proc)
        raise
    return proc


@contextlib.contextmanager
def php_fpm_running(d, pool="pm = static\npm.max_children = 2\n"):
    """php_fpm(d, pool=pool) on d/fpm.sock for a with block (a module's fixture):
    the socket's path; the master stopped after."""
    proc = php_fpm(d, pool=pool)
    try:
        yield os.path.join(str(d), "fpm.sock")
    finally:
        stop(proc)
