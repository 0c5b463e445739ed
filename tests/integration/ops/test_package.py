"""What an admin installs: make install / uninstall, the Debian package (built,
lintian-checked, installed, serving, purged), the systemd units and the
logrotate file.  Run once, not per backend: they install the plain build."""
import contextlib
import grp
import os
import re
import pwd
import shutil
import signal
import subprocess
import time

import pytest

from conftest import ROOT, free_port, recv_to_eof

EXPECTED = sorted("""etc/default/gatling
etc/gatling/gatling.conf
etc/logrotate.d/gatling
usr/lib/gatling/bench
usr/lib/gatling/httpbench
usr/lib/gatling/kb-socket
usr/lib/gatling/kb-bind
usr/lib/gatling/kb-accept
usr/lib/gatling/kb-fork
usr/lib/gatling/kb-fork-static
usr/lib/gatling/kb-thread
usr/lib/gatling/kb-mmap
usr/lib/gatling/kb-manymap
usr/lib/gatling/kb-stream
usr/share/man/man1/kb-socket.1
usr/share/man/man1/kb-bind.1
usr/share/man/man1/kb-accept.1
usr/share/man/man1/kb-fork.1
usr/share/man/man1/kb-fork-static.1
usr/share/man/man1/kb-thread.1
usr/share/man/man1/kb-mmap.1
usr/share/man/man1/kb-manymap.1
usr/share/man/man1/kb-stream.1
usr/share/man/man1/kbench.1
usr/lib/systemd/system/gatling.service
usr/lib/systemd/system/gatling.socket
usr/lib/sysusers.d/gatling.conf
usr/lib/tmpfiles.d/gatling.conf
usr/sbin/gatling
usr/share/gatling/www/docs/index.html
usr/share/gatling/www/hello.txt
usr/share/gatling/www/index.html
usr/share/gatling/www/style.css
usr/share/man/man1/bench.1
usr/share/man/man1/httpbench.1
usr/share/man/man8/gatling.8""".split())


def files_under(d):
    out = []
    for dirpath, _, names in os.walk(d):
        out += [os.path.relpath(os.path.join(dirpath, n), d) for n in names]
    return sorted(out)


def make(*args):
    return subprocess.run(["make", "--no-print-directory", "-C", ROOT] + list(args),
                          capture_output=True, text=True, timeout=600)


def fd_targets(pid):
    """What process pid's descriptors name (/proc/PID/fd links)."""
    out = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return out
    for fd in fds:
        try:
            out.add(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return out


def http_get(port, path="/"):
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % path.encode())
        return recv_to_eof(s)


def test_make_install_and_uninstall(tmp_path):
    dest = str(tmp_path / "stage")
    r = make("install", "DESTDIR=" + dest, "PREFIX=/usr")
    assert r.returncode == 0, r.stdout + r.stderr
    assert files_under(dest) == EXPECTED
    assert os.access(os.path.join(dest, "usr/sbin/gatling"), os.X_OK)
    with open(os.path.join(dest, "usr/lib/systemd/system/gatling.service")) as f:
        unit = f.read()
    conf = "--config /etc/gatling/gatling.conf $GATLING_OPTIONS"
    assert "ExecStart=/usr/sbin/gatling " + conf in unit and "@" not in unit.replace(
        "@system-service", ""), unit
    # a reload checks first, then upgrades and waits (systemd runs ExecReload= lines in order)
    assert unit.index("ExecReload=/usr/sbin/gatling --check " + conf) < \
        unit.index("ExecReload=/usr/sbin/gatling --reload $MAINPID"), unit
    with open(os.path.join(dest, "etc/gatling/gatling.conf")) as f:
        opts = f.read()
    # no @PLACEHOLDER@ left by make install (an e-mail address in a comment is no such thing)
    assert '-c /usr/share/gatling/www' in opts and not re.search(r"@[A-Z_]+@", opts), opts
    # the installed binary runs
    r = subprocess.run([os.path.join(dest, "usr/sbin/gatling"), "-V"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0 and "gatling" in r.stdout + r.stderr
    # another prefix moves everything but /etc
    dest2 = str(tmp_path / "stage2")
    r = make("install", "DESTDIR=" + dest2, "PREFIX=/opt/g")
    assert r.returncode == 0, r.stderr
    assert "opt/g/sbin/gatling" in files_under(dest2)
    with open(os.path.join(dest2, "opt/g/lib/systemd/system/gatling.service")) as f:
        assert "ExecStart=/opt/g/sbin/gatling " in f.read()
    r = make("uninstall", "DESTDIR=" + dest, "PREFIX=/usr")
    assert r.returncode == 0, r.stderr
    assert files_under(dest) == [], files_under(dest)


def test_package_needs_http3_and_says_what_it_is():
    """debian/: the HTTP/3 libraries are Build-Depends and the build asks for
    HTTP/3 (H3=1), so a builder without them fails instead of making a
    package without it (issue 79); the description names HTTP/2 and HTTP/3."""
    with open(os.path.join(ROOT, "debian", "control")) as f:
        control = f.read()
    deps = re.search(r"(?ms)^Build-Depends:(.*?)^\S", control).group(1)
    for pkg in ("libngtcp2-dev", "libngtcp2-crypto-gnutls-dev", "libnghttp3-dev",
                "libgnutls28-dev", "pkg-config"):
        assert re.search(r"(^|[\s,])%s([\s,(]|$)" % re.escape(pkg), deps), (pkg, deps)
    assert "HTTP/3" in control and "HTTP/1.1 and HTTPS" not in control, control
    with open(os.path.join(ROOT, "debian", "rules")) as f:
        rules = f.read()
    assert "$(MAKE) IO=epoll H3=1 all" in rules and "$(MAKE) IO=epoll H3=1 install" in rules


def test_make_install_keeps_the_admins_config(tmp_path):
    """/etc/default/gatling and the logrotate file are the admin's: a second
    make install keeps an edited one, make uninstall removes only an
    unchanged one."""
    dest = str(tmp_path / "stage")
    assert make("install", "DESTDIR=" + dest, "PREFIX=/usr").returncode == 0
    opts = os.path.join(dest, "etc/default/gatling")
    with open(opts, "a") as f:
        f.write('GATLING_OPTIONS="-c /srv/www"\n')
    with open(opts) as f:
        edited = f.read()
    r = make("install", "DESTDIR=" + dest, "PREFIX=/usr")
    assert r.returncode == 0, r.stderr
    assert "%s exists: kept" % opts in r.stdout, r.stdout
    with open(opts) as f:
        assert f.read() == edited
    r = make("uninstall", "DESTDIR=" + dest, "PREFIX=/usr")
    assert r.returncode == 0, r.stderr
    assert "%s was changed: kept" % opts in r.stdout, r.stdout
    assert files_under(dest) == ["etc/default/gatling"], files_under(dest)


@pytest.mark.skipif(not shutil.which("systemd-sysusers"),
                    reason="systemd-sysusers (Debian: systemd) is not installed")
def test_sysusers_file_makes_the_user_of_the_unit(tmp_path):
    """dist/gatling.sysusers, applied to an empty root, makes the user and the
    group that gatling.service names in User= and Group=."""
    (tmp_path / "etc").mkdir()
    r = subprocess.run(["systemd-sysusers", "--root=" + str(tmp_path),
                        os.path.join(ROOT, "dist", "gatling.sysusers")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    passwd = (tmp_path / "etc" / "passwd").read_text().split(":")
    assert passwd[0] == "gatling" and passwd[5] == "/nonexistent", passwd
    assert (tmp_path / "etc" / "group").read_text().startswith("gatling:")
    with open(os.path.join(ROOT, "dist", "gatling.service.in")) as f:
        unit = f.read()
    assert "User=gatling\n" in unit and "Group=gatling\n" in unit


@pytest.mark.skipif(not shutil.which("systemd-sysusers") or not shutil.which("systemd-tmpfiles"),
                    reason="systemd-sysusers and systemd-tmpfiles (Debian: systemd) needed")
def test_tmpfiles_file_makes_the_pid_files_directory(tmp_path):
    """dist/gatling.tmpfiles (issue 79 item 8.10), applied to a root with the
    sysusers file's user: /run/gatling, gatling's, 0755, the directory of
    gatling.conf's --pid-file, for gatling run without systemd's
    RuntimeDirectory=; make install puts it in tmpfiles.d."""
    (tmp_path / "etc").mkdir()
    # group adm as Debian's base-passwd makes it on every machine (the logs'
    # directory below is its)
    (tmp_path / "etc" / "group").write_text("adm:x:4:\n")
    for tool, f in (("systemd-sysusers", "gatling.sysusers"),
                    ("systemd-tmpfiles", "gatling.tmpfiles")):
        r = subprocess.run([tool, "--root=" + str(tmp_path)] +
                           (["--create"] if tool == "systemd-tmpfiles" else []) +
                           [os.path.join(ROOT, "dist", f)], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, (tool, r.stderr)
    st = os.stat(tmp_path / "run" / "gatling")
    uid = int((tmp_path / "etc" / "passwd").read_text().split(":")[2])
    assert st.st_uid == uid and st.st_gid == uid and (st.st_mode & 0o7777) == 0o755, st
    st = os.stat(tmp_path / "var" / "log" / "gatling")
    assert st.st_uid == uid and st.st_gid == 4 and (st.st_mode & 0o7777) == 0o2750, st
    with open(os.path.join(ROOT, "dist", "gatling.conf")) as f:
        assert "--pid-file /run/gatling/gatling.pid" in f.read()


@pytest.mark.skipif(not shutil.which("logrotate"), reason="logrotate is not installed")
def test_logrotate_file_rotates_and_gatling_reopens(tmp_path):
    """dist/gatling.logrotate with the paths of this test and the signal sent to
    this test's gatling: after a rotation the old lines are in access.log.1 and
    new ones go to a new access.log; both are group adm's 0640 (Debian's
    convention, issue 90) in a directory made as the package makes its own,
    set-group-ID adm (this user's group when not root)."""
    logs = tmp_path / "log"
    logs.mkdir()
    group = grp.getgrnam("adm") if os.geteuid() == 0 else grp.getgrgid(os.getgid())
    os.chown(logs, -1, group.gr_gid)
    os.chmod(logs, 0o2750)
    www = tmp_path / "www"
    www.mkdir()
    (www / "f.txt").write_text("x\n")
    os.chmod(www / "f.txt", 0o644)
    port = free_port()
    binary = os.path.join(ROOT, "gatling", "gatling")
    if not os.access(binary, os.X_OK):
        r = make("all")
        assert r.returncode == 0, r.stderr
    p = subprocess.Popen([binary, "-i", "127.0.0.1", "-p", str(port), "-l",
                          str(logs / "access.log"), "-q", str(logs / "error.log"), "-H"],
                         cwd=str(www), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(150):
            if os.path.exists(logs / "error.log") and b"listening" in (logs / "error.log").read_bytes():
                break
            time.sleep(0.1)
        assert http_get(port, "/f.txt").startswith(b"HTTP/1.1 200")
        # the access log is flushed once per loop round, after the answer: an
        # empty log would not be rotated (notifempty)
        for _ in range(100):
            if b"GET /f.txt " in (logs / "access.log").read_bytes():
                break
            time.sleep(0.1)
        with open(os.path.join(ROOT, "dist", "gatling.logrotate")) as f:
            conf = f.read()
        conf = conf.replace("/var/log/gatling/", str(logs) + "/")
        # the owner and mode gatling gives a log it makes: the same after a rotation
        me = "%s %s" % (pwd.getpwuid(os.getuid()).pw_name, group.gr_name)
        assert "\tcreate 0640 gatling adm\n" in conf
        conf = conf.replace("create 0640 gatling adm", "create 0640 " + me)
        assert "\tsu gatling adm\n" in conf
        conf = conf.replace("su gatling adm", "su " + me)
        # the pid file first (gatling started by hand has no MainPID), the unit's else
        assert "cat /run/gatling/gatling.pid" in conf and "MainPID" in conf
        (tmp_path / "gatling.pid").write_text("%d\n" % p.pid)
        conf = conf.replace("/run/gatling/gatling.pid", str(tmp_path / "gatling.pid"))
        (tmp_path / "rotate.conf").write_text(conf)
        r = subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "state"),
                            str(tmp_path / "rotate.conf")], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        # the reopen (postrotate's SIGUSR1) done: no descriptor on the moved file
        # (looked for, not a fixed 0.3 s: a busy machine may run the handler later)
        moved = str(logs / "access.log.1")
        for _ in range(100):
            if moved not in fd_targets(p.pid):
                break
            time.sleep(0.1)
        assert moved not in fd_targets(p.pid), "gatling still writes the rotated log"
        assert http_get(port, "/f.txt?after").startswith(b"HTTP/1.1 200")
        for _ in range(100):  # the access log is flushed once per loop round
            if (logs / "access.log").exists() and b"?after" in (logs / "access.log").read_bytes():
                break
            time.sleep(0.1)
        old = (logs / "access.log.1").read_text()
        new = (logs / "access.log").read_text()
        assert "GET /f.txt " in old and "?after" not in old, old
        assert "?after" in new and "GET /f.txt " not in new, new
        for log in ("access.log", "access.log.1", "error.log"):
            st = os.stat(logs / log)
            assert (st.st_gid, st.st_mode & 0o7777) == (group.gr_gid, 0o640), (log, st)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(5) == 0


def get_once_listening(port, path="/", timeout=15):
    """http_get(), retried while the port refuses connections (whoever
    listens may not have bound it yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return http_get(port, path)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def runtime_directory():
    """/run/gatling as gatling.service's RuntimeDirectory= makes it (gatling's,
    0755), for the unit's command run here without systemd: gatling.conf's
    --pid-file is in it."""
    pw = pwd.getpwnam("gatling")
    os.makedirs("/run/gatling", exist_ok=True)
    os.chown("/run/gatling", pw.pw_uid, pw.pw_gid)
    os.chmod("/run/gatling", 0o755)


def package_installed():
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "gatling"], capture_output=True,
                       text=True)
    return "installed" in r.stdout


def need(*tools):
    """Skip, naming them, when tools the test needs are missing."""
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip("not installed: %s (sh tests/setup.sh installs them)" % " ".join(missing))


# The package is built and installed once for the tests below, which run in
# file order; the last one purges it (and the fixture does, if it did not run).

@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("installing a package needs root")
    need("dpkg-buildpackage", "dh", "git")
    if package_installed():
        pytest.skip("a gatling package is installed: not touched")
    tmp_path = tmp_path_factory.mktemp("deb")
    src = tmp_path / "gatling"
    src.mkdir()
    # the tree as git sees it (tracked and new files), without build products
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if f.startswith("build/") or not os.path.isfile(os.path.join(ROOT, f)):
            continue
        os.makedirs(os.path.dirname(str(src / f)) or ".", exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), str(src / f))
    r = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=str(src),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = [f for f in os.listdir(tmp_path) if f.startswith("gatling_") and f.endswith(".deb")]
    assert len(debs) == 1, os.listdir(tmp_path)
    return str(tmp_path / debs[0])


ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")


def user_or_group(name):
    """Whether a user or a group NAME exists."""
    for get in (pwd.getpwnam, grp.getgrnam):
        with contextlib.suppress(KeyError):
            return bool(get(name))
    return False


@pytest.fixture(scope="module")
def installed(deb):
    """The package installed (dpkg -i), then purged, and what the purge keeps
    by Debian's rule (the gatling user and group its postinst made: files it
    owned elsewhere must not change hands) removed too when this test made
    them, so that no later test or run finds a user only this one made (issue
    91: test_readme.py's --check passed only where this test had run before)."""
    had_user = user_or_group("gatling")
    r = subprocess.run(["dpkg", "-i", deb], capture_output=True, text=True, timeout=300, env=ENV)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        yield deb
    finally:
        if package_installed():
            subprocess.run(["dpkg", "--purge", "gatling"], capture_output=True, timeout=300,
                           env=ENV)
        shutil.rmtree("/run/gatling", ignore_errors=True)  # runtime_directory()'s
        if not had_user:
            subprocess.run(["userdel", "gatling"], capture_output=True, timeout=60)
            if user_or_group("gatling"):  # a group userdel left (USERGROUPS_ENAB no)
                subprocess.run(["groupdel", "gatling"], capture_output=True, timeout=60)
            assert not user_or_group("gatling"), "the package's user or group is left"


def test_package_is_lintian_clean(deb):
    need("lintian")
    r = subprocess.run(["lintian", deb], capture_output=True, text=True, timeout=300)
    bad = [l for l in r.stdout.splitlines() if l[:2] in ("E:", "W:")]
    assert not bad, r.stdout


def test_package_installs_the_tree_and_the_user(installed):
    assert subprocess.run(["id", "gatling"], capture_output=True).returncode == 0
    for f in ("/usr/sbin/gatling", "/lib/systemd/system/gatling.service",
              "/lib/systemd/system/gatling.socket", "/etc/default/gatling",
              "/etc/gatling/gatling.conf",
              "/etc/logrotate.d/gatling", "/usr/share/man/man8/gatling.8.gz",
              "/usr/lib/gatling/bench", "/usr/lib/gatling/httpbench",
              "/usr/lib/sysusers.d/gatling.conf", "/usr/lib/tmpfiles.d/gatling.conf"):
        assert os.path.exists(f), f
    if shutil.which("systemd-tmpfiles"):  # dh_installtmpfiles' postinst applies the entry
        st, pw = os.stat("/run/gatling"), pwd.getpwnam("gatling")
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (pw.pw_uid, pw.pw_gid, 0o755), st
    # the logs' directory: group adm reads what gatling writes there (issue 90)
    st, pw = os.stat("/var/log/gatling"), pwd.getpwnam("gatling")
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == \
        (pw.pw_uid, grp.getgrnam("adm").gr_gid, 0o2750), st


def test_installed_check_passes_as_root(installed):
    """Issue 79: the README's `gatling --check --config /etc/gatling/gatling.conf`
    as root on the package's own file: exit 0 (-u gatling: the logs are judged
    as gatling opens them), no word of -u, no chroot note, no bench tool in
    /usr/bin."""
    r = subprocess.run(["/usr/sbin/gatling", "--check", "--config", "/etc/gatling/gatling.conf"],
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode == 0 and "configuration is good" in r.stderr, r.stderr
    assert "give -u" not in r.stderr and "chroot" not in r.stderr, r.stderr
    for name in ("bench", "httpbench", "kb-accept", "kb-bind", "kb-fork", "kb-mmap"):
        assert not os.path.exists("/usr/bin/" + name), name


def test_installed_logrotate_file_parses(installed):
    """Its su line names the user the package made (logrotate -d: no rotation)."""
    need("logrotate")
    r = subprocess.run(["logrotate", "-d", "/etc/logrotate.d/gatling"], capture_output=True,
                       text=True, timeout=30)
    # (not the word alone: error.log is named once root's --check has made it)
    assert r.returncode == 0 and not re.search(r"(?im)^error", r.stderr), r.stderr


def test_package_stops_the_units_on_removal_and_reloads_on_upgrade(installed):
    """Without systemd running here, the maintainer scripts are read: prerm
    stops both units on remove only, postinst reloads (the binary upgrade) a
    running service on upgrade and never starts or enables anything."""
    with open("/var/lib/dpkg/info/gatling.prerm") as f:
        prerm = f.read()
    assert 'if [ "$1" = remove ]' in prerm and \
        "deb-systemd-invoke stop gatling.socket gatling.service" in prerm, prerm
    with open("/var/lib/dpkg/info/gatling.postinst") as f:
        postinst = f.read()
    assert "deb-systemd-invoke try-reload-or-restart gatling.service" in postinst, postinst
    for never in ("deb-systemd-invoke start", "deb-systemd-invoke restart",
                  "deb-systemd-invoke try-restart"):
        assert never not in postinst, (never, postinst)
    assert not os.path.exists("/var/lib/dpkg/info/gatling.preinst") or \
        "stop" not in open("/var/lib/dpkg/info/gatling.preinst").read()


def test_installed_units_verify(installed):
    need("systemd-analyze")
    r = subprocess.run(["systemd-analyze", "verify", "/lib/systemd/system/gatling.service",
                        "/lib/systemd/system/gatling.socket"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def test_installed_package_serves_socket_activated_and_upgrades(installed):
    """The installed binary with the unit's options (/etc/gatling/gatling.conf and
    /etc/default/gatling's GATLING_OPTIONS), as the user
    gatling, handed its socket by systemd-socket-activate (what gatling.socket
    does), then upgraded with SIGUSR2 (what `systemctl reload` does) under a
    continuous load: zero errors, and the access log in /var/log/gatling."""
    need("systemd-socket-activate", "setpriv")
    import json
    import re
    import shlex
    with open("/etc/default/gatling") as f:
        opts = ["--config", "/etc/gatling/gatling.conf"] + shlex.split(
            re.search(r'GATLING_OPTIONS="([^"]*)"', f.read()).group(1))
    port = free_port()
    runtime_directory()
    cmd = ["setpriv", "--reuid=gatling", "--regid=gatling", "--clear-groups",
           "systemd-socket-activate", "-l", "127.0.0.1:%d" % port, "/usr/sbin/gatling"] + opts
    p = subprocess.Popen(cmd, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pids = []
    try:
        resp = get_once_listening(port, "/")
        assert resp.startswith(b"HTTP/1.1 200") and b"gatling" in resp, resp[:300]
        pids.append(p.pid)
        load = subprocess.Popen(["/usr/lib/gatling/bench", "-q", "-J", "-d", "3", "-c", "20",
                                 "-k",
                                 "http://127.0.0.1:%d/hello.txt" % port],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        os.kill(p.pid, signal.SIGUSR2)
        out, _ = load.communicate(timeout=30)
        res = json.loads(out)
        assert res["errors_total"] == 0 and res["responses"] > 100, res
        time.sleep(0.5)
        assert p.poll() == 0, "the old process drained and exited 0"
        with open("/var/log/gatling/error.log") as f:
            err = f.read()
        m = re.findall(r"binary upgrade: pid (\d+) serves", err)
        assert m, err
        pids.append(int(m[-1]))
        st = os.stat("/proc/%d" % pids[-1])
        assert st.st_uid != 0, "the new process runs as gatling"
        assert http_get(port, "/hello.txt").startswith(b"HTTP/1.1 200")
        with open("/var/log/gatling/access.log") as f:
            assert "GET /hello.txt" in f.read()
    finally:
        for pid in pids[1:]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if p.poll() is None:
            p.kill()
        p.wait()
        time.sleep(0.5)


def unit_argv(line, opts):
    """An Exec line of the unit as argv, $GATLING_OPTIONS replaced by the words of
    opts (systemd splits an unquoted $VAR at whitespace)."""
    import shlex
    out = []
    for w in line.split():
        out += shlex.split(opts) if w == "$GATLING_OPTIONS" else [w]
    return out


def test_upgrade_keeps_an_old_default_files_options(installed):
    """/etc/default/gatling with options in GATLING_OPTIONS, as an older package's
    edited file has them, then the package installed over it (what an upgrade
    does to a conffile the admin changed: kept): the file is as the admin left
    it, the unit's ExecReload check passes, and its ExecStart serves with those
    options, which win over /etc/gatling/gatling.conf's (-c and -p here)."""
    need("setpriv")
    import tempfile
    site = tempfile.mkdtemp(prefix="gatling-old-site-")
    os.chmod(site, 0o755)
    with open(os.path.join(site, "hello.txt"), "w") as f:
        f.write("the old site\n")
    os.chmod(os.path.join(site, "hello.txt"), 0o644)
    port = free_port()
    opts = "-c %s -p %d -n -i 127.0.0.1" % (site, port)
    with open("/etc/default/gatling") as f:
        shipped = f.read()
    p = new = None
    try:
        with open("/etc/default/gatling", "w") as f:
            f.write('# the admin\'s, from before gatling.conf\nGATLING_OPTIONS="%s"\n' % opts)
        r = subprocess.run(["dpkg", "-i", "--force-confold", installed], capture_output=True,
                           text=True, timeout=300, env=ENV)
        assert r.returncode == 0, r.stdout + r.stderr
        with open("/etc/default/gatling") as f:
            assert opts in f.read(), "the admin's file was replaced"
        with open("/lib/systemd/system/gatling.service") as f:
            unit = f.read()
        start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1)
        check = re.search(r"^ExecReload=(.*--check.*)$", unit, re.M).group(1)
        runtime_directory()
        user = ["setpriv", "--reuid=gatling", "--regid=gatling", "--clear-groups"]
        r = subprocess.run(user + unit_argv(check, opts), capture_output=True, text=True,
                           timeout=30, cwd="/")
        assert r.returncode == 0, r.stderr
        p = subprocess.Popen(user + unit_argv(start, opts), cwd="/", stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        resp = get_once_listening(port, "/hello.txt")
        assert resp.startswith(b"HTTP/1.1 200") and b"the old site" in resp, resp[:300]
        # the unit's other ExecReload, as the user too: the upgrade, waited for
        cmd = re.search(r"^ExecReload=(.*--reload.*)$", unit, re.M).group(1)
        r = subprocess.run(user + cmd.replace("$MAINPID", str(p.pid)).split(),
                           capture_output=True, text=True, timeout=90, cwd="/")
        assert r.returncode == 0 and "serves; this one (pid %d) drains" % p.pid in r.stdout, r
        new = int(re.search(r"pid (\d+) serves", r.stdout).group(1))
    finally:
        if new:
            os.kill(new, signal.SIGTERM)
        if p:
            p.send_signal(signal.SIGTERM)
            p.wait(10)
        with open("/etc/default/gatling", "w") as f:
            f.write(shipped)
        shutil.rmtree(site, ignore_errors=True)


def test_installed_binary_serves_as_the_gatling_user(installed):
    # -u: started as root, serving as the gatling user
    port = free_port()
    p = subprocess.Popen(["/usr/sbin/gatling", "-i", "127.0.0.1", "-p", str(port), "-n",
                          "-c", "/usr/share/gatling/www", "-u", "gatling"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        lines = []  # -c as root: the chroot's note comes first (advise.c)
        while not lines or "listening on" not in lines[-1] and lines[-1] and len(lines) < 8:
            lines.append(p.stderr.readline().decode())
        assert "listening on 127.0.0.1 port %d" % port in lines[-1], lines
        resp = http_get(port, "/")
        assert resp.startswith(b"HTTP/1.1 200") and b"gatling" in resp, resp[:300]
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(5) == 0


def test_package_purges_cleanly(installed):  # last: the others need the package
    r = subprocess.run(["dpkg", "--purge", "gatling"], capture_output=True, text=True,
                       timeout=300, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ("/usr/sbin/gatling", "/etc/default/gatling", "/etc/gatling/gatling.conf",
              "/etc/logrotate.d/gatling",
              "/var/log/gatling", "/lib/systemd/system/gatling.service",
              "/usr/lib/sysusers.d/gatling.conf", "/usr/lib/tmpfiles.d/gatling.conf"):
        assert not os.path.exists(f), "%s is left after the purge" % f
