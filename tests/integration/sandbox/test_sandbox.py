"""--sandbox (issue 88, process/sandbox.c): the serving process's seccomp
filter and NoNewPrivs, seen from outside in /proc/PID/status (Seccomp: 2,
NoNewPrivs: 1; --sandbox off: 0 and 0); with -W, each worker filtered and
the supervisor not, and CGI still run (its spawner was forked before the
worker refused itself execve); the start's and --check's lines saying which
layers applied; a bad value refused.  On the code before, --sandbox was an
unknown option and no process had a filter."""
import os
import signal
import subprocess

from conftest import wait_for, gone, assert_status, fetch
from conftest import Mode


def status(pid):
    """/proc/PID/status's fields, by name."""
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def workers(pid, n):
    def kids():
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            k = [int(x) for x in f.read().split()]
        return len(k) >= n and k
    return wait_for(kids, 10, "%d workers" % n)


def filtering(pid):
    """pid's (Seccomp, NoNewPrivs, Seccomp_filters) from /proc (a kernel
    without the last line: "1", as one filter is all this server loads)."""
    st = status(pid)
    return (st["Seccomp"].strip(), st["NoNewPrivs"].strip(),
            st.get("Seccomp_filters", "1").strip())


def said(srv, text):
    return [line for line in srv.errlog if text in line]


def test_single_process_is_filtered(gatling):
    srv = gatling(args=("-T", "10", "--sandbox", "on"))
    assert_status(fetch(srv.port, "/f.txt"), 200, "sandboxed")
    assert filtering(srv.pid) == ("2", "1", "1")
    line = wait_for(lambda: said(srv, "sandbox (server):"), 5, "the sandbox's line")
    assert "seccomp deny-list" in line[0], srv.errlog


def test_default_is_on(gatling):
    srv = gatling(args=("-T", "10"))
    assert status(srv.pid)["Seccomp"].strip() == "2"


def test_an_upgrade_keeps_the_one_filter(gatling):
    """SIGUSR2: the new binary is executed by the filtered process and inherits
    its filter; it finds it there and stacks no second one (a long life of
    upgrades would otherwise grow the kernel's list until it refused)."""
    srv = gatling(args=("-T", "10", "--sandbox", "on"), check_fds=False)
    mark = len(srv.errlog)
    os.kill(srv.pid, signal.SIGUSR2)

    def new_pid():
        for line in srv.errlog[mark:]:
            if "binary upgrade: started pid" in line:
                return int(line.rsplit(" ", 1)[1])
        return None
    pid = wait_for(new_pid, 15, "the new process")
    try:
        wait_for(lambda: gone(srv.pid), 15, "the old process exiting")
        assert_status(fetch(srv.port, "/f.txt"), 200, "after the upgrade")
        assert filtering(pid) == ("2", "1", "1")
        wait_for(lambda: said(srv, "kept from the process before the upgrade"), 5, "its line")
    finally:
        for p in (srv.pid, pid):
            if p and not gone(p):
                os.kill(p, signal.SIGKILL)
        srv.process.wait()
        srv.join()
        srv.exit_checked = True


def test_off_leaves_the_process_alone(gatling):
    srv = gatling(args=("-T", "10", "--sandbox", "off"))
    assert_status(fetch(srv.port, "/f.txt"), 200, "not sandboxed")
    assert filtering(srv.pid)[:2] == ("0", "0")
    wait_for(lambda: said(srv, "sandbox: off"), 5, "the sandbox's line")


def test_workers_filtered_supervisor_not_cgi_runs(gatling):
    tree = {"f.txt": "hello\n",
            "cgi": {"hi.sh": Mode("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n"
                                  "from cgi\\n'\n", 0o755)}}
    srv = gatling(tree, args=("-T", "10", "-W", "2", "-w", r"\.sh$", "--sandbox", "on"),
                  check_fds=False)
    kids = workers(srv.pid, 2)
    assert status(srv.pid)["Seccomp"].strip() == "0", "the supervisor upgrades: not filtered"
    for k in kids:
        st = status(k)
        assert (st["Seccomp"].strip(), st["NoNewPrivs"].strip()) == ("2", "1"), (k, st)
    line = wait_for(lambda: said(srv, "sandbox (-W workers):"), 5, "the sandbox's line")
    assert "execve refused" in line[0] and "Landlock" in line[0], srv.errlog
    for _ in range(6):  # both workers, by SO_REUSEPORT's spread
        r = fetch(srv.port, "/cgi/hi.sh")
        assert_status(r, 200, "CGI from a sandboxed worker")
        assert b"from cgi" in r.body, r.body


def test_check_says_what_the_kernel_offers(build, tmp_path):
    p = subprocess.run([build.binary, "--check", "-c", str(tmp_path), "-W", "2"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "sandbox: seccomp deny-list" in p.stderr and "Landlock" in p.stderr, p.stderr
    p = subprocess.run([build.binary, "--check", "-c", str(tmp_path), "--sandbox", "off"],
                       capture_output=True, text=True, timeout=30)
    assert "sandbox: off" in p.stderr, p.stderr


def test_bad_value_refused(build, tmp_path):
    p = subprocess.run([build.binary, "-c", str(tmp_path), "--sandbox", "maybe"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--sandbox maybe: not on or off" in p.stderr, p.stderr
