"""The options file (--config), --check, and the reload (SIGUSR2) that reads the
file again: an edit applied under load with no failed request, a broken edit
that changes nothing (issue 56)."""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from appservers import listener, serve
from conftest import ALARMING, ROOT, end_upgrades, free_port, gone, own_user, wait_for
from conftest import (first_backend_only, http_only, assert_status, fetch, make_docroot,
                      running_server, start_server)
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
from test_production import bench_bg, bench_result, new_pid


# What does not depend on the loop: parsing and the start-up's checks; the
# HTTP/3 reload's sockets are the same descriptors on every backend (as
# test_h3_workers' upgrades)
ABOVE_IO = ("test_check_names_each_problem",
            "test_check_says_every_problem_and_the_start_fails_as_it_says",
            "test_the_file_named_by_config_is_refused", "test_options_file_escapes_and_forms",
            "test_check_passes_the_shipped_file", "test_reload_under_h3_load")


@pytest.fixture(autouse=True)
def above_io(request):
    first_backend_only(request, ABOVE_IO, "options and checks above io/: on the first backend")


# Plain passes only: the options, the checks and the upgrade are the same over
# any scheme, and the tests speak HTTPS, h2c and HTTP/3 themselves where they
# need them
pytestmark = http_only


def check(build, *args, cwd=None):
    """gatling --check ARGS: (exit status, stderr)."""
    r = subprocess.run([build.binary, "--check"] + list(args), capture_output=True, text=True,
                       timeout=30, cwd=cwd)
    return r.returncode, r.stderr


def write(path, text):
    with open(str(path), "w") as f:
        f.write(text)
    return str(path)


def test_options_file_quotes_comments_relative_paths_and_the_command_line_wins(build, tmp_path):
    """-M from the file is overridden by the command line's; -l "a dir/x.log" is a
    quoted relative path, made relative to the file's directory (not the
    start directory); # comments and a joined line are read as such."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "file\n"})
    etc = tmp_path / "etc"
    (etc / "a dir").mkdir(parents=True)
    conf = write(etc / "g.conf", "# a comment -M 1\n"
                                 "-M 60 -k /health   # two options, a comment\n"
                                 "-l \"a dir/access.log\" \\\n   -I 'home page.html'\n")
    with running_server(build, root, ("--config", conf, "-M", "120")) as srv:
        r = fetch(srv.port, "/f.txt")
        assert_status(r, 200)
        assert r.header("cache-control") == "max-age=120", r.headers
        assert fetch(srv.port, "/health").body == b"ok\n"
    with open(str(etc / "a dir" / "access.log")) as f:
        assert "GET /f.txt" in f.read()


def test_options_file_escapes_and_forms(build, tmp_path):
    """What CONFIGURATION FILE allows, each seen to take effect: \\" and \\\\
    in double quotes, a backslash before a plain character, a line joined
    inside a word, an attached value (-lFILE, relative to the file, not to
    the start directory) and --opt=value, a last line without its newline
    ending in a comment."""
    etc = tmp_path / "etc"
    etc.mkdir()
    make_docroot(str(tmp_path / "www"), {"f.txt": "f\n",
                                         "d/the \"home\" p\\ge.html": "home\n"})
    write(etc / "g.conf", '-s 5\n'
                          '-I "the \\"home\\" p\\\\ge.html" -k /he\\alth\n'
                          '-M\\\n77 -laccess.log --log-format=json -T 10  # no newline')
    p = subprocess.Popen([build.binary, "--config", "../etc/g.conf", "-i", "127.0.0.1", "-p",
                          "0", "-E"], cwd=str(tmp_path / "www"), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        said = ""
        for line in p.stderr:  # to the listening line, or EOF if it failed
            said += line
            if "listening on" in line:
                break
        m = re.search(r"listening on \S+ port (\d+)", said)
        assert m, said
        port = int(m.group(1))
        r = fetch(port, "/d/")
        assert_status(r, 200, "-I's quoted name with \\\" and \\\\")
        assert r.body == b"home\n" and r.header("cache-control") == "max-age=77", r
        assert fetch(port, "/health").body == b"ok\n", "-k /he\\alth is /health"
    finally:
        p.send_signal(signal.SIGTERM)
        rest = p.stderr.read()
        p.stderr.close()
        assert p.wait(15) == 0, rest
    assert not [a for a in ALARMING if a in said + rest], said + rest
    import json
    with open(str(etc / "access.log")) as f:  # -laccess.log: beside the file
        lines = [json.loads(l) for l in f]
    assert [l["request"] for l in lines] == ["GET /d/ HTTP/1.1", "GET /health HTTP/1.1"], lines


# (command line, what stderr says); {tmp}: the test's directory, which holds
# a directory d, a FIFO fifo and good.conf
CONFIG_ARGS = [
    (("--config", "{tmp}/none.conf"), "--config {tmp}/none.conf: No such file or directory"),
    (("--config", "{tmp}/d"), "--config {tmp}/d: not a regular file"),
    (("--config", "{tmp}/fifo"), "--config {tmp}/fifo: not a regular file"),  # hung
    (("--config",), "--config needs a file"),
    (("--config=",), "--config needs a file"),
    (("--config={tmp}/good.conf", "--config", ""), "--config needs a file"),
]


@pytest.mark.parametrize("args,says", CONFIG_ARGS, ids=[str(i) for i in range(len(CONFIG_ARGS))])
def test_the_file_named_by_config_is_refused(build, tmp_path, args, says):
    """--config with no file, a missing one, a directory or a FIFO (which the
    start waited on for ever): exit 2 naming it, with --check and without;
    --config=FILE alone is taken."""
    (tmp_path / "d").mkdir()
    os.mkfifo(str(tmp_path / "fifo"))
    write(tmp_path / "good.conf", "-n -T 5\n")
    args = [a.format(tmp=tmp_path) for a in args]
    says = "gatling: " + says.format(tmp=tmp_path)
    rc, err = check(build, *args, cwd=str(tmp_path))
    assert rc == 2 and err.startswith(says), err
    r = subprocess.run([build.binary, "-i", "127.0.0.1", "-p", "0"] + args, capture_output=True,
                       text=True, timeout=30, cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stderr.startswith(says), r.stderr
    rc, err = check(build, "--config=good.conf", cwd=str(tmp_path))  # in the start directory
    assert rc == 0, err


# (file's text, what the message must say); each file is etc/bad.conf
BAD = [
    ("-T 5\n--no-such-option\n-n\n", r"bad\.conf:2: unknown long option"),
    ("-Z\n-q\n", r"bad\.conf:2: -q at the file's end without its value"),
    ("-j 0\n", r"bad\.conf:1: -j 0: not a thread count"),
    ("-T x\n", r"bad\.conf:1: -T x: not a timeout"),
    ("-p 70000\n", r"bad\.conf:1: -p 70000: not a port"),
    ("-W 0\n", r"bad\.conf:1: -W 0: not a worker count"),
    ("\n\n-c missing-dir\n", r"-c .*missing-dir: No such file or directory"),
    ("-w 'a('\n", r"bad\.conf:1: -w a\(: not a POSIX extended regular expression"),
    ("-P '127.0.0.1/80/(x'\n", r"bad\.conf:1: -P .*: the pattern is empty, not a POSIX"),
    ("-P 'nohost'\n", r"bad\.conf:1: -P nohost"),
    ("--pool 'a=file:/nonexistent/list' -P '@a/^/x/'\n", r"--pool a: /nonexistent/list: No such"),
    ("--pool 'a=file:%(etc)s/pool.list' -P '@a/^/x/'\n", r"pool\.list line 2: the backend is not"),
    ("--pool 'a=file:%(etc)s/certs' -P '@a/^/x/'\n", r"--pool a: .*/certs: not a regular file"),
    ("-i 300.1.1.1\n", r"bad\.conf:1: -i 300\.1\.1\.1: not an IPv4"),
    ("-m /nonexistent/mime.types\n", r"MIME types from /nonexistent/mime\.types"),
    ("-C %(etc)s/certs -e 0\n", r"server\.pem: no certificate"),
    ("-k nohealth\n", r"bad\.conf:1: -k nohealth: not a path"),
    ("--cache 1\n", r"bad\.conf:1: --cache 1: not mem"),
    ("-y http\n", r"-y needs -Y"),
    ("--log-format xml\n", r"bad\.conf:1: --log-format xml: not combined or json"),
    ("-T 5 stray\n", r"bad\.conf:1: 'stray' is not an option"),
    ("-I 'unclosed\n", r"bad\.conf:1: a ' is not closed"),
    ("--config other.conf\n", r"bad\.conf:1: --config in an options file"),
    ("-u no-such-user-here\n", r"-u no-such-user-here: no such user"),
    ("-l /nonexistent/dir/access.log\n", r"/nonexistent/dir/access\.log"),
    ("--h3-retry sometimes\n", r"bad\.conf:1: --h3-retry sometimes"),
    ("", r"d/\.dictionary:2: not a rule"),
    ("-I \"open\n", r'bad\.conf:1: a " is not closed on its line'),
    ("-T 5\n-M 5 \\", r"bad\.conf:2: a \\ at the end of the file"),
    ("-T 5\n-n\n-M 5 \0 -n\n", r"bad\.conf:3: a NUL byte in the file"),
    ("-n " * 4097, r"bad\.conf:1: more than 4096 words in the file"),
    ("#" * (1 << 20) + "\n", r"--config .*bad\.conf: File too large"),
    ("-n\n--log-format\n", r"bad\.conf:2: --log-format at the file's end without its value"),
    ("-n\n--bogus-last\n", r"bad\.conf:2: unknown long option --bogus-last"),
    ("-n\n-%\n", r"bad\.conf:2: unknown option -%"),
    ("-n -I ''\n", r"bad\.conf:1: -I : not a plain file name"),
    ("-l ''\n", r"bad\.conf:1: -l : not a usable file name"),
    # another module's message, then the line it came from
    ("-n\n--acme not-an-address\n", r"--acme not-an-address: not an email address(.|\n)*"
                                    r"bad\.conf:2: the option above"),
    ("--cluster etcd=ftp://x\n", r"--cluster etcd=ftp://x: not etcd=URL(.|\n)*"
                                  r"bad\.conf:1: the option above"),
    # --acme's option checks refused, --check goes on to its state directory:
    # this crashed (a NULL directory name)
    ("--acme a@gatling.test --acme-dir=acme --acme-names '*.gatling.test'\n",
     r"--acme-names \*\.gatling\.test: DNS-01 needs --acme-dns-server"),
    ("--acme a@gatling.test --acme-dir acme -E\n", r"which -E turns off"),
    ("-n\n--cluster-name n1\n", r"--cluster-name without --cluster etcd=URL"),
    ("-m %(etc)s\n", r"-m: cannot read MIME types from .*etc: not a regular file"),
    ("", r"e/\.dictionary: cannot be read"),
]


@pytest.mark.parametrize("text,want", BAD, ids=[str(i) for i in range(len(BAD))])
def test_check_names_each_problem(build, tmp_path, text, want):
    """--check on a bad file: exit 2, and a message naming the option or the file
    and line; what the start-up reads (certificates, pool lists, .dictionary)
    included."""
    etc = tmp_path / "etc"
    (etc / "certs").mkdir(parents=True)
    write(etc / "certs" / "server.pem", "not a certificate\n")
    write(etc / "pool.list", "127.0.0.1/8080\nnot a backend at all\n")
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n", "d/a.txt": "a\n",
                        "d/.dictionary": "a.txt\nb.txt bogus=1\n" if not text else "a.txt\n"})
    if "e/" in want:  # a directory where the file is: read() fails
        os.makedirs(os.path.join(root, "e", ".dictionary"))
    conf = write(etc / "bad.conf", text % {"etc": str(etc)} if "%(" in text else text)
    rc, err = check(build, "--config", conf, cwd=root)
    assert rc == 2, (rc, err)
    assert re.search(want, err), err


def test_check_says_every_problem_and_the_start_fails_as_it_says(build, tmp_path):
    """Three bad lines: --check names all three; gatling without --check stops
    at the first, with the same message, exit 2."""
    conf = write(tmp_path / "g.conf", "-T x\n-W 99\n-w 'b('\n")
    rc, err = check(build, "--config", conf, "-n")
    assert rc == 2 and "g.conf:1: -T x" in err and "g.conf:2: -W 99" in err and \
        "g.conf:3: -w b(" in err, err
    r = subprocess.run([build.binary, "--config", conf, "-n", "-p", "0"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "g.conf:1: -T x" in r.stderr and "-W 99" not in r.stderr, \
        r.stderr


def test_check_survives_getopt_moving_the_files_words(build, tmp_path):
    """An unknown long option with a value in the file, then more options: with
    --check, getopt went on and moved the stray value past the command line's
    words, and conf_free freed a command-line word in its place (munmap_chunk:
    invalid pointer, exit 134; ASan: free of a non-malloc'ed address).  Now the
    messages and exit 2, with --check and without."""
    conf = write(tmp_path / "g.conf", "-p 18555 -E\n--no-such-option 1\n")
    for args in (["--check", "--config", conf], ["--config", conf, "--check", "-n"],
                 ["--config", conf, "-i", "127.0.0.1", "-p", "0"]):
        r = subprocess.run([build.binary] + args, capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert "g.conf:2: unknown long option" in r.stderr, r.stderr
        assert "AddressSanitizer" not in r.stderr and "munmap" not in r.stderr, r.stderr


def test_a_misspelled_option_in_the_file_is_named_with_a_suggestion(build, tmp_path):
    """--log-formt json in the file (issue 68): the word, its value, the file and
    line and the nearest option, said once; the value is the option's, not an
    'unexpected argument' of its own with no line; --check goes on past it."""
    conf = write(tmp_path / "g.conf", "-n\n--log-formt json\n-T x\n")
    rc, err = check(build, "--config", conf)
    assert rc == 2, err
    assert "g.conf:2: unknown long option --log-formt json (did you mean --log-format?)" in err, \
        err
    assert "unexpected argument" not in err and "g.conf:3: -T x" in err, err


def test_check_passes_the_shipped_file(build, tmp_path):
    """dist/gatling.conf as make install writes it (the sample site and the logs
    moved here, since /usr/share/gatling and /var/log/gatling are not):
    exit 0, and so do certificates that load."""
    with open(os.path.join(ROOT, "dist/gatling.conf")) as f:
        text = f.read()
    assert "@DATADIR@/www" in text and "/var/log/gatling/" in text
    text = text.replace("@DATADIR@/www", os.path.join(ROOT, "www"))
    text = text.replace("/var/log/gatling/", str(tmp_path) + "/")
    assert "--pid-file /run/gatling/gatling.pid" in text
    text = text.replace("/run/gatling/", str(tmp_path) + "/")
    # -u gatling: the package's user, which a fresh machine lacks, whoever
    # installed the package before (issue 91): a user of the test's own, made
    # and removed here (own_user); not root, whom -u needs: the line dropped
    assert "\n-u gatling\n" in text
    with contextlib.ExitStack() as stack:
        user = stack.enter_context(own_user()) if os.geteuid() == 0 else None
        text = text.replace("\n-u gatling\n", "\n-u %s\n" % user if user else "\n")
        conf = write(tmp_path / "gatling.conf", text)
        rc, err = check(build, "--config", conf)
        assert rc == 0 and "--check: the configuration is good" in err, err
        assert "warning" not in err and "note" not in err, err
        rc, err = check(build, "--config", conf, "-C", os.path.join(pki_dir(), "certs"),
                        "-e", "0")
        assert rc == 0, err
    assert not os.path.exists(str(tmp_path / "access.log.bound")), "nothing else made"


def test_check_goes_on_to_the_end(build, tmp_path):
    """Issue 79: an unclosed quote does not end the check (its line is
    dropped, the lines after it are checked); an unknown -u user does not hide
    -l's error; -u's and -l's messages name FILE:LINE; the pointer to -h is
    said once, at the end; a lone unknown option as the last word is named."""
    conf = write(tmp_path / "g.conf", "-I 'unclosed\n-T x\n-u no-such-user-here\n"
                 "-l /nonexistent/dir/access.log\n-W 99\nstray\n--bogus-last\n")
    rc, err = check(build, "--config", conf, "-p", "0")
    assert rc == 2, err
    for want in ("g.conf:1: a ' is not closed on its line",
                 "g.conf:2: -T x: not a timeout",
                 "g.conf:3: -u no-such-user-here: no such user",
                 "g.conf:4: -l /nonexistent/dir/access.log: the access log cannot be opened: "
                 "its directory /nonexistent/dir",
                 "g.conf:5: -W 99: not a worker count",
                 "g.conf:6: 'stray' is not an option",
                 "g.conf:7: unknown long option --bogus-last",
                 "--check: the configuration has the problems above"):
        assert want in err, (want, err)
    assert err.count("try 'gatling -h'") == 1, err
    assert err.index("try 'gatling -h'") > err.index("--bogus-last"), err
    # a long flag may end the file: not taken for an option wanting a value
    rc, err = check(build, "--config", write(tmp_path / "f.conf", "-n\n--no-chroot\n"),
                    "-c", os.path.join(ROOT, "www"))
    assert rc == 0, err


def test_check_reads_the_cache_files(build, tmp_path):
    """.cache files below the root are parsed by --check: FILE:LINE and what
    is wrong, for the root's and a site's."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n", ".cache": "ttl 1\nbogus 3\n",
                        "app.example/.cache": "# ok\nlock 99\n",
                        "good.example/.cache": "ttl 1\ngrace 10\n"})
    rc, err = check(build, "-n", cwd=root)
    real = os.path.realpath(root)
    assert rc == 2, err
    assert "%s/.cache:2: not a setting (ttl, grace, errors, lock, cookie, purge" % real in err, err
    assert "%s/app.example/.cache:2: lock: not a number of seconds (1-60)" % real in err, err
    assert "good.example" not in err, err


def test_check_reads_the_htaccess_and_early_hints_files(build, tmp_path):
    """The other files a site's directory may hold (issue 79 item 8.9):
    .htaccess as the server reads it for each request (malformed: 500) and
    .early-hints as the static handler does (lines it leaves out), FILE:LINE
    and what is wrong; good ones say nothing."""
    root = str(tmp_path / "www")
    make_docroot(root, {
        "f.txt": "x\n",
        ".htaccess": "Realm\nalice:$6$salt$hash\nbob\n:nouser\n"
                     "carol:$6$rounds=99999999$s$h\nnul\0:x\n",
        "a.example/.htaccess": "# a comment, and nothing else\n\n",
        "a.example/.early-hints": "</a.css>; rel=preload; as=style\nLink: </b.js>; rel=preload\n"
                                  "just text\n\x01</c.js>\n",
        "b.example/.early-hints": "</%s.css>; rel=preload\n" % ("x" * 600) * 2,
        "good.example/.htaccess": "# realm next\nGood\nu:$y$j9T$salt$hash\n",
        "good.example/.early-hints": "# hints\n</s.css>; rel=preload; as=style\n"})
    os.symlink("../good.example/.htaccess", os.path.join(root, "b.example", ".htaccess"))
    rc, err = check(build, "-n", cwd=root)
    real = os.path.realpath(root)
    assert rc == 2, err
    for want in ("%s/.htaccess:3: not user:hash" % real, "%s/.htaccess:4: not user:hash" % real,
                 "%s/.htaccess:5: the hash asks crypt(3) for more than the bounds" % real,
                 "%s/.htaccess:6: a NUL byte" % real,
                 "%s/a.example/.htaccess: no realm line" % real,
                 "%s/a.example/.early-hints:3: not a link-value" % real,
                 "%s/a.example/.early-hints:4: a byte a field value cannot carry" % real,
                 "%s/b.example/.early-hints:2: the Link value passes 1023 bytes" % real,
                 "%s/b.example/.htaccess: a symlink, not a regular file" % real):
        assert want in err, (want, err)
    assert "good.example" not in err and ".htaccess:2:" not in err, err
    assert "a.example/.early-hints:1" not in err and "a.example/.early-hints:2" not in err, err


def test_pid_file_follows_reloads_and_root_reloads_by_it(build, tmp_path):
    """--pid-file: written by the serving process (as -u's user in a directory
    of that user's), the new pid after a reload, which root may ask of a
    server it started with -u, naming the pid file; removed at exit."""
    if os.geteuid() != 0:
        pytest.skip("root's start with -u")
    users = users_exist("nobody")
    if not users:
        pytest.skip("no user nobody")
    from conftest import copy_for_others
    with logs_of(users[0]) as run:
        top = os.path.dirname(run)
        binary = copy_for_others(build.binary, top)
        pidf = os.path.join(run, "g.pid")
        port = free_port()
        p = subprocess.Popen([binary, "-n", "-E", "-i", "127.0.0.1", "-p", str(port), "-u",
                              "nobody", "--pid-file", pidf], cwd=top,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        pids = [p.pid]
        try:
            line = ""
            while "listening on" not in line:
                line = p.stderr.readline()
                assert line, "gatling exited"
            wait_for(lambda: os.path.exists(pidf) and open(pidf).read() == "%d\n" % p.pid, 15,
                     "the pid file")
            assert os.stat(pidf).st_uid == users[0].pw_uid
            r = subprocess.run([binary, "--reload", pidf], capture_output=True, text=True,
                               timeout=90)
            assert r.returncode == 0 and "serves; this one (pid %d) drains" % p.pid in r.stdout, r
            new = int(re.search(r"pid (\d+) serves", r.stdout).group(1))
            pids.append(new)
            wait_for(lambda: open(pidf).read() == "%d\n" % new, 15, "the new pid in the file")
            assert p.wait(30) == 0
            assert open(pidf).read() == "%d\n" % new, "the old process left the new pid"
            os.kill(new, signal.SIGTERM)
            wait_for(lambda: gone(new), 15, "the new process's exit")
            assert not os.path.exists(pidf), "the pid file is removed at exit"
            r = subprocess.run([binary, "--reload", pidf], capture_output=True, text=True,
                               timeout=30)
            assert r.returncode == 2 and "--reload %s: No such file" % pidf in r.stderr, r
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            p.wait(10)


def users_exist(*names):
    import pwd
    try:
        return [pwd.getpwnam(n) for n in names]
    except KeyError:
        return None


@contextlib.contextmanager
def logs_of(user, group=None):
    """A log directory as the package's: /tmp/X (root's, 0755) /logs, owned by
    user and group (the user's own if None), mode 2750 (dist/gatling.tmpfiles,
    postinst: gatling:adm, set-group-ID)."""
    import tempfile
    top = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(top, 0o755)
        logs = os.path.join(top, "logs")
        os.mkdir(logs)
        os.chown(logs, user.pw_uid, user.pw_gid if group is None else group)
        os.chmod(logs, 0o2750)  # after the chown, which clears the bit
        yield logs
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_check_as_root_judges_the_logs_as_u_opens_them(build, tmp_path):
    """The package's situation (issue 79): the logs' directory is the gatling
    user's.  As root, --check with -u gatling opens them as gatling: exit 0,
    no word of -u; without -u it is refused, and that message suggests -u;
    with a -u user who cannot write there, the message does not suggest -u."""
    if os.geteuid() != 0:
        pytest.skip("root's check")
    users = users_exist("nobody", "daemon")
    if not users:
        pytest.skip("no users nobody and daemon")
    nobody, daemon = users
    import grp
    try:
        adm = grp.getgrnam("adm").gr_gid
    except KeyError:
        pytest.skip("no group adm")
    with logs_of(nobody, adm) as logs:
        conf = write(tmp_path / "g.conf", "-c %s\n--no-chroot\n-u nobody\n-l %s/access.log\n"
                     "-q %s/error.log\n" % (os.path.join(ROOT, "www"), logs, logs))
        # issue 90, item 5's trap: root without -u first makes no log of root's
        text = open(conf).read().replace("-u nobody\n", "")
        rc, err = check(build, "--config", write(tmp_path / "root.conf", text))
        assert rc == 2 and "give -u USER" in err and not os.listdir(logs), (err, os.listdir(logs))
        rc, err = check(build, "--config", conf)
        assert rc == 0 and "configuration is good" in err and "-u" not in err, err
        # Debian's convention: the -u user's, group adm (the directory's), 0640
        for log in ("access.log", "error.log"):
            st = os.stat(os.path.join(logs, log))
            assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (nobody.pw_uid, adm, 0o640), \
                (log, st)
        rc, err = check(build, "--config", conf, "-u", "daemon")
        assert rc == 2 and "-l %s/access.log: the access log cannot be opened: Permission " \
            "denied" % logs in err and "give -u" not in err, err
        text = open(conf).read().replace("-u nobody\n", "")
        rc, err = check(build, "--config", write(conf, text))
        assert rc == 2 and "its directory can be written by others than root: give -u USER" \
            in err, err


def test_no_chroot_and_the_warning_of_serving_as_root(build, tmp_path):
    """-c as root chroots (the note says so, and how not to: --no-chroot);
    --no-chroot in the file: no note, and a -P unix socket outside the root
    that does not exist is warned about as such; root without -u is warned."""
    if os.geteuid() != 0:
        pytest.skip("root's start")
    www = os.path.join(ROOT, "www")
    sock = str(tmp_path / "php.sock")
    rule = "-P 'unix:%s:^/app/'\n" % sock
    rc, err = check(build, "--config", write(tmp_path / "a.conf", "-c %s\n-u nobody\n%s"
                                             % (www, rule)))
    assert "gatling chroots into it" in err and "add --no-chroot" in err, err
    assert "started as root without -u" not in err, err
    rc, err = check(build, "--config", write(tmp_path / "b.conf", "-c %s\n--no-chroot\n%s"
                                             % (www, rule)))
    assert rc == 0 and "chroots" not in err, err
    assert "warning: -P unix:%s:^/app/: unix:%s does not exist (yet)" % (sock, sock) in err, err
    assert "warning: started as root without -u: gatling serves as root; give -u USER" in err, err
    port = free_port()
    p = subprocess.Popen([build.binary, "--config", str(tmp_path / "b.conf"), "-n", "-E",
                          "-i", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while len(lines) < 10 and (not lines or "listening on" not in lines[-1]):
            lines.append(p.stderr.readline())
        assert any("started as root without -u" in l for l in lines), lines
        assert not any("chroots into" in l for l in lines), lines
        # not chrooted: the process's root is still /
        assert os.readlink("/proc/%d/root" % p.pid) == "/"
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


def reload(srv, pids):
    """SIGUSR2 to the process serving now (pids[-1]): the new one's pid, once it
    serves, appended to pids."""
    mark = len(srv.errlog)
    os.kill(pids[-1], signal.SIGUSR2)
    pid = wait_for(lambda: new_pid(srv, mark), 15, "the new process")
    pids.append(pid)
    wait_for(lambda: any("pid %d serves" % pid in l for l in srv.errlog[mark:]), 15,
             "the new process serving")
    return pid


def backend(body=b"from backend", fields=b""):
    """A one-response-per-connection HTTP backend answering body (after the
    header fields given, each ending in CRLF): its port."""
    def handle(c):
        with c:
            c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n%s"
                      % (len(body), fields, body))
    return serve(listener(), handle, threaded=True).getsockname()[1]


def test_reload_applies_the_edited_file_under_load(build, tmp_path):
    """The file gains a -P rule, -M and -W 2 between two SIGUSR2s' worth of
    load (HTTP/1.1 keep-alive, a connection per request, and h2c): after the
    reload /app/ comes from the backend and files carry max-age, the old
    process is gone, and not one request failed."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "reload me\n", ".proxy": ""})
    conf = write(tmp_path / "g.conf", "-n -T 10\n")
    srv = start_server(build, root, ("--config", conf))
    pids = [srv.pid]
    try:
        assert_status(fetch(srv.port, "/app/x"), 404, "before: no rule")
        loads = [bench_bg(build, srv.port, ["-c", "10", "-k"], 3),
                 bench_bg(build, srv.port, ["-c", "5"], 3),
                 bench_bg(build, srv.port, ["-c", "5", "-k", "--h2", "--streams", "5"], 3)]
        time.sleep(0.8)
        write(conf, "-n -T 10\n-P '127.0.0.1/%d/^/app/'\n-M 77 -W 2\n" % backend())
        pid = reload(srv, pids)
        results = [bench_result(p) for p in loads]
        for name, r in zip(("keep-alive", "one per connection", "h2c"), results):
            assert r["errors_total"] == 0 and r["responses"] > 50, (name, r["errors"],
                                                                    r["responses"])
            assert r["status"]["2xx"] == r["responses"], (name, r["status"])
        wait_for(lambda: gone(srv.pid), 15, "the old process draining and exiting")
        assert srv.process.wait(1) == 0
        r = fetch(srv.port, "/app/x")
        assert_status(r, 200, "after: the new -P rule")
        assert r.body == b"from backend"
        assert fetch(srv.port, "/f.txt").header("cache-control") == "max-age=77"
        workers = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        assert len(workers.stdout.split()) == 2, "-W 2: two workers (%r)" % workers.stdout
        print("reload under load: %s" % ", ".join(
            "%s %d responses %d errors" % (n, r["responses"], r["errors_total"])
            for n, r in zip(("h1 keep-alive", "h1 close", "h2c"), results)))
    finally:
        end_upgrades(srv, pids)


def test_a_broken_file_at_reload_changes_nothing(build, tmp_path):
    """A bad line at reload: the new process exits, the old one goes on serving
    with its options, and its error log (-q, a file) names the file and line."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "still here\n"})
    elog = str(tmp_path / "error.log")
    conf = write(tmp_path / "g.conf", "-n -M 5\n")
    with running_server(build, root, ("--config", conf, "-q", elog), check_fds=False) as srv:
        write(conf, "-n -M 5\n-T soon\n")
        srv.send_signal(signal.SIGUSR2)

        def said():
            with open(elog) as f:
                return "the new process failed" in f.read()
        wait_for(said, 15, "the old process saying the new one failed")
        with open(elog) as f:
            text = f.read()
        assert "g.conf:2: -T soon: not a timeout" in text and "this one goes on serving" in text, \
            text
        r = fetch(srv.port, "/f.txt")
        assert_status(r, 200, "after a failed reload")
        assert r.header("cache-control") == "max-age=5"
        # and the next good edit is applied
        write(conf, "-n -M 6\n")
        mark = len(srv.errlog)
        os.kill(srv.pid, signal.SIGUSR2)
        pid = wait_for(lambda: new_pid(srv, mark), 15, "the new process")
        try:
            wait_for(lambda: gone(srv.pid), 15, "the old process exiting")
            assert fetch(srv.port, "/f.txt").header("cache-control") == "max-age=6"
        finally:
            end_upgrades(srv, [srv.pid, pid])
            srv.exit_checked = True


def test_reload_under_h3_load(build, tmp_path):
    """HTTP/3 clients keep asking (connections that stay open and one per
    request, test_h3_workers' Load) while the file gains -M: no request fails
    (one the draining process refused is sent again, as RFC 9114 allows), the
    old process exits, and a new connection gets the new header."""
    from conftest import H3Client, https_port, skip_without_h3
    skip_without_h3(build.binary)
    test_h3_workers = pytest.importorskip("test_h3_workers")
    if not test_h3_workers.HAVE_AIOQUIC:
        pytest.skip("aioquic is not installed (tests/setup.sh installs it)")
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "h3\n"})
    conf = write(tmp_path / "g.conf", "-T 10 -S -n\n-C %s -e 0\n" % os.path.join(pki_dir(),
                                                                                 "certs"))
    srv = start_server(build, root, ("--config", conf))
    tls = https_port(srv)
    pids = [srv.pid]
    load = test_h3_workers.Load(tls)
    try:
        load.thread.start()
        wait_for(lambda: len(load.done) > 20 or load.failed, 10, "the load running")
        with open(conf, "a") as f:
            f.write("-M 77\n")
        reload(srv, pids)
        n = len(load.done)
        wait_for(lambda: len(load.done) > n + 20 or load.failed, 15, "requests after it")
        load.stop = True
        load.thread.join(15)
        assert not load.failed, load.failed[:5]
        wait_for(lambda: gone(srv.pid), 15, "the old process draining and exiting")
        c = H3Client(tls)
        try:
            assert c.request("/f.txt").header("cache-control") == "max-age=77"
        finally:
            c.close()
        print("reload under h3 load: %d requests, %d sent again after a refusal, 0 failed"
              % (len(load.done), load.retried))
    finally:
        load.stop = True
        end_upgrades(srv, pids)


def test_a_certificate_that_does_not_load_at_reload_changes_nothing(build, tmp_path):
    """The certificate is broken between start and reload: the new process cannot
    load it and exits, the old one says why and goes on serving HTTPS with the
    certificate it has."""
    import shutil
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "tls\n"})
    certs = tmp_path / "certs"
    shutil.copytree(os.path.join(pki_dir(), "certs"), str(certs))
    conf = write(tmp_path / "g.conf", "-n\n-C certs -e 0\n")  # relative to the file
    with running_server(build, root, ("--config", conf), check_fds=False) as srv:
        from conftest import https_port
        tls = https_port(srv)
        write(certs / "server.pem", "-----BEGIN CERTIFICATE-----\nbroken\n")
        srv.send_signal(signal.SIGUSR2)
        wait_for(lambda: any("the new process failed" in l for l in srv.errlog), 15,
                 "the old process saying the new one failed")
        line = [l for l in srv.errlog if "the new process failed" in l][0]
        assert "server.pem" in line and "this one goes on serving" in line, line
        r = subprocess.run(["curl", "-s", "--cacert", os.path.join(pki_dir(), "ca.pem"),
                            "https://localhost:%d/f.txt" % tls], capture_output=True, timeout=30)
        assert r.returncode == 0 and r.stdout == b"tls\n", r


def reload_cmd(build, pid):
    """gatling --reload PID, as the unit's ExecReload runs it."""
    return subprocess.run([build.binary, "--reload", str(pid)], capture_output=True, text=True,
                          timeout=90)


def test_reload_command_waits_for_the_outcome(build, tmp_path):
    """--reload: a good edit, exit 0 once the new process serves it; a certificate
    that no longer loads, exit 1 with the old process's reason on stderr and the
    old process still serving; a pid that is not gatling's, exit 2."""
    import shutil
    from conftest import https_port
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "tls\n"})
    certs = tmp_path / "certs"
    shutil.copytree(os.path.join(pki_dir(), "certs"), str(certs))
    conf = write(tmp_path / "g.conf", "-n -M 5\n-C certs -e 0\n")
    srv = start_server(build, root, ("--config", conf))
    pids = [srv.pid]
    try:
        tls = https_port(srv)
        write(conf, "-n -M 6\n-C certs -e 0\n")
        r = reload_cmd(build, srv.pid)
        assert r.returncode == 0 and "serves; this one (pid %d) drains" % srv.pid in r.stdout, r
        pids.append(int(re.search(r"pid (\d+) serves", r.stdout).group(1)))
        assert fetch(srv.port, "/f.txt").header("cache-control") == "max-age=6"
        wait_for(lambda: gone(srv.pid), 15, "the old process draining and exiting")
        write(certs / "server.pem", "-----BEGIN CERTIFICATE-----\nbroken\n")
        r = reload_cmd(build, pids[-1])
        assert r.returncode == 1 and "the new process failed" in r.stderr, r
        assert "server.pem" in r.stderr and "this one goes on serving" in r.stderr, r.stderr
        assert not gone(pids[-1])
        c = subprocess.run(["curl", "-s", "--cacert", os.path.join(pki_dir(), "ca.pem"),
                            "https://localhost:%d/f.txt" % tls], capture_output=True, timeout=30)
        assert c.returncode == 0 and c.stdout == b"tls\n", c
        r = reload_cmd(build, os.getpid())  # python, not gatling: not signalled
        assert r.returncode == 2 and "not gatling" in r.stderr, r
    finally:
        end_upgrades(srv, pids)


def test_reload_after_the_binary_was_replaced(build, tmp_path):
    """A package upgrade replaces the binary under a running server (a new
    file at the same path; the old one's inode lives on as "... (deleted)"):
    the new binary's --reload still knows the server as its own, exit 0, and
    the new process serves; a gatling from another path is not reloaded,
    exit 2 naming what it runs."""
    import shutil
    import types
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n"})
    os.makedirs(str(tmp_path / "bin"))
    stub = str(tmp_path / "bin" / "gatling")
    shutil.copy(build.binary, stub)
    copy = types.SimpleNamespace(**vars(build))
    copy.binary = stub
    srv = start_server(copy, root, ("-n", "-T", "10"))
    pids = [srv.pid]
    try:
        os.unlink(stub)
        shutil.copy(build.binary, stub)  # the new file, at the same path
        assert os.readlink("/proc/%d/exe" % srv.pid) == stub + " (deleted)"
        other = str(tmp_path / "gatling")
        shutil.copy(build.binary, other)
        r = subprocess.run([other, "--reload", str(srv.pid)], capture_output=True, text=True,
                           timeout=90)
        assert r.returncode == 2, r
        assert "that process runs %s (deleted), not this gatling" % stub in r.stderr, r
        r = subprocess.run([stub, "--reload", str(srv.pid)], capture_output=True, text=True,
                           timeout=90)
        assert r.returncode == 0 and "serves; this one (pid %d) drains" % srv.pid in r.stdout, r
        pids.append(int(re.search(r"pid (\d+) serves", r.stdout).group(1)))
        assert fetch(srv.port, "/f.txt").body == b"x\n"
    finally:
        end_upgrades(srv, pids)


def test_a_plain_kill_is_answered_on_the_plain_name(build, tmp_path):
    """kill -USR2 from a process that holds "@gatling-reload.<its pid>" (the
    --reload of a gatling from before the nonce): the outcome comes there, as
    it did (a sigqueue'd nonce names the socket of today's --reload)."""
    import socket
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n"})
    srv = start_server(build, root, ("-n", "-T", "10"))
    pids = [srv.pid]
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        ls.bind("\0gatling-reload.%d" % os.getpid())
        ls.listen(1)
        ls.settimeout(60)
        srv.send_signal(signal.SIGUSR2)
        c, _ = ls.accept()
        with c:
            c.settimeout(10)
            got = c.recv(2048).decode()
        m = re.match(r"1binary upgrade: pid (\d+) serves; this one \(pid %d\) drains" % srv.pid,
                     got)
        assert m, got
        pids.append(int(m.group(1)))
    finally:
        ls.close()
        end_upgrades(srv, pids)


def test_reload_refused_while_the_server_stops(build, tmp_path):
    """--reload of a server that is stopping (SIGHUP with -g: its health check
    fails for the grace while the listeners stay open): refused, exit 1 with
    the reason, no new process; the server then exits as the drain says."""
    from test_signals import expect_exit
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n"})
    srv = start_server(build, root, ("-n", "-T", "10", "-k", "/health", "-g", "4"))
    try:
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: fetch(srv.port, "/health").status == 503, 10, "the health check failing")
        r = reload_cmd(build, srv.pid)
        assert r.returncode == 1, r
        assert "--reload %d: binary upgrade: this process is stopping" % srv.pid in r.stderr, r
        kids = subprocess.run(["pgrep", "-P", str(srv.pid)], capture_output=True, text=True)
        assert not kids.stdout.split(), "a new process started: %r" % kids.stdout
    finally:
        expect_exit(srv, 20)
