"""Issue 52, findings 4 and 6: CGI programs cannot reach the server.  The
server (and the CGI spawner) are not dumpable, so a CGI program of the same
uid cannot read their memory or environment through /proc; --cgi-user runs
the programs under a uid of their own; each program gets rlimits
(--cgi-limits); and what a program leaves behind, even in a session of its
own (setsid), is killed when its request ends or times out."""

import os
import pwd
import random
import signal
import types

import pytest

from conftest import assert_status, copy_for_others, fetch, make_docroot, Mode, wait_for
from privtools import children, needs_root, open_dir, proc_status, running

HEAD = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n"

PEEK = HEAD + """for p in $(echo "$QUERY_STRING" | tr - ' ') $PPID; do
    if head -c 1 /proc/$p/environ >/dev/null 2>&1; then echo "read $p"; else echo "denied $p"; fi
done
"""

WHO = HEAD + "id -u\n"
LIMITS = HEAD + "cat /proc/self/limits\n"


def as_user(build, tmp_path, user):
    """build, started as user from the start (as the packaged unit does with
    User=gatling): setpriv in front of a copy of the binary that user can
    reach (the clone may not be: root's home), which it execs in place."""
    pw = pwd.getpwnam(user)
    binary = copy_for_others(build.binary, open_dir(tmp_path, "built"))
    wrap = os.path.join(open_dir(tmp_path, "bin"), "gatling-as")
    with open(wrap, "w") as f:
        f.write("#!/bin/sh\nexec setpriv --reuid=%d --regid=%d --clear-groups %s \"$@\"\n"
                % (pw.pw_uid, pw.pw_gid, binary))
    os.chmod(wrap, 0o755)
    return types.SimpleNamespace(**dict(vars(build), binary=wrap))


@needs_root
def test_cgi_cannot_read_the_server(build, tmp_path):
    from conftest import running_server
    root = make_docroot(open_dir(tmp_path, "www"), {"peek.cgi": Mode(PEEK, 0o755)})
    with running_server(as_user(build, tmp_path, "nobody"), root, ("-T", "10", "-z")) as s:
        assert proc_status(s.pid, "Uid")[0] == str(pwd.getpwnam("nobody").pw_uid)
        pids = [s.pid] + [p for p, _ in children(s.pid)]  # the loop and the spawner
        r = fetch(s.port, "/peek.cgi?" + "-".join(map(str, pids)))
        assert_status(r, 200)
        lines = r.body.decode().split()
        assert len(lines) == 2 * (len(pids) + 1), r.body
        assert "read" not in lines, "a CGI of the server's uid read its /proc: %r" % r.body


@needs_root
@pytest.mark.parametrize("workers", [1, 2])
def test_cgi_user(gatling, tmp_path, workers):
    try:
        cgi = pwd.getpwnam("www-data")  # Debian's base-passwd has it
    except KeyError:
        pytest.skip("no user www-data to run CGI as")
    root = make_docroot(open_dir(tmp_path, "www"), {"who.cgi": Mode(WHO, 0o755),
                                                    "peek.cgi": Mode(PEEK, 0o755)})
    s = gatling(docroot=root, args=("-T", "10", "-z", "-u", "nobody", "--cgi-user", "www-data",
                                    "-W", str(workers)))
    for _ in range(2 * workers):
        r = fetch(s.port, "/who.cgi")
        assert_status(r, 200)
        assert r.body.strip() == str(cgi.pw_uid).encode(), r.body
    r = fetch(s.port, "/peek.cgi?%d" % s.pid)
    assert b"denied %d" % s.pid in r.body, r.body
    def spawner_uids():  # a worker's spawner confines itself while the worker goes on
        loops = [s.pid] if workers == 1 else [p for p, _ in children(s.pid)]
        return sorted(uid for loop in loops for _, uid in children(loop))
    wait_for(lambda: spawner_uids() == [cgi.pw_uid] * workers, 10,
             "the spawners running as www-data (%r)" % spawner_uids())


@needs_root
@pytest.mark.parametrize("user,why", [("root", "is root"), ("nobody", "-u's user")])
def test_cgi_user_refused(build, user, why):
    import subprocess
    r = subprocess.run([build.binary, "-p", "0", "-z", "-u", "nobody", "--cgi-user", user],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and why in r.stderr, r.stderr


def sleepers(tag):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    if f.read().split(b"\0")[:2] == [b"sleep", tag.encode()]:
                        out.append(int(p))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("how", ["ends", "times out"])
def test_setsid_grandchild_killed(gatling, how):
    tag = str(random.randint(100000, 999999))
    # the grandchild has left the program's session before the program ends
    script = HEAD + ("setsid sleep %s </dev/null >/dev/null 2>&1 &\n" % tag) + \
        "while [ \"$(cut -d' ' -f6 /proc/$!/stat)\" = $$ ]; do sleep 0.01; done\n" + \
        ("echo started\n" if how == "ends" else "echo started; exec sleep 30\n")
    s = gatling({"fork.cgi": Mode(script, 0o755)}, args=("-T", "10", "-z", "-Q", "2"))
    try:
        try:
            r = fetch(s.port, "/fork.cgi")
            assert b"started" in r.body, r
        except ConnectionError:  # -Q: cut short after the head, as it should
            assert how == "times out"
        left = wait_for(lambda: not sleepers(tag) or None, 10,
                        "the setsid grandchild killed at the request's end")
        assert left
    finally:
        for p in sleepers(tag):
            os.kill(p, signal.SIGKILL)


ESCAPE_C = r"""
#include <stdio.h>
#include <unistd.h>
int main(void)
{
    pid_t p = fork();
    if (p == 0) {
        setsid();
        close(0), close(1), close(2);
        for (;;)
            pause();
    }
    printf("Content-Type: text/plain\r\n\r\n%d\n", (int)p);
    return 0;
}
"""


@needs_root
def test_setsid_grandchild_killed_in_chroot_with_workers(gatling, build, tmp_path):
    """-W 2 -c as root: each worker's spawner starts in the chroot, which
    hides /proc; the keeper still finds the escaped grandchild."""
    import subprocess
    src = tmp_path / "escape.c"
    src.write_text(ESCAPE_C)
    r = subprocess.run(["cc", "-static", "-O", "-o", str(tmp_path / "escape"), str(src)],
                       capture_output=True, timeout=120)
    if r.returncode:
        pytest.skip("cannot build a static program: %s" % r.stderr.decode()[-300:])
    jail = make_docroot(open_dir(tmp_path, "jail"),
                        {"escape": Mode((tmp_path / "escape").read_bytes(), 0o755)})
    env = {"ASAN_OPTIONS": "abort_on_error=0:detect_leaks=0"} if build.sanitized else None
    s = gatling(docroot=str(tmp_path), env=env,
                args=("-T", "10", "-z", "-c", jail, "-u", "nobody", "-W", "2"))
    left = []
    try:
        for _ in range(4):
            r = fetch(s.port, "/escape")
            assert_status(r, 200)
            left.append(int(r.body.split()[-1]))
        wait_for(lambda: not [p for p in left if running(p)] or None, 10,
                 "the setsid grandchildren killed at the requests' end")
    finally:
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def limits_of(body):
    out = {}
    for line in body.decode().splitlines()[1:]:
        name = line[:26].strip()
        soft, hard = line[26:].split()[:2]
        out[name] = (soft, hard)
    return out


@pytest.mark.parametrize("args,want", [
    ((), {"Max cpu time": ("60", "61"), "Max address space": ("1073741824",) * 2,
          "Max processes": ("256",) * 2, "Max open files": ("1024",) * 2}),
    (("--cgi-limits", "cpu=5,mem=512M,procs=64,files=100"),
     {"Max cpu time": ("5", "6"), "Max address space": ("536870912",) * 2,
      "Max processes": ("64",) * 2, "Max open files": ("100",) * 2})])
def test_cgi_rlimits(gatling, args, want):
    s = gatling({"limits.cgi": Mode(LIMITS, 0o755)}, args=("-T", "10", "-z") + args)
    r = fetch(s.port, "/limits.cgi")
    assert_status(r, 200)
    got = limits_of(r.body)
    assert {k: got.get(k) for k in want} == want, r.body.decode()


def test_dead_spawner_takes_its_programs(gatling):
    """A spawner killed (a program of its user may do it, under --cgi-user)
    leaves no program running and no keeper waiting for an end that cannot
    come."""
    import socket
    tag = str(random.randint(100000, 999999))
    script = HEAD + "echo started\nexec sleep %s\n" % tag
    s = gatling({"slow.cgi": Mode(script, 0o755)}, args=("-T", "10", "-z", "-Q", "60"),
                check_fds=False)
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    try:
        c.sendall(b"GET /slow.cgi HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_for(lambda: sleepers(tag) or None, 10, "the program running")
        (spawner,) = [p for p, _ in children(s.pid)]
        keepers = [p for p, _ in children(spawner)]
        os.kill(spawner, signal.SIGKILL)
        wait_for(lambda: not sleepers(tag) and not [p for p in keepers if running(p)] or None,
                 10, "the program and its keeper gone with the spawner")
    finally:
        c.close()
        for p in sleepers(tag):
            os.kill(p, signal.SIGKILL)
