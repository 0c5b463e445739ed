"""The logs as root opens them (issue 52, finding 1; nginx's CVE-2016-1247).

gatling runs as root with -u nobody; the log directory is nobody's, as
debian/postinst makes /var/log/gatling the gatling user's.  nobody, the
attacker, prepares it before a start, or before SIGUSR1:
  - access.log (-l) or error.log (-q) a symbolic link to a file in a
    directory of root's: nothing root's is created there (root made it, and
    then appended request lines to it);
  - access.log a hard link to a file of root's: the file is not written;
  - access.log a FIFO: the start does not hang (open(O_WRONLY) waited for a
    reader forever);
  - under -W, error.log swapped for a link before SIGUSR1: the supervisor,
    which stays root, does not follow it;
  - under -W with -c and a relative -q, SIGUSR1 reopens the log where it
    was, not inside the chroot (root made a file there that was then served).
Where gatling refuses a log, it says which and why, and exits 1.
"""
import os
import signal
import stat

import pytest

from privtools import as_nobody, launch, needs_root, scratch, user, users_dir, wait_until

pytestmark = needs_root


def refused_or_served(run, what):
    """gatling either refused the log (exit 1, naming it) or serves (a request
    makes a log line): either way, here, nothing of root's may have changed."""
    if run.port is None:
        assert run.proc.returncode == 1, run.text()
        assert what in run.text(), run.text()
    else:
        run.get("/")


@pytest.mark.parametrize("opt,log,target", [("-l", "access.log", "created-by-root"),
                                            ("-q", "error.log", "ld.so.preload")])
def test_log_symlink_to_roots_directory(opt, log, target):
    with scratch() as base:
        logs, victim = users_dir(base + "/logs"), base + "/root-only"
        os.mkdir(victim, 0o755)
        os.symlink(victim + "/" + target, logs + "/" + log)
        as_nobody(logs + "/" + log)
        with launch(["-u", "nobody", opt, logs + "/" + log], base) as run:
            refused_or_served(run, logs + "/" + log)
        assert not os.path.lexists(victim + "/" + target), "root followed the link"
        assert run.port is None and "symbolic link" in run.text(), run.text()


def test_access_log_hard_link_to_roots_file():
    with scratch() as base:
        logs = users_dir(base + "/logs")
        victim = base + "/shadow"
        with open(victim, "w") as f:
            f.write("root:x:0:\n")
        os.chmod(victim, 0o644)
        # what fs.protected_hardlinks=0 lets nobody do (root makes it here)
        os.link(victim, logs + "/access.log")
        with launch(["-u", "nobody", "-l", logs + "/access.log"], base) as run:
            refused_or_served(run, logs + "/access.log")
        with open(victim) as f:
            assert f.read() == "root:x:0:\n", "root appended request lines to root's file"
        assert run.port is None, run.text()


def test_access_log_fifo_does_not_hang_the_start():
    with scratch() as base:
        logs = users_dir(base + "/logs")
        os.mkfifo(logs + "/access.log", 0o644)
        as_nobody(logs + "/access.log")
        with launch(["-u", "nobody", "-l", logs + "/access.log"], base, timeout=10) as run:
            assert run.port is None and run.proc.returncode == 1, run.text()
            assert logs + "/access.log" in run.text(), run.text()


def test_log_in_users_directory_is_the_users():
    """The ordinary case still works: a new log in nobody's directory is
    made by nobody, 0640, and written."""
    with scratch() as base:
        logs = users_dir(base + "/logs")
        with launch(["-u", "nobody", "-l", logs + "/access.log", "-q", logs + "/error.log"],
                    base) as run:
            assert run.port, run.text()
            run.get("/")
            assert wait_until(lambda: os.path.getsize(logs + "/access.log") > 0)
        for name in ("access.log", "error.log"):
            st = os.stat(logs + "/" + name)
            assert st.st_uid == user().pw_uid and stat.S_IMODE(st.st_mode) == 0o640, (name, st)


def test_a_log_root_made_names_its_owner():
    """Issue 90: a log root made before (a --check or a start without -u, as
    root) in -u's directory, 0640 root's: the start with -u nobody cannot
    open it, and says whose it is and what to do, not a bare "Permission
    denied"."""
    with scratch() as base:
        logs = users_dir(base + "/logs")
        with open(logs + "/access.log", "w"):
            pass
        os.chmod(logs + "/access.log", 0o640)
        with launch(["-u", "nobody", "-l", logs + "/access.log"], base) as run:
            assert run.port is None and run.proc.returncode == 1, run.text()
            assert logs + "/access.log" in run.text(), run.text()
            assert "Permission denied: it belongs to uid 0 gid 0, mode 0640, and -u's user " \
                   "(uid %d) may not write it: chown it" % user().pw_uid in run.text(), run.text()


def test_no_user_refuses_a_directory_others_write():
    """Root with no -u to open it as: a log directory others can write is refused."""
    with scratch() as base:
        logs = users_dir(base + "/logs")
        with launch(["-l", logs + "/access.log"], base) as run:
            assert run.port is None and run.proc.returncode == 1, run.text()
            assert "written by others than root" in run.text(), run.text()
        assert not os.path.exists(logs + "/access.log")


def test_supervisor_reopen_does_not_follow_a_swapped_link():
    with scratch() as base:
        logs, victim = users_dir(base + "/logs"), base + "/root-only"
        os.mkdir(victim, 0o755)
        err = logs + "/error.log"
        with launch(["-W", "2", "-u", "nobody", "-q", err], base) as run:
            assert run.port, run.text()
            os.rename(err, logs + "/error.log.1")  # as logrotate, or nobody, would
            os.symlink(victim + "/by-root-at-usr1", err)
            as_nobody(err)
            run.proc.send_signal(signal.SIGUSR1)
            wait_until(lambda: os.path.lexists(victim + "/by-root-at-usr1") or
                       "reopening refused" in open(logs + "/error.log.1").read())
            assert not os.path.lexists(victim + "/by-root-at-usr1"), \
                "the root supervisor followed the link"
            assert "reopening refused" in open(logs + "/error.log.1").read()


def test_supervisor_reopen_stays_out_of_the_chroot():
    """-W, -c JAIL and -q error.log (relative to where gatling starts): SIGUSR1
    makes error.log again there, never JAIL/error.log (root's, then served)."""
    with scratch() as base:
        jail = base + "/jail"
        os.mkdir(jail, 0o755)
        with open(jail + "/index.html", "w") as f:
            f.write("jail\n")
        with launch(["-W", "2", "-u", "nobody", "-c", jail, "-q", "error.log"], base) as run:
            assert run.port, run.text()
            os.rename(base + "/error.log", base + "/error.log.1")
            run.proc.send_signal(signal.SIGUSR1)
            assert wait_until(lambda: os.path.exists(base + "/error.log") or
                              os.path.exists(jail + "/error.log")), "no reopen"
            assert not os.path.exists(jail + "/error.log"), "reopened inside the chroot"
            assert b" 404 " in run.get("/error.log").split(b"\r\n")[0] + b" "



def test_dev_stderr_is_the_descriptor_given():
    """-l /dev/stderr (a link in /dev, which the walk does not follow) is the
    descriptor gatling was started with, copied: a log collector reading its
    output gets the access log there (the first privilege fix refused it)."""
    with scratch() as base:
        with launch(["-l", "/dev/stderr"], base) as run:
            assert run.port, run.text()
            run.get("/stderr-probe")
            assert wait_until(lambda: "stderr-probe" in run.text()), run.text()
