"""gatling --reload as an attacker would meet it (issue 63, findings 2 and 4):
root's --reload aimed at a process named gatling that another user runs (the
pid pidof picks), at one of the server's own side processes, at a process of
root's own named gatling that is not this gatling; and the answer's socket
name squatted by nobody beforehand.  Each was reproduced on the code before:
the forged process answered "all is well", the side processes never answered
(70 s), the squatted name made --reload fail before it signalled."""
import os
import re
import shutil
import signal
import subprocess
import time

from conftest import copy_for_others
from privtools import build, children, launch, needs_root, open_dir, user, wait_until

pytestmark = needs_root


def as_nobody():
    """preexec_fn: the child becomes nobody (no supplementary groups)."""
    pw = user()
    os.setgroups([])
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


def reload(pid, timeout=30):
    """root's gatling --reload PID."""
    return subprocess.run([build().binary, "--reload", str(pid)], capture_output=True,
                          text=True, timeout=timeout)


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def test_a_gatling_of_another_user_is_not_signalled(tmp_path):
    """nobody's own gatling (the real binary, serving) and nobody's copy of
    sleep named gatling: root's --reload refuses both, exit 2, naming whose
    they are; neither gets the signal (the server starts no new process, the
    sleep is alive, where SIGUSR2 would end it).  nobody runs a copy of the
    build's binary: the clone may be where nobody cannot reach (root's home)."""
    www = open_dir(tmp_path, "www")
    with open(os.path.join(www, "f.txt"), "w") as f:
        f.write("x\n")
    binary = copy_for_others(build().binary, open_dir(tmp_path, "built"))
    stub = os.path.join(open_dir(tmp_path, "bin"), "gatling")
    shutil.copy("/bin/sleep", stub)
    os.chmod(stub, 0o755)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    srv = subprocess.Popen([binary, "-n", "-i", "127.0.0.1", "-p", "0"], cwd=www,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, preexec_fn=as_nobody, env=env)
    sleeper = subprocess.Popen([stub, "60"], preexec_fn=as_nobody)
    try:
        line = srv.stderr.readline()
        assert "listening on" in line, line
        for p in (srv.pid, sleeper.pid):
            assert comm(p) == "gatling"
            r = reload(p)
            assert r.returncode == 2, r
            assert "--reload %d: that gatling runs as nobody, you as root" % p in r.stderr, r
        time.sleep(0.5)  # a signal, had one gone, would have been acted on by now
        assert sleeper.poll() is None, "the sleep got SIGUSR2"
        assert srv.poll() is None and not children(srv.pid), "the server upgraded"
    finally:
        for p in (srv, sleeper):
            for k, _ in children(p.pid) if p.poll() is None else []:
                os.kill(k, signal.SIGKILL)  # a new process, had the server upgraded
            p.kill()
            p.wait()


def test_a_process_of_roots_named_gatling_that_is_not_this_gatling(tmp_path):
    """root's own copy of sleep named gatling: refused (exit 2, what it runs),
    not signalled."""
    stub = os.path.join(str(tmp_path), "gatling")
    shutil.copy("/bin/sleep", stub)
    os.chmod(stub, 0o755)
    sleeper = subprocess.Popen([stub, "60"])
    try:
        r = reload(sleeper.pid)
        assert r.returncode == 2, r
        assert "that process runs %s, not this gatling" % stub in r.stderr, r
        time.sleep(0.5)
        assert sleeper.poll() is None, "the sleep got SIGUSR2"
    finally:
        sleeper.kill()
        sleeper.wait()


FAKE = r"""
import ctypes, sys, time
libc = ctypes.CDLL(None)
libc.prctl(15, b"gatling", 0, 0, 0)  # PR_SET_NAME
libc.prctl(4, 0, 0, 0, 0)            # PR_SET_DUMPABLE 0: /proc/PID/exe closed to its user
print("ready", flush=True)
time.sleep(60)
"""


def test_a_process_whose_executable_cannot_be_compared_is_refused(tmp_path):
    """Issue 78, 6: nobody's non-dumpable process named gatling, and nobody's --reload of
    it: /proc/PID/exe cannot be read, so it cannot be told from gatling: refused (exit 2,
    saying why), not signalled (the check fell open: it got SIGUSR2 and, answering on the
    socket whose name the signal carried, could make --reload say all is well)."""
    # a directory nobody reaches (its ancestors made searchable by open_dir): it
    # relied on an earlier test of the module having opened pytest's base
    binary = copy_for_others(build().binary, open_dir(tmp_path, "bin"))
    fake = subprocess.Popen(["python3", "-c", FAKE], stdout=subprocess.PIPE, text=True,
                            preexec_fn=as_nobody)
    try:
        assert fake.stdout.readline().strip() == "ready"
        assert comm(fake.pid) == "gatling"
        r = subprocess.run([binary, "--reload", str(fake.pid)], capture_output=True, text=True,
                           timeout=30, preexec_fn=as_nobody)
        assert r.returncode == 2, r
        assert "executable cannot be compared" in r.stderr and "PIDFILE" in r.stderr, r
        time.sleep(0.5)
        assert fake.poll() is None, "the fake got SIGUSR2"
    finally:
        fake.kill()
        fake.wait()


def test_its_own_user_reloads_a_server_that_is_not_dumpable(tmp_path):
    """The unit's ExecReload (User=gatling): the server is never dumpable, so its
    own user cannot read /proc/PID/exe; --reload asks it which executable it runs
    (SIGWINCH, answered as SIGUSR2 is) and reloads it (exit 0, the new pid serves).
    The command of another copy of the binary is refused, naming what the server
    runs, and the server does not upgrade.  (The check that fell closed refused
    every such reload: ops/test_package.py's ExecReload found it.)"""
    www = open_dir(tmp_path, "www")
    with open(os.path.join(www, "f.txt"), "w") as f:
        f.write("x\n")
    binary = copy_for_others(build().binary, open_dir(tmp_path, "built"))
    other = copy_for_others(build().binary, open_dir(tmp_path, "other"))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    srv = subprocess.Popen([binary, "-n", "-i", "127.0.0.1", "-p", "0"], cwd=www,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, preexec_fn=as_nobody, env=env)
    new = None
    try:
        line = srv.stderr.readline()
        assert "listening on" in line, line
        r = subprocess.run([other, "--reload", str(srv.pid)], capture_output=True, text=True,
                           timeout=30, preexec_fn=as_nobody, env=env)
        assert r.returncode == 2 and "that process runs %s, not this gatling" % binary \
            in r.stderr, r
        time.sleep(0.5)
        assert srv.poll() is None and not children(srv.pid), "the server upgraded"
        r = subprocess.run([binary, "--reload", str(srv.pid)], capture_output=True, text=True,
                           timeout=90, preexec_fn=as_nobody, env=env)
        assert r.returncode == 0 and "this one (pid %d) drains" % srv.pid in r.stdout, r
        new = int(re.search(r"pid (\d+) serves", r.stdout).group(1))
        assert srv.wait(30) == 0
    finally:
        if new:
            os.kill(new, signal.SIGKILL)
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def test_root_reloads_by_pid_a_server_it_started_with_u(tmp_path):
    """Issue 90: root started the server with -u nobody (it runs as nobody)
    and types its pid: --reload takes it, as it takes the pid file's path
    (the server says root started it; the executable is compared as ever):
    exit 0, the new process serves and the old one drains.  nobody's own
    server stays refused (test_a_gatling_of_another_user_is_not_signalled)."""
    www = open_dir(tmp_path, "www")
    with open(os.path.join(www, "f.txt"), "w") as f:
        f.write("x\n")
    binary = copy_for_others(build().binary, open_dir(tmp_path, "built"))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    srv = subprocess.Popen([binary, "-n", "-u", "nobody", "-i", "127.0.0.1", "-p", "0"],
                           cwd=www, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, env=env)
    new = None
    try:
        line = srv.stderr.readline()
        assert "listening on" in line, line
        with open("/proc/%d/status" % srv.pid) as f:
            assert re.search(r"^Uid:\s+%d\s" % user().pw_uid, f.read(), re.M)
        r = subprocess.run([binary, "--reload", str(srv.pid)], capture_output=True, text=True,
                           timeout=90, env=env)
        assert r.returncode == 0 and "this one (pid %d) drains" % srv.pid in r.stdout, r
        new = int(re.search(r"pid (\d+) serves", r.stdout).group(1))
        assert srv.wait(30) == 0
    finally:
        if new:
            os.kill(new, signal.SIGKILL)
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def test_side_processes_are_refused(tmp_path):
    """The CGI spawner (-z) and a -W worker, the pids pidof -s may pick: each
    refused at once, exit 2, saying what it is and its server's pid (they
    ignore SIGUSR2, and --reload waited 70 s for an answer)."""
    www = open_dir(tmp_path, "www")
    for args, name, what in ((("-n", "-z"), "gatling-cgi", "its CGI spawner"),
                             (("-n", "-W", "2"), "gatling-worker", "one of -W's workers")):
        with launch(args, www) as run:
            assert run.port, run.text()
            kids = wait_until(lambda: [p for p, _ in children(run.proc.pid)
                                       if comm(p) == name])
            assert kids, (name, children(run.proc.pid))
            r = reload(kids[0], timeout=20)
            assert r.returncode == 2, r
            assert "that process is %s (%s), not the server" % (what, name) in r.stderr, r
            assert "its parent is pid %d" % run.proc.pid in r.stderr, r


SQUAT = r"""
import socket, sys
held = []
for pid in range(int(sys.argv[1]), int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("\0gatling-reload.%d" % pid)
        s.listen(1)
        held.append(s)
    except OSError:
        s.close()
print(len(held), flush=True)
sys.stdin.read()
"""


def test_a_squatted_answer_socket_does_not_stop_the_reload(tmp_path):
    """nobody binds "@gatling-reload.<pid>" for the next 400 pids before
    root's --reload starts: the reload still signals and succeeds (exit 0,
    the new process serves), the answer coming on a name no one could guess."""
    www = open_dir(tmp_path, "www")
    with launch(("-n",), www) as run:
        assert run.port, run.text()
        for _ in range(3):
            with open("/proc/sys/kernel/ns_last_pid") as f:
                lo = int(f.read()) + 1
            squat = subprocess.Popen(["python3", "-c", SQUAT, str(lo), str(lo + 400)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=as_nobody, cwd="/")
            try:
                assert int(squat.stdout.readline()) > 300
                p = subprocess.Popen([build().binary, "--reload", str(run.proc.pid)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                out, err = p.communicate(timeout=90)
            finally:
                squat.stdin.close()
                squat.wait(10)
            if lo <= p.pid < lo + 400:
                break
        else:
            raise AssertionError("the --reload's pid was never in the squatted range")
        new = re.search(r"pid (\d+) serves; this one \(pid %d\) drains" % run.proc.pid, out)
        if new:  # the new process is not launch()'s to stop
            os.kill(int(new.group(1)), signal.SIGTERM)
        assert p.returncode == 0, (out, err)
        assert new, out
