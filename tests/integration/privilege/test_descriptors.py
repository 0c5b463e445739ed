"""Issue 52, finding 6: descriptors that outlive their purpose.  After the
chroot (-c as root) no process of the server holds a directory outside the
new root (fchdir or openat("..") on it would leave the jail); the logs
reopened on SIGUSR1 stay close-on-exec (dup2 clears the flag, and the log
then leaked into an upgraded binary and anything else it execs); a CGI
program inherits nothing but its three pipes."""

import os
import signal
import time

from conftest import fetch, make_docroot, assert_status, Mode, wait_for
from privtools import children, needs_root, open_dir

O_CLOEXEC = 0o2000000


def fd_targets(pid):
    out = {}
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            out[int(f)] = os.readlink("/proc/%d/fd/%s" % (pid, f))
        except OSError:
            pass
    return out


def fd_flags(pid, fd):
    with open("/proc/%d/fdinfo/%d" % (pid, fd)) as f:
        for line in f:
            if line.startswith("flags:"):
                return int(line.split()[1], 8)
    raise AssertionError("no flags for fd %d of %d" % (fd, pid))


def outside_dirs(pid, jail):
    """Directories pid holds open outside jail (its own root)."""
    bad = []
    for fd, target in fd_targets(pid).items():
        p = "/proc/%d/fd/%d" % (pid, fd)
        if target.startswith("/") and os.path.isdir(p) and \
                not (target + "/").startswith(jail.rstrip("/") + "/"):
            bad.append((fd, target))
    return bad


@needs_root
def test_no_directory_outside_the_chroot(gatling, build, tmp_path):
    jail = make_docroot(open_dir(tmp_path, "jail"), {"f.txt": b"in the jail\n"})
    # LeakSanitizer reads /proc at exit, which a chroot hides
    env = {"ASAN_OPTIONS": "abort_on_error=0:detect_leaks=0"} if build.sanitized else None
    for extra in ((), ("-W", "2")):
        s = gatling({"cwd.txt": b"the start directory\n"}, env=env,
                    args=("-T", "10", "-c", jail, "-u", "nobody") + extra)
        assert_status(fetch(s.port, "/f.txt"), 200)
        procs = [s.pid] + [p for p, _ in children(s.pid)]
        for pid in procs:
            assert os.readlink("/proc/%d/root" % pid) == jail
            assert outside_dirs(pid, jail) == [], (
                "pid %d (of %s, -c %s %s) holds a directory outside its root"
                % (pid, procs, jail, " ".join(extra)))


def test_reopened_logs_stay_close_on_exec(gatling, tmp_path):
    log, err = tmp_path / "access.log", tmp_path / "error.log"
    for extra in ((), ("-W", "2")):
        s = gatling(args=("-T", "10", "-l", str(log), "-q", str(err)) + extra)
        assert_status(fetch(s.port, "/f.txt"), 200)
        os.rename(log, str(log) + ".1")
        os.rename(err, str(err) + ".1")
        s.send_signal(signal.SIGUSR1)
        wait_for(lambda: log.exists() and err.exists(), 10, "the logs reopened")
        time.sleep(0.2)
        procs = [s.pid] + [p for p, _ in children(s.pid)]
        seen = 0
        for pid in procs:
            for fd, target in fd_targets(pid).items():
                if target in (str(log), str(err)):
                    seen += 1
                    assert fd_flags(pid, fd) & O_CLOEXEC, (
                        "pid %d: fd %d on %s lost close-on-exec in the reopen%s"
                        % (pid, fd, target, " (-W 2)" if extra else ""))
        assert seen >= 2, "the logs are not open: %r" % [fd_targets(p) for p in procs]
        s.stop()
        s.exit_checked = True


FDS_CGI = """#!/bin/sh
printf 'Content-Type: text/plain\\r\\n\\r\\n'
ls /proc/$$/fd
"""


def test_cgi_inherits_only_its_pipes(gatling):
    s = gatling({"fds.cgi": Mode(FDS_CGI, 0o755)}, args=("-T", "10", "-z", "-l", "/dev/null"))
    r = fetch(s.port, "/fds.cgi")
    assert_status(r, 200)
    # ls itself opens the directory it lists (one more descriptor, 3)
    fds = sorted(int(x) for x in r.body.split())
    assert fds[:3] == [0, 1, 2] and len(fds) <= 4, fds
