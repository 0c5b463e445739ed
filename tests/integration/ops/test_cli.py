"""Command-line interface: -V, -h, bad options and bad combinations (each named,
exit 2), what --check accepts, the files options name (refused at start and
by --check alike), --reload's own arguments, startup line."""
import os
import re
import signal
import socket
import subprocess
import threading

import pytest

from conftest import (ALARMING, ROOT, Client, first_backend_only, http_only, make_docroot,
                      recv_to_eof, wait_for)
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it

# Parsing and the start-up's checks sit above io/: on the first backend (and
# its sanitizer build) only, in the plain pass (no scheme changes them)
ABOVE_IO = ("test_bad_value_is_named",
            "test_every_option_of_the_table_is_in_the_man_page_and_back",
            "test_good_values_pass_check",
            "test_a_file_an_option_names_is_refused_at_start_and_by_check",
            "test_reload_arguments", "test_reload_of_a_process_that_dies",
            "test_a_pool_no_rule_names_is_warned")


@pytest.fixture(autouse=True)
def above_io(request):
    first_backend_only(request, ABOVE_IO, "options and checks above io/: on the first backend")


def run(build, *args, timeout=20, cwd="/"):
    try:
        p = subprocess.run([build.binary] + list(args), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           cwd=cwd)
    except subprocess.TimeoutExpired:
        pytest.fail("gatling %s did not exit within %d s" % (" ".join(args), timeout))
    for bad in ALARMING:
        assert bad.encode() not in p.stderr, p.stderr.decode(errors="replace")
    return p


def test_version(build):
    p = run(build, "-V")
    assert p.returncode == 0, p
    out = p.stdout.decode()
    lines = out.splitlines()
    assert len(lines) == 1, "-V must print one line, got %r" % out
    m = re.fullmatch(r"gatling \d+(\.\d+)+\S* \((\w+)\)( h3)?", lines[0])
    assert m, "-V line %r is not 'gatling VERSION (BACKEND)[ h3]'" % lines[0]
    assert m.group(2) == build.backend, "-V says backend %r, build is %r" % (
        m.group(2), build.name)
    # " h3": HTTP/3 is built in (make H3=0 leaves it out, into build/<backend>-noh3)
    if build.name.endswith("-noh3"):
        assert not m.group(3), "an H3=0 build says h3: %r" % lines[0]


def test_help(build):
    p = run(build, "-h")
    assert p.returncode == 0, p
    out = p.stdout.decode()
    assert "usage" in out.lower(), "no usage text on stdout: %r" % out
    assert not p.stderr, "-h wrote on stderr: %r" % p.stderr
    for opt in ("-i", "-p", "-T", "-n", "-c", "-W", "-V", "-h"):
        assert re.search(r"(^|\W)%s\b" % re.escape(opt), out), "-h does not mention %s" % opt


def man_options():
    """The options gatling.8's OPTIONS section describes: the names on the
    line after each .TP ("-d", "--acme-ca", ...)."""
    with open(os.path.join(ROOT, "man", "gatling.8")) as f:
        text = f.read()
    section = text.split("\n.SH OPTIONS\n", 1)[1].split("\n.SH ", 1)[0]
    names = set()
    for m in re.finditer(r"^\.TP\n(.*)$", section, re.M):
        line = m.group(1).replace("\\-", "-")
        names.update(re.findall(r'(?:^\.B[IR]? |[\s"])(--?[A-Za-z0-9][A-Za-z0-9-]*)', line))
    return names


def table_options(build):
    """The options of gatling's table (--list-options: "-p", "--cache", or
    "-x,--long" a line)."""
    p = run(build, "--list-options")
    assert p.returncode == 0 and not p.stderr, p
    return {n for line in p.stdout.decode().splitlines() for n in line.split()[0].split(",")}


def test_every_option_of_the_table_is_in_the_man_page_and_back(build):
    """Each option of the table (gatling/process/options.c and the modules' rows) has
    its entry in gatling.8's OPTIONS, and each entry there is an option of
    the table: an option added to one and not the other fails here."""
    table, man = table_options(build), man_options()
    assert len(table) > 70, table
    assert table - man == set(), "in the table, not in gatling.8's OPTIONS: %s" % (table - man)
    assert man - table == set(), "in gatling.8's OPTIONS, not in the table: %s" % (man - table)
    p = run(build, "-h")
    for name in table:  # and each in -h (-D shares -d's line)
        assert re.search(r"(^|\s)%s\b" % re.escape(name), p.stdout.decode(), re.M), name


def test_synopses_name_every_option(build):
    """-h's synopsis (made from the table's rows) and gatling.8's SYNOPSIS
    name every option of the table, -e with its address (issue 79, 8: both
    lacked --compress, --proxy-ca and --list-options, -h the --tls-client-*
    ones too, and said -e port)."""
    table = table_options(build)
    out = run(build, "-h").stdout.decode()
    synopsis = out.split("\nServe ", 1)[0]
    with open(os.path.join(ROOT, "man", "gatling.8")) as f:
        man = f.read().split("\n.SH SYNOPSIS\n", 1)[1].split("\n.SH ", 1)[0]
    man = man.replace("\\-", "-")
    for name in sorted(table):
        assert re.search(r"[\s\[|]%s(?=[\s\]|])" % re.escape(name), synopsis), (name, synopsis)
        assert re.search(r"(^|\s)%s(\s|$)" % re.escape(name), man, re.M), (name, man)
    assert "[-e [addr:]port]" in synopsis and "gatling --reload pid" in synopsis, synopsis
    assert all(len(line) <= 92 for line in synopsis.splitlines()), synopsis


@pytest.mark.parametrize("args", [("-p", "abc"), ("-p", "70000"), ("-p", "-1"), ("-p", ""),
                                  ("-T", "-1"), ("-T", "x"), ("-W", "abc"), ("-x",),
                                  ("-p",), ("-i", "not-an-address"), ("-p", "80x"),
                                  ("-F", "-1"), ("-F", "1048577"), ("-F", "16k"), ("-a", "x"),
                                  ("-a", "3601"), ("--status-from", "10.0.0.0/33"),
                                  ("--status-from", "example.org"), ("--status-from",),
                                  ("--status-from", ",".join(["10.0.0.%d" % i for i in range(33)])),
                                  ("--flood-memory", "-1"), ("--flood-memory", "3601"),
                                  ("--flood-memory", "10s"), ("--flood-memory",),
                                  ("--h3-retry", "sometimes"), ("--h3-retry",)],
                         ids=lambda a: " ".join(a) if isinstance(a, tuple) else a)
def test_bad_option_exit_2(build, args):
    # never let a wrongly accepted option leave a server on a fixed port
    base = [] if args[0] == "-i" else ["-i", "127.0.0.1"]
    base += [] if args[0] == "-p" else ["-p", "0"]
    p = run(build, *(base + list(args)), timeout=20)
    assert p.returncode == 2, "gatling %s: exit status %d (want 2)\nstderr %r\nstdout %r" % (
        " ".join(args), p.returncode, p.stderr, p.stdout)
    assert p.stderr.strip(), "gatling %s: no message on stderr" % " ".join(args)


@pytest.mark.parametrize("args,names", [(("-p", "abc"), "-p"), (("-T", "-1"), "-T"),
                                        (("-y",), "-y"), (("-j",), "-j"),
                                        (("--status-from", "1.2.3"), "--status-from"),
                                        (("--flood-memory", "x"), "--flood-memory"),
                                        (("--h3-retry", "x"), "--h3-retry"),
                                        (("leftover",), "leftover")],
                         ids=lambda a: " ".join(a) if isinstance(a, tuple) else a)
def test_bad_option_is_short(build, args, names):
    """The error, naming the option, and a pointer to -h and gatling(8), not the whole usage."""
    p = run(build, "-i", "127.0.0.1", "-p", "0", *args, timeout=20)
    err = p.stderr.decode()
    assert p.returncode == 2, "gatling %s: exit status %d (want 2)\nstderr %r" % (
        " ".join(args), p.returncode, err)
    lines = err.splitlines()
    assert 1 <= len(lines) <= 3, "gatling %s: %d lines on stderr (want at most 3):\n%s" % (
        " ".join(args), len(lines), err)
    assert names in lines[0], "gatling %s: the error does not name %s: %r" % (
        " ".join(args), names, err)
    assert "-h" in err and "gatling(8)" in err, "no pointer to -h and gatling(8): %r" % err
    assert not p.stdout, "a bad option printed on stdout: %r" % p.stdout


def test_c_bad_dir_fails(build, tmp_path):
    p = run(build, "-i", "127.0.0.1", "-p", "0", "-c", str(tmp_path / "no-such-dir"))
    assert p.returncode != 0, "-c to a missing directory must fail"
    assert p.stderr.strip()


def test_startup_line_names_backend(gatling, build):
    srv = gatling()
    text = srv.stderr_text()
    assert build.backend in text, "startup output does not name the backend %r:\n%s" % (
        build.backend, text)
    assert srv.listeners and srv.listeners[0][0] in ("127.0.0.1",), srv.listeners
    assert 0 < srv.port < 65536


def test_port_0_gives_distinct_ports(gatling):
    a = gatling()
    b = gatling()
    assert a.port != b.port
    for s in (a, b):
        with Client(s.port) as c:
            assert c.request("/f.txt").status == 200


def test_c_changes_root(gatling, build, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "g.txt").write_bytes(b"from -c\n")
    # as root, -c also chroots: LeakSanitizer cannot read /proc there and
    # would fail the exit, so leak checking is off for this one server
    env = {"ASAN_OPTIONS": "detect_leaks=0"} if build.sanitized else None
    srv = gatling({"f.txt": "cwd\n"}, args=("-T", "10", "-c", str(other)), env=env)
    with Client(srv.port) as c:
        r = c.request("/g.txt")
        assert r.status == 200 and r.body == b"from -c\n", "-c dir not served: %r" % r
        assert c.request("/f.txt").status == 404, "-c: still serving the cwd"


def test_listen_address_respected(gatling, build):
    srv = gatling()
    # bound to 127.0.0.1 only: 127.0.0.2 is loopback too but must be refused
    import socket
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.2", srv.port))
        connected = True
    except OSError:
        connected = False
    finally:
        s.close()
    assert not connected, "-i 127.0.0.1 but 127.0.0.2:%d accepts connections" % srv.port


LONG_USER = "u" * 256
# (arguments after -i 127.0.0.1 -p 0, what stderr's first line says): exit 2
BAD_VALUES = [
    (("-s", "0"), "-s 0: not a time in seconds (1-3600)"),
    (("-N", "0"), "-N 0: not a connection count"),
    (("-j", "65"), "-j 65: not a thread count (1-64)"),
    (("-J", "0"), "-J 0: not a number of CGI processes"),
    (("-g", "3601"), "-g 3601: not a time in seconds (0-3600)"),
    (("-M", "-5"), "-M -5: not a max-age"),
    (("-q", ""), "-q : not a usable file name"),
    (("-c", ""), "-c : not a usable directory name"),
    (("-u", LONG_USER), "-u %s: not a user name" % LONG_USER),
    (("-I", "../index.html"), "-I ../index.html: not a plain file name"),
    (("-I", "a/b.html"), "-I a/b.html: not a plain file name"),
    (("-I", ".hidden"), "-I .hidden: not a plain file name"),
    (("-r", "ftp://example.org/"), "-r ftp://example.org/: not an http:// or https:// URL"),
    (("-r", "http://example.org/a b"), "-r ...: longer than 1024 bytes, or has spaces"),
    (("-r", "https://example.org/" + "a" * 1100), "-r ...: longer than 1024 bytes"),
    (("-C", "/" + "d" * 5000), "-C ...: path too long"),
    (("-e", "[::1]4433"), "-e [::1]4433: not [addr:]port"),
    (("-e", "[::1"), "-e [::1: not [addr:]port"),
    # the whole value, not the address alone (the port was cut off)
    (("-e", "localhost:4433"), "-e localhost:4433: not [addr:]port"),
    (("-e", "127.0.0.1:70000"), "-e 127.0.0.1:70000: not [addr:]port"),
    (("-o", ""), "-o ...: empty, too long or with spaces"),
    (("-O", "TLS_AES_128_GCM_SHA256 TLS_AES_256_GCM_SHA384"), "-O ...: empty, too long or with"),
    (("-y", "ftp"), "-y ftp: not http, https or ports"),
    (("-y", "0"), "-y 0: not http, https or ports"),
    (("-y", "http,"), "-y http,: not http, https or ports"),
    (("-y", "1,2,3,4,5,6,7,8,9"), "-y 1,2,3,4,5,6,7,8,9: not http, https or ports (1-65535), "
                                 "comma-separated, at most 8 ports"),
    (("-y", "http", "-Y", "10.0.0.0/33"), "-Y 10.0.0.0/33: not addresses or addr/bits"),
    (("-k", "health"), "-k health: not a path starting with /"),
    (("-k", "/health?x=1"), "-k /health?x=1: not a path"),
    (("-k", "/a#b"), "-k /a#b: not a path"),
    (("-k", "/a b"), "-k /a b: not a path"),
    (("-Q", "0"), "-Q 0: not a time in seconds (1-86400), or two: secs,tunnel"),
    (("-Q", "30,0"), "-Q 30,0: not a time"),
    (("-Q", "30,x"), "-Q 30,x: not a time"),
    (("-Q", ",30"), "-Q ,30: not a time"),
    (("-Q", "30,"), "-Q 30,: not a time"),
    (("-Q", "1234567890123"), "-Q 1234567890123: not a time"),
    (("-f", "x"), "-f x: not port[,upload[=bytes]]"),
    (("-f", "70000"), "-f 70000: not port"),
    (("-f", "21,download"), "-f 21,download: not port"),
    (("-f", "21,uploads"), "-f 21,uploads: not port"),
    (("-f", "21,upload="), "-f 21,upload=: not port"),
    (("-f", "21,upload=0"), "-f 21,upload=0: not port"),
    (("-f", "21,upload=9G9"), "-f 21,upload=9G9: not port"),
    (("-f", "21,upload=1T"), "-f 21,upload=1T: not port"),
    (("--cache", "512K"), "--cache 512K: not mem[,object]"),
    (("--cache", "65G"), "--cache 65G: not mem"),
    (("--cache", "-1M"), "--cache -1M: not mem"),
    (("--cache", "1X"), "--cache 1X: not mem"),
    (("--cache", "64M,1K"), "--cache 64M,1K: not mem"),
    (("--cache", "1M,2M"), "--cache 1M,2M: the object size 2M is larger than the memory 1M"),
    (("--cache", ",1M"), "--cache ,1M: not mem"),
    (("--cache", "64M,"), "--cache 64M,: not mem"),
    (("--cache", "9" * 30), "--cache %s: not mem" % ("9" * 30)),
    (("--cgi-limits", "cpu=x"), "--cgi-limits cpu=x: not cpu=secs,mem=bytes,procs=n,files=n"),
    (("--cgi-limits", "disk=1"), "--cgi-limits disk=1: not cpu=secs"),
    (("--cgi-limits", "cpu=86401"), "--cgi-limits cpu=86401: not cpu=secs"),
    (("--cgi-limits", "mem=2T"), "--cgi-limits mem=2T: not cpu=secs"),
    (("--cgi-limits", ""), "--cgi-limits : not cpu=secs"),
    (("--cgi-limits", "cpu=1,,mem=1M"), "--cgi-limits cpu=1,,mem=1M: not cpu=secs"),
    (("--cgi-limits", "procs=" + "9" * 40), "--cgi-limits procs=%s: not cpu=secs" % ("9" * 40)),
    (("--cgi-user", ""), "--cgi-user : not a user name"),
    (("--log-format", "xml"), "--log-format xml: not combined or json"),
    (("-w", ""), "-w : not a POSIX extended regular expression"),
    (("-w", "x" * 1025), "-w %s: not a POSIX extended regular expression (at most 1024 bytes"
     % ("x" * 1025)),
    (("-w", "a") * 9, "-w a: not a POSIX extended regular expression (at most 1024 bytes; -w at"
                      " most 8 times)"),
    (("--pool", "p" * 1100), "--pool %s: not a pool (at most 1024 bytes" % ("p" * 1100)),
    (("-p", "99999999999999999999"), "-p 99999999999999999999: not a port number"),
    (("-I", "i" * 256), "-I %s: not a plain file name" % ("i" * 256)),
    (("-r", "http://example.org/\x7f"), "-r ...: longer than 1024 bytes, or has spaces or"),
    (("-o", "ECDHE-RSA-AES128-GCM-SHA256\tAES128"), "-o ...: empty, too long or with spaces"),
    (("-o", "c" * 1025), "-o ...: empty, too long or with spaces"),
    (("-k", "/" + "h" * 300), "-k /%s: not a path" % ("h" * 300)),
    (("-y", "http", "-Y", ",".join("10.0.0.%d" % i for i in range(33))),
     "not addresses or addr/bits, comma-separated, at most 32"),
    (("-f", "21,upload=9999999999G"), "-f 21,upload=9999999999G: not port"),
    (("-f", "21,upload=99999999999999999999"), "-f 21,upload=99999999999999999999: not port"),
    (("--cache", "+2M"), "--cache +2M: not mem"),
    (("--cache", " 2M"), "--cache  2M: not mem"),
    (("--cache", "4M,8M"), "--cache 4M,8M: the object size 8M is larger than the memory 4M"),
    (("--cache", "4M,2K"), "--cache 4M,2K: not mem[,object]: sizes with K, M or G, mem 1M-64G"),
    (("--cgi-user", LONG_USER), "--cgi-user %s: not a user name" % LONG_USER),
    (("-P", "127.0.0.1/9/^/a/") * 17, "not a proxy rule (at most 1024 bytes; -P at most 16"),
    (("--pool", "a=127.0.0.1/9") * 17, "not a pool (at most 1024 bytes; --pool at most 16"),
    (("-P", "@nope/^/x/"), "-P @nope/^/x/: no --pool named nope"),
    # an option without its value, an unknown one
    (("--cache",), "--cache needs an argument"),
    (("--pool",), "--pool needs an argument"),
    (("--log-format",), "--log-format needs an argument"),
    (("--cgi-user",), "--cgi-user needs an argument"),
    (("--cgi-limits",), "--cgi-limits needs an argument"),
    (("--cluster",), "--cluster needs an argument"),
    (("--cluster-name",), "--cluster-name needs an argument"),
    (("--acme-ca",), "--acme-ca needs an argument"),
    (("-e",), "-e needs an argument"),
    (("-%",), "unknown option -%"),
    (("--nope",), "unknown long option --nope (there are --config, --check, "),
    # found by fuzz_options: regcomp took minutes and gigabytes on stacked +
    (("-w", "X" + "+" * 41), "-w X++"),
    (("-P", "127.0.0.1/80/^/a((b+)+)+{100}{100}"), "would take regcomp too long"),
    (("--log-formt", "json"),
     "unknown long option --log-formt json (did you mean --log-format?)"),
    (("--acme-d", "x"), "ambiguous long option --acme-d x (--acme-dir, --acme-dns-server, "),
    (("--config",), "--config needs a file"),
    (("--config=",), "--config needs a file"),
    (("--config", ""), "--config needs a file"),
    # combinations
    (("-f", "0,upload", "-U"), "-U forbids the uploads that -f ...,upload allows"),
    (("-y", "http"), "-y needs -Y"),
    (("-Y", "127.0.0.1"), "-Y without -y"),
    (("--cluster-name", "n1"), "--cluster-name without --cluster"),
    (("--cluster", "etcd=ftp://x"), "--cluster etcd=ftp://x: not etcd=URL"),
    (("--cluster", "etcd=http://127.0.0.1:2379", "--cluster-name", "a b"),
     "--cluster-name a b: not 1 to"),
    (("--cluster", "etcd=http://127.0.0.1:2379", "--cluster-name", "a~b"),
     "--cluster-name a~b: not 1 to"),
    (("--cluster", "etcd=http://127.0.0.1:2379", "--cluster-name", "n:1"),
     "--cluster-name n:1: not 1 to"),
    (("--cluster", "etcd=http://127.0.0.1:2379", "--cluster-name", "n" * 65),
     "--cluster-name %s: not 1 to 64" % ("n" * 65)),
    (("--cluster", "etcd=http://127.0.0.1:2379", "--cluster-name", ""),
     "--cluster-name : not 1 to"),
    (("--cluster", "etcd=https://127.0.0.1:2379", "--cluster-name", "aZ09-_.n"),
     "--cluster: no secret=FILE"),  # a good name and URL: what is missing is the secret
    (("--cluster", "etcd=http://a\tb"), "--cluster etcd=http://a\tb: not etcd=URL"),
    (("--cluster", "etcd=http://" + "e" * 2000), "not etcd=URL[,URL...]"),
    (("--cluster", "etcd=htt://x"), "--cluster etcd=htt://x: not etcd=URL"),
    # --acme's (tls/test_acme_serve.py has the others)
    (("--acme", "a@b@gatling.test"), "--acme a@b@gatling.test: not an email address"),
    (("--acme", "a b@gatling.test"), "--acme a b@gatling.test: not an email address"),
    (("--acme", "<a>@gatling.test"), "--acme <a>@gatling.test: not an email address"),
    (("--acme", "@gatling.test"), "--acme @gatling.test: not an email address"),
    (("--acme", "a@-x-.test"), "--acme a@-x-.test: not an email address"),
    (("--acme", "a@gatling.test", "--acme-ca", "https:///dir"), "--acme-ca https:///dir: not an"),
    (("--acme", "a@gatling.test", "--acme-ca", "https://"), "--acme-ca https://: not an https://"),
    (("--acme", "a@gatling.test", "--acme-ca", "https://ca.test/\x7f"), "not an https:// URL"),
    (("--acme", "a@gatling.test") + ("--acme-ca", "https://ca.test/d") * 5,
     "--acme-ca https://ca.test/d: one CA too many (at most 4"),
    (("--acme", "a@gatling.test", "--acme-ca-root", ""), "--acme-ca-root : not a usable file"),
    (("--acme", "a@gatling.test", "--acme-dns-key", ""), "--acme-dns-key : not a usable file"),
    (("--acme", "a@gatling.test", "--acme-eab", ":abc"), "--acme-eab :abc: not KID:HMACKEY"),
    (("--acme", "a@gatling.test", "--acme-eab", "kid:ab=c"), "--acme-eab kid:ab=c: not KID:"),
    (("--acme", "a@gatling.test", "--acme-eab", "kid:" + "a" * 600), "not KID:HMACKEY"),
    (("--acme", "a@gatling.test", "--acme-issuer", ""), "--acme-issuer : not a common name"),
    (("--acme", "a@gatling.test", "--acme-issuer", "i" * 256), "not a common name"),
    (("--acme", "a@gatling.test", "--acme-profile", "p" * 65), "not a profile name"),
    (("--acme", "a@gatling.test", "--acme-names", "ok.test,"), "--acme-names : not a host name"),
    (("--acme", "a@gatling.test", "--acme-names", "*.gatling"), "--acme-names *.gatling: not a"),
    (("--acme-names", "a.test"), "--acme-names without --acme EMAIL: nothing to do"),
]


BAD_RULES = [(("-P", "foo"), "-P foo: the backend is not an IPv4"),
             (("-P", "/x=foo://a"), "-P /x=foo://a: the backend is not"),
             (("-P", "127.0.0.1/80/(x"), "-P 127.0.0.1/80/(x: the pattern is empty, not a POSIX"),
             (("-P", "@/x"), "-P @/x: @NAME/pattern names a --pool"),
             (("--pool", "x"), "--pool x: not NAME=backends"),
             (("--pool", "a=127.0.0.1/9;balance=nope"), "--pool a=127.0.0.1/9;balance=nope: ")]


@http_only
@pytest.mark.parametrize("args,says", BAD_RULES, ids=[" ".join(a) for a, _ in BAD_RULES])
def test_a_bad_rule_says_one_line(build, args, says):
    """A bad -P or --pool: its own reason on one line, then the pointer to -h;
    not the row's generic "not a proxy rule" after it (issue 79 item 8.1)."""
    p = run(build, "-i", "127.0.0.1", "-p", "0", *args)
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    lines = err.splitlines()
    assert len(lines) == 2 and says in lines[0], err
    assert lines[1] == "gatling: try 'gatling -h' or see gatling(8)", err


@http_only
@pytest.mark.parametrize("args,says", BAD_VALUES,
                         ids=["%d %s" % (i, a[0]) for i, (a, _) in enumerate(BAD_VALUES)])
def test_bad_value_is_named(build, args, says):
    """A bad value, a missing one, an unknown option or two options that do not
    go together: exit 2 at once, the first line naming the option and the value
    as given, then the pointer to -h; nothing on stdout."""
    p = run(build, "-i", "127.0.0.1", "-p", "0", *args)
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    first = err.splitlines()[0]
    assert first.startswith("gatling: ") and says in first, err
    assert err.endswith("gatling: try 'gatling -h' or see gatling(8)\n"), err
    assert not p.stdout, p.stdout


def check(build, *args, cwd):
    """gatling --check ARGS in cwd: (exit status, stderr)."""
    p = run(build, "--check", "-p", "0", *args, cwd=cwd)
    return p.returncode, p.stderr.decode()


CERTS = "@certs"  # the test PKI's certificate directory
GOOD_VALUES = [
    ("-e", "127.0.0.1:0", "-C", CERTS), ("-e", "[::1]:0", "-C", CERTS), ("-e", "0", "-C", CERTS),
    ("-Q", "30,7200"), ("-Q", "5000"), ("-f", "0"), ("-f", "0,upload"), ("-f", "0,upload=10M"),
    ("-f", "0,upload=512K"), ("-f", "0,upload=1G"), ("--cache", "2M"), ("--cache", "512M,8K"),
    ("--cache", "1G,1M"), ("--cache", "64G"), ("--cgi-limits", "cpu=0,mem=2G,procs=10,files=64"),
    ("--cgi-limits", "mem=512M"), ("-y", "http,https,8080", "-Y", "10.0.0.0/8,::1"),
    ("--h3-retry", "never"), ("--h3-retry", "always"), ("--h3-retry", "busy"),
    ("--log-format", "json"), ("--log-format", "combined"), ("-o", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("-O", "TLS_AES_128_GCM_SHA256"), ("-k", "/healthz"), ("-r", "https://example.org/"),
    ("-I", "index.htm"), ("-s", "3600"), ("-j", "64"), ("-M", "0"), ("-a", "0"),
    ("--flood-memory", "0"), ("--status-from", "10.0.0.0/8,2001:db8::/32"), ("-w", r"\.cgi$"),
    ("-w", r"\.cgi$", "-W", "2"), ("--pool", "app=127.0.0.1/9", "-P", "@app/^/app/"),
    ("--config=@conf",), ("-dSLZ",), ("-p0",), ("-y", "8443", "-Y", "::1"),
    ("-y", "https", "-Y", "127.0.0.1"), ("-z", "-W", "2"),
    # --acme's, all at once (--check makes its state directory, here in tmp_path)
    ("--acme", "admin@gatling.test", "--acme-dir", "@acme", "--acme-ca", "https://ca.test/dir",
     "--acme-ca-root", "@conf", "--acme-names", "WWW.Gatling.TEST,192.0.2.1,2001:db8::1",
     "--acme-issuer", "ISRG Root X1", "--acme-profile", "shortlived", "--acme-key", "rsa3072",
     "--acme-challenge", "tls-alpn-01", "--acme-eab", "kid-1:zWNDZM6eQGHWpSRTPal5eI=="),
    ("--acme", "admin@gatling.test", "--acme-dir", "@acme", "--acme-names", "*.gatling.test",
     "--acme-dns-server", "[::1]:53", "--acme-dns-key", "@key", "--acme-eab", "k:@@eab"),
]


@http_only
@pytest.mark.parametrize("args", GOOD_VALUES, ids=[" ".join(a) for a in GOOD_VALUES])
def test_good_values_pass_check(build, tmp_path, args):
    """The forms gatling(8) gives are taken: --check says the configuration
    is good (exit 0), and nothing else on stderr but what HTTPS's
    certificates are (or that none is there yet, for --acme)."""
    root = make_docroot(str(tmp_path / "www"), {"f.txt": "x\n", ".proxy": ""})
    conf = tmp_path / "g.conf"
    conf.write_text("-n -T 10\n")
    (tmp_path / "key").write_text('key "acme-update" {\n\talgorithm hmac-sha256;\n\tsecret '
                                  '"c2VjcmV0IG9mIHRoZSB0ZXN0cw==";\n};\n')
    (tmp_path / "eab").write_text("zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W\n")
    for secret in ("key", "eab"):  # secrets: no one else reads them (gatling.8, SECURITY)
        os.chmod(tmp_path / secret, 0o600)
    made = {CERTS: os.path.join(pki_dir(), "certs"), "@conf": str(conf),
            "@acme": str(tmp_path / "acme"), "@key": str(tmp_path / "key"),
            "@eab": str(tmp_path / "eab")}
    args = [made.get(a, a).replace("@@eab", "@" + made["@eab"]) for a in args]
    args = [a.replace("@conf", str(conf)) if a.startswith("--config=") else a for a in args]
    rc, err = check(build, *args, cwd=root)
    assert rc == 0, (rc, err)
    # root's warning of serving as root (no -u here) and the sandbox's line aside
    lines = [l for l in err.splitlines() if not l.startswith("gatling: HTTPS") and
             "started as root without -u" not in l and "--check: sandbox:" not in l]
    assert lines == ["gatling: --check: the configuration is good"], err


@http_only
def test_a_pool_no_rule_names_is_warned(build, tmp_path):
    """--pool without a -P rule that names it: taken, with a warning that no
    request goes to it."""
    root = make_docroot(str(tmp_path / "www"), {"f.txt": "x\n"})
    rc, err = check(build, "--pool", "app=127.0.0.1/9", cwd=root)
    lines = [l for l in err.splitlines() if "started as root without -u" not in l and
             "--check: sandbox:" not in l]
    assert rc == 0 and lines == [
        "gatling: --pool without a -P rule naming it: no request goes to it",
        "gatling: --check: the configuration is good"], err


# (arguments, what stderr says); {dir}, {fifo}, {file}: made in tmp_path.  The
# start exits 1 with the message, --check exits 2 with it
FILE_PROBLEMS = [
    (("-m", "{dir}"), "-m: cannot read MIME types from {dir}: not a regular file"),
    (("-m", "{fifo}"), "-m: cannot read MIME types from {fifo}: not a regular file"),
    (("-m", "/dev/zero"), "-m: cannot read MIME types from /dev/zero: not a regular file"),
    (("-m", "{dir}/none"), "-m: cannot read MIME types from {dir}/none: No such file"),
    (("-q", "{dir}/none/error.log"), "-q {dir}/none/error.log: the error log cannot be opened"),
    (("-l", "{dir}"), "-l {dir}: the access log cannot be opened"),
    (("-u", "no-such-user-here"), "-u no-such-user-here: no such user"),
    (("--cgi-user", "no-such-user-here"), "--cgi-user no-such-user-here: no such user"),
    (("--cgi-user", "root"), "--cgi-user root: is root"),
    (("-u", "nobody", "--cgi-user", "nobody"),
     "--cgi-user nobody: is -u's user: CGI could signal the server"),
    (("-e", "0"), "-e 0: no certificate: give -C dir, or put server.pem here"),
]


@http_only
@pytest.mark.parametrize("args,says", FILE_PROBLEMS,
                         ids=["%d %s" % (i, a[0]) for i, (a, _) in enumerate(FILE_PROBLEMS)])
def test_a_file_an_option_names_is_refused_at_start_and_by_check(build, tmp_path, args, says):
    """A file that is missing, a directory, a FIFO or a device where a file is
    wanted (a FIFO or /dev/zero once hung the start, a directory was taken as an
    empty -m table), a user that does not exist: the start exits 1 at once
    naming it and what is wrong, --check exits 2 with the same words."""
    where = {"dir": str(tmp_path / "d"), "fifo": str(tmp_path / "fifo")}
    os.mkdir(where["dir"])
    os.mkfifo(where["fifo"])
    root = make_docroot(str(tmp_path / "www"), {"f.txt": "x\n"})
    args = [a.format(**where) for a in args]
    says = "gatling: " + says.format(**where)
    p = run(build, "-i", "127.0.0.1", "-p", "0", "-T", "5", *args, timeout=15, cwd=root)
    assert p.returncode == 1 and says in p.stderr.decode(), (p.returncode, p.stderr)
    assert b"listening on" not in p.stderr
    rc, err = check(build, *args, cwd=root)
    assert rc == 2 and says in err and "the configuration has the problems above" in err, err


RELOAD_BAD = [
    ((), "--reload needs the server's pid"),
    (("abc",), "--reload abc: not a process id"),
    (("12x",), "--reload 12x: not a process id"),
    (("0",), "--reload 0: not a process id"),
    (("-5",), "--reload -5: not a process id"),
    (("99999999999",), "--reload 99999999999: not a process id"),
    (("2147483647",), "--reload 2147483647: no such process"),
    (("1", "-n"), "--reload pid: a command of its own, nothing after the pid"),
]


@http_only
@pytest.mark.parametrize("args,says", RELOAD_BAD,
                         ids=[" ".join(a) or "none" for a, _ in RELOAD_BAD])
def test_reload_arguments(build, args, says):
    """--reload without a pid, with one that is no number or no process, or with
    more after it: exit 2 with the reason, no signal sent."""
    p = run(build, "--reload", *args)
    assert p.returncode == 2 and p.stderr.decode().startswith("gatling: " + says), p


@http_only
def test_reload_of_a_process_that_dies(build, tmp_path):
    """A gatling that dies of the SIGUSR2 instead of answering (one still
    starting, before its handlers: here held there by a full stderr pipe, at
    its "HTTPS with 1 certificate" line): --reload says it exited, exit 1,
    within seconds rather than its 70 s wait."""
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    try:
        while True:
            os.write(wfd, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(wfd, True)
    victim = subprocess.Popen([build.binary, "-n", "-i", "127.0.0.1", "-p", "0", "-C",
                               os.path.join(pki_dir(), "certs"), "-e", "0"],
                              cwd=str(tmp_path), stdin=subprocess.DEVNULL, stderr=wfd)
    os.close(wfd)
    reaper = threading.Thread(target=victim.wait)  # gone, not a zombie, once it dies
    reaper.start()
    try:
        def blocked():
            with open("/proc/%d/wchan" % victim.pid) as f:
                return "pipe" in f.read()
        wait_for(blocked, 10, "the victim blocked on its stderr")
        p = run(build, "--reload", str(victim.pid), timeout=30)
        assert victim.returncode == -signal.SIGUSR2, victim.returncode
        assert p.returncode == 1, p
        assert "--reload %d: it exited before it answered" % victim.pid in p.stderr.decode(), p
    finally:
        if victim.returncode is None:
            victim.kill()
        reaper.join(10)
        os.close(rfd)


@http_only
def test_without_i_listens_on_every_address(build, tmp_path):
    """No -i: one dual-stack socket on ::, as the startup line says; clients
    reach it over 127.0.0.1 and ::1 alike."""
    root = make_docroot(str(tmp_path / "www"), {"f.txt": "both\n"})
    p = subprocess.Popen([build.binary, "-p", "0", "-n", "-E", "-T", "5"], cwd=root,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    lines = []
    try:
        reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, b"")))
        reader.start()
        wait_for(lambda: any(b"listening on" in l for l in lines), 15, "the listening line")
        m = re.search(rb"listening on (\S+) port (\d+)", b"".join(lines))
        assert m.group(1) == b"::", lines
        port = int(m.group(2))
        for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family) as s:
                s.settimeout(10)
                s.connect((addr, port))
                s.sendall(b"GET /f.txt HTTP/1.0\r\n\r\n")
                got = recv_to_eof(s)
            assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"both\n"), (addr, got)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0
        reader.join(10)
    for bad in ALARMING:
        assert not any(bad.encode() in l for l in lines), lines
