"""Operations: methods and request-body framing (Content-Length, chunked,
Expect: 100-continue, limits), the access log (-l, SIGUSR1, -A, read by
goaccess), /server-status (-S), and privilege handling (-u, -c)."""
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import (MUX, HTTP_VERSION, LOG_VERSION, TLS, Client, Mode, Symlink, build_request,
                      fetch, h1_only, h2_bug, make_docroot, raw_exchange)
from feature_helpers import (assert_ok, assert_status, basic_auth, crypt_hash, module_server,
                             no_leak_env, norm_ctype, wait_for)

F = b"the f file\n"
G = b"the g file, a little longer\n"
TREE = {"f.txt": F, "g.txt": G, "private.txt": Mode(b"private\n", 0o600)}
ALLOW = "GET, HEAD, OPTIONS"
BODY_MAX = 1 << 20

CLF = re.compile(r'(?P<vhost>\S+ )?(?P<host>\S+) - - '
                 r'\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\] '
                 r'"(?P<request>[^"]*)" (?P<status>\d{3}) (?P<bytes>\d+|-) "[^"]*" "[^"]*"'
                 + (" https" if TLS else ""))


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "ops", TREE)


def get_req(target, *headers, body=b"", method="GET", version="HTTP/1.1"):
    return build_request(target, method, version, list(headers), "x", body)


# --------------------------------------------------------------------------
# Methods

def test_options_allow(srv):
    with Client(srv.port) as c:
        r = c.request("/f.txt", method="OPTIONS")
        assert_status(r, 200, "OPTIONS")
        assert r.header_all("Allow") == [ALLOW], r
        assert r.header("Content-Length") == "0" and r.body == b"", r
        assert_ok(c.request("/f.txt"), F, "GET after OPTIONS")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_method_405_with_allow(srv, method):
    with Client(srv.port) as c:
        r = c.request("/f.txt", method=method)
        assert_status(r, 405, method)
        assert r.header_all("Allow") == [ALLOW], r
        assert r.header("Content-Length") == str(len(r.body)), r


# --------------------------------------------------------------------------
# Request bodies: read and dropped, the connection stays in step

@pytest.mark.parametrize("sizes", [None, (1,), (3, 7)], ids=["whole", "bytewise", "pieces"])
def test_content_length_body_then_pipelined(srv, sizes):
    data = get_req("/f.txt", "Content-Length: 5", body=b"abcde") + get_req("/g.txt")
    with Client(srv.port) as c:
        if sizes:
            c.send_split(data, sizes, pause=0.001)
        else:
            c.send(data)
        assert_ok(c.read_response(), F, "GET with a 5-byte body")
        assert_ok(c.read_response(), G, "the request after the body")


CHUNKED = (b"5;ext=1\r\nhello\r\n"
           b"A\r\n0123456789\r\n"
           b"1; name=\"quoted;value\"\r\nx\r\n"
           b"0\r\nTrailer-A: 1\r\nTrailer-B: two\r\n\r\n")


@h1_only("chunked framing")
@pytest.mark.parametrize("sizes", [None, (1,), (5, 2, 9)], ids=["whole", "bytewise", "pieces"])
def test_chunked_body_then_pipelined(srv, sizes):
    data = get_req("/f.txt", "Transfer-Encoding: chunked", body=CHUNKED) + get_req("/g.txt")
    with Client(srv.port) as c:
        if sizes:
            c.send_split(data, sizes, pause=0.001)
        else:
            c.send(data)
        assert_ok(c.read_response(), F, "GET with a chunked body")
        assert_ok(c.read_response(), G, "the request after the chunked body")


@h1_only("chunked framing")
def test_chunked_post_405_then_pipelined(srv):
    # the body looks like a request: it must be skipped, never answered
    inner = b"GET /g.txt HTTP/1.1\r\nHost: x\r\n\r\n"
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(inner), inner)
    with Client(srv.port) as c:
        c.send(get_req("/f.txt", "Transfer-Encoding: chunked", body=body, method="POST")
               + get_req("/f.txt"))
        assert_status(c.read_response(), 405)
        assert_ok(c.read_response(), F, "the request after the POST body")


@h1_only("chunked framing")
def test_content_length_and_chunked_400_close(srv):
    # RFC 9112 6.1: the server MUST close the connection after responding
    with Client(srv.port) as c:
        c.send(get_req("/f.txt", "Content-Length: 5", "Transfer-Encoding: chunked",
                       body=b"0\r\n\r\n") + get_req("/g.txt"))
        assert_status(c.read_response(), 400, "Content-Length and Transfer-Encoding")
        c.assert_closed(5.0, "after a request with both framings")


@h1_only("chunked framing")
@pytest.mark.parametrize("body", [b"zz\r\nhello\r\n0\r\n\r\n", b"5\r\nhelloXX0\r\n\r\n",
                                  b"-1\r\nx\r\n0\r\n\r\n"],
                         ids=["bad-hex", "no-crlf-after-data", "negative"])
def test_malformed_chunked_400(srv, body):
    with Client(srv.port) as c:
        c.send(get_req("/f.txt", "Transfer-Encoding: chunked", body=body) + get_req("/g.txt"))
        assert_status(c.read_response(), 400, "malformed chunked body %r" % body)
        c.assert_closed(5.0, "after a malformed chunked body")


@h1_only("Transfer-Encoding")
@pytest.mark.parametrize("te", ["gzip", "chunked, gzip", "identity"])
def test_unknown_transfer_coding_400(srv, te):
    r = raw_exchange(srv.port, get_req("/f.txt", "Transfer-Encoding: " + te, body=b"0\r\n\r\n"))
    assert_status(r, (400, 501), "Transfer-Encoding: " + te)



def test_content_length_over_limit_413(srv):
    r = raw_exchange(srv.port, get_req("/f.txt", "Content-Length: %d" % (BODY_MAX + 1)))
    assert_status(r, 413, "Content-Length over 1 MiB")


def test_content_length_at_limit_ok(srv):
    with Client(srv.port, timeout=10) as c:
        c.send(get_req("/f.txt", "Content-Length: %d" % BODY_MAX, body=b"b" * BODY_MAX)
               + get_req("/g.txt"))
        assert_ok(c.read_response(), F, "a 1 MiB body")
        assert_ok(c.read_response(), G)


@h1_only("chunked framing")
def test_chunked_over_limit_413(srv):
    with Client(srv.port, timeout=10) as c:
        c.send(get_req("/f.txt", "Transfer-Encoding: chunked"))
        try:
            for _ in range(5):  # 5 x 256 KiB + 1 = over 1 MiB
                c.send(b"40000\r\n" + b"c" * 0x40000 + b"\r\n")
            c.send(b"1\r\nc\r\n0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before the rest arrives
        assert_status(c.read_response(), 413, "a chunked body over 1 MiB")


# --------------------------------------------------------------------------
# Expect: 100-continue


def test_expect_100_continue(srv):
    with Client(srv.port) as c:
        c.send(get_req("/f.txt", "Content-Length: 5", "Expect: 100-continue"))
        r = c.read_response(timeout=8)
        assert_status(r, 100, "interim response before the body")
        assert r.version == HTTP_VERSION and r.headers == [], r
        c.send(b"abcde")
        assert_ok(c.read_response(), F, "final response after the body")
        assert_ok(c.request("/g.txt"), G, "the next request")


@h1_only("chunked framing")
def test_expect_100_continue_with_chunked(srv):
    with Client(srv.port) as c:
        c.send(get_req("/f.txt", "Transfer-Encoding: chunked", "Expect: 100-continue"))
        assert_status(c.read_response(timeout=8), 100)
        c.send(CHUNKED)
        assert_ok(c.read_response(), F)


def test_expect_with_body_already_sent(srv):
    with Client(srv.port) as c:
        c.send(get_req("/f.txt", "Content-Length: 5", "Expect: 100-continue", body=b"abcde")
               + get_req("/g.txt"))
        r = c.read_response()
        if r.status == 100:  # allowed, though the body is already here (RFC 9110 10.1.1)
            r = c.read_response()
        assert_ok(r, F)
        assert_ok(c.read_response(), G)


@h1_only("HTTP/1.0")
def test_expect_ignored_for_http10(srv):
    # RFC 9110 10.1.1: a 100-continue expectation in an HTTP/1.0 request MUST be ignored
    with Client(srv.port) as c:
        c.send(get_req("/f.txt", "Content-Length: 5", "Expect: 100-continue",
                       version="HTTP/1.0"))
        assert not c.closed_within(0.3), "closed while waiting for the body"
        assert c.buf == b"", "sent %r to an HTTP/1.0 client before its body" % bytes(c.buf)
        c.send(b"abcde")
        r = c.read_response()
        assert_ok(r, F, "HTTP/1.0 with Expect")


# --------------------------------------------------------------------------
# Access log: -l, SIGUSR1, -A, goaccess

def log_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode().splitlines()
    except FileNotFoundError:
        return None


def wait_lines(path, n, timeout=3.0):
    wait_for(lambda: len(log_lines(path) or []) >= n, timeout)
    return log_lines(path) or []


def test_l_appends_to_file(gatling, tmp_path):
    log = tmp_path / "access.log"
    log.write_bytes(b"an old line\n")
    s = gatling(TREE, args=("-T", "10", "-l", str(log)))
    with Client(s.port) as c:
        assert_ok(c.request("/f.txt"), F)
        assert_status(c.request("/missing"), 404)
        assert_ok(c.request("/g.txt", headers=["User-Agent: ops-test"]), G)
    lines = wait_lines(log, 4)
    assert len(lines) == 4 and lines[0] == "an old line", lines
    want = [("GET /f.txt " + LOG_VERSION, "200", str(len(F))),
            ("GET /missing " + LOG_VERSION, "404", None),
            ("GET /g.txt " + LOG_VERSION, "200", str(len(G)))]
    for line, (req, status, nbytes) in zip(lines[1:], want):
        m = CLF.fullmatch(line)
        assert m and not m["vhost"] and m["host"] == "127.0.0.1", line
        assert (m["request"], m["status"]) == (req, status), line
        assert nbytes is None or m["bytes"] == nbytes, line
    assert lines[3].endswith('"ops-test"' + (" https" if TLS else "")), lines[3]
    time.sleep(0.1)
    assert s.log == [], "-l given, but lines went to stdout: %r" % s.log


def test_usr1_reopens_log(gatling, tmp_path):
    log = tmp_path / "access.log"
    s = gatling(TREE, args=("-T", "10", "-l", str(log)))
    for _ in range(2):
        assert_ok(fetch(s.port, "/f.txt"), F)
    assert len(wait_lines(log, 2)) == 2
    rotated = tmp_path / "access.log.1"
    os.rename(log, rotated)
    os.kill(s.pid, signal.SIGUSR1)  # not s.send_signal: the server must stay fully checked
    assert wait_for(log.exists, 15), "SIGUSR1 did not create a new log file"
    for _ in range(3):
        assert_ok(fetch(s.port, "/g.txt"), G)
    lines = wait_lines(log, 3)
    assert len(lines) == 3 and all('"GET /g.txt %s" 200' % LOG_VERSION in x for x in lines), lines
    old = log_lines(rotated)
    assert len(old) == 2 and all('"GET /f.txt %s" 200' % LOG_VERSION in x for x in old), old
    s.check_alive()


def test_G_vhost_first(gatling):
    """-G: vhost_combined; the field is the directory that served, "-" for the root."""
    s = gatling(TREE, args=("-T", "10", "-G"))
    os.makedirs(os.path.join(s.docroot, "example.org:%d" % s.port))
    with open(os.path.join(s.docroot, "example.org:%d" % s.port, "f.txt"), "wb") as f:
        f.write(b"vhost f\n")
    assert_ok(fetch(s.port, "/f.txt", host="Example.ORG"), b"vhost f\n")
    assert_ok(fetch(s.port, "/f.txt", host="unknown.test:99"), F)
    n = 3
    if MUX:  # HTTP/2 and HTTP/3 carry no HTTP/1.0 (and libnghttp2 resets a stream
        n = 2  # that has neither :authority nor Host)
    else:
        assert_ok(fetch(s.port, "/f.txt", host=None, version="HTTP/1.0"), F)
    lines = s.wait_log(n)
    assert len(lines) == n, lines
    vhosts = []
    for line in lines:
        m = CLF.fullmatch(line)
        assert m and m["vhost"], "not vhost_combined: %r" % line
        assert m["host"] == "127.0.0.1", line
        vhosts.append(m["vhost"].strip())
    assert vhosts == ["example.org:%d" % s.port, "-:%d" % s.port, "-:%d" % s.port][:n], lines


def goaccess(log, fmt, tmp_path):
    exe = shutil.which("goaccess")
    if not exe:
        pytest.skip("goaccess not installed")
    out = tmp_path / ("report-%s.json" % fmt)
    p = subprocess.run([exe, str(log), "--log-format=" + fmt, "--no-progress",
                        "--no-global-config", "-o", str(out)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    assert p.returncode == 0, p.stdout.decode(errors="replace")
    return json.loads(out.read_text())


def test_goaccess_reads_log_file(gatling, tmp_path):
    log = tmp_path / "access.log"
    s = gatling(TREE, args=("-T", "10", "-l", str(log)))
    with Client(s.port) as c:
        for _ in range(4):
            assert_ok(c.request("/f.txt", headers=["User-Agent: Mozilla/5.0"]), F)
        for _ in range(2):
            assert_status(c.request("/nope.html"), 404)
        assert_status(c.request("/private.txt"), 403)
    assert len(wait_lines(log, 7)) == 7
    report = goaccess(log, "COMBINED", tmp_path)
    g = report["general"]
    assert g["total_requests"] == 7 and g["failed_requests"] == 0, g
    assert g["bandwidth"] >= 4 * len(F), g
    codes = {i["data"][:3]: i["hits"]["count"]
             for grp in report["status_codes"]["data"] for i in grp["items"]}
    assert codes == {"200": 4, "404": 2, "403": 1}, codes


def test_goaccess_reads_vhost_log(gatling, tmp_path):
    log = tmp_path / "vhost.log"
    s = gatling(TREE, args=("-T", "10", "-G", "-l", str(log)))
    for d in ("a.example:%d" % s.port, "b.example:%d" % s.port):
        os.makedirs(os.path.join(s.docroot, d))
        with open(os.path.join(s.docroot, d, "f.txt"), "wb") as f:
            f.write(F)
    for host in ("a.example", "b.example", "a.example", "nodir.example"):
        assert_ok(fetch(s.port, "/f.txt", host=host), F)
    assert len(wait_lines(log, 4)) == 4
    report = goaccess(log, "VCOMBINED", tmp_path)
    assert report["general"]["total_requests"] == 4, report["general"]
    assert report["general"]["failed_requests"] == 0, report["general"]
    vh = {d["data"]: d["hits"]["count"] for d in report.get("vhosts", {}).get("data", [])}
    assert vh == {"a.example": 2, "b.example": 1, "-": 1}, report.get("vhosts")


# --------------------------------------------------------------------------
# /server-status

def status_json(port, client=None):
    r = client.request("/server-status?json") if client else fetch(port, "/server-status?json")
    assert_status(r, 200, "/server-status?json")
    assert norm_ctype(r.header("Content-Type")) == "application/json", r
    assert r.header("Content-Length") == str(len(r.body)), r
    return json.loads(r.body)


def test_server_status_html(gatling):
    s = gatling(TREE, args=("-T", "10", "-S"))
    idle = [Client(s.port) for _ in range(3)]
    for c in idle:
        assert_ok(c.request("/f.txt"), F)  # accepted and served: surely counted
    r = fetch(s.port, "/server-status")
    assert_status(r, 200)
    assert norm_ctype(r.header("Content-Type")) == "text/html;charset=utf-8", r
    assert r.body.startswith(b"<!DOCTYPE html>"), r.body[:60]
    assert r.header("Cache-Control") == "no-store", r
    m = re.search(rb"<th>open connections</th><td>(\d+)</td>", r.body)
    assert m and int(m.group(1)) == 4, "3 idle connections + this one: %r" % r.body
    for c in idle:
        c.close()


def test_server_status_json(gatling):
    s = gatling(TREE, args=("-T", "10", "-S"))
    with Client(s.port) as c:
        a = status_json(s.port, c)
        for k in ("connections", "requests", "bytes", "requests_per_second", "bytes_per_second"):
            assert isinstance(a.get(k), int) and a[k] >= 0, "%s: %r" % (k, a)
        assert a["connections"] == 1, a
        for _ in range(5):
            assert_ok(c.request("/g.txt"), G)
        b = status_json(s.port, c)
    # the first status request and the five GETs were completed in between
    assert b["requests"] - a["requests"] == 6, (a, b)
    assert b["bytes"] - a["bytes"] >= 5 * len(G), (a, b)
    assert b["pid"] == s.pid, b


# a -P rule whose socket path needs escaping in HTML and JSON, with a control
# character (dropped from both); nothing is proxied there
ODD_SOCKET = 'unix:/tmp/no"such<&\\\x01gatling.sock'


def test_server_status_backends(gatling):
    """-P's backends on the page: a table in HTML, an array with ?json (any
    other query is the HTML page): each backend's pool, address (escaped for
    each form), state and counts; a backend that refuses its connection
    counts a request and a failure (the client got 502)."""
    from conftest import free_port
    port = free_port()
    s = gatling({".proxy": "", "f.txt": F}, args=(
        "-T", "10", "-S", "-P", "127.0.0.1/%d/^/app/" % port, "-P", "F/%s:^/php/" % ODD_SOCKET))
    assert_status(fetch(s.port, "/app/x"), 502)
    b = status_json(s.port)["backends"]
    assert [(x["pool"], x["backend"]) for x in b] == [
        ("P1", "127.0.0.1/%d" % port), ("P2", 'unix:/tmp/no"such<&\\gatling.sock')], b
    assert (b[0]["requests"], b[0]["failures"], b[0]["outstanding"]) == (1, 1, 0), b[0]
    assert b[1]["requests"] == b[1]["failures"] == 0 and b[1]["state"] == "up", b[1]
    for target in ("/server-status", "/server-status?auto"):
        r = fetch(s.port, target)
        assert_status(r, 200, target)
        assert norm_ctype(r.header("Content-Type")) == "text/html;charset=utf-8", r
        page = r.body.decode()
        assert "<h2>Backends</h2>" in page and "<th>checks failed</th></tr>" in page, page
        rows = re.findall(r"<tr><td>(.*?)</td></tr>", page)
        assert rows[0].split("</td><td>")[:2] == ["P1", "127.0.0.1/%d" % port], rows
        assert rows[0].split("</td><td>")[3:6] == ["0", "1", "1"], rows[0]
        assert rows[1].split("</td><td>")[:3] == [
            "P2", "unix:/tmp/no&quot;such&lt;&amp;\\gatling.sock", "up"], rows[1]
        assert "\x01" not in page
    # -Z: no compression, no gzip cache: its rows say 0
    z = gatling({"f.txt": F * 100}, args=("-T", "10", "-S", "-Z"))
    r = fetch(z.port, "/f.txt", headers=[("Accept-Encoding", "gzip")])
    assert r.header("Content-Encoding") is None and r.body == F * 100, r
    st = status_json(z.port)
    assert [st[k] for k in ("gzip_skipped_busy", "gzip_paced", "gzip_paced_ms")] == [0, 0, 0], st


def test_server_status_off_by_default(srv):
    assert_status(fetch(srv.port, "/server-status"), 404)
    assert_status(fetch(srv.port, "/server-status?json"), 404)


# --------------------------------------------------------------------------
# -u and -c (the tests run as root)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def proc_ids(pid):
    ids = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid", "Groups"):
                ids[k] = v.split()
    return ids


@needs_root
def test_u_drops_privileges(gatling, build, tmp_path):
    nobody = pwd.getpwnam("nobody")
    log = tmp_path / "u.log"
    s = gatling(TREE, args=("-T", "10", "-u", "nobody", "-l", str(log)), env=no_leak_env(build))
    ids = proc_ids(s.pid)
    assert ids["Uid"] == [str(nobody.pw_uid)] * 4, ids
    assert ids["Gid"] == [str(nobody.pw_gid)] * 4, ids
    assert ids["Groups"] == [], "supplementary groups kept: %r" % ids
    assert_ok(fetch(s.port, "/f.txt"), F, "-u nobody, a world-readable file")
    assert_status(fetch(s.port, "/private.txt"), 403)
    assert len(wait_lines(log, 2)) == 2, "the log opened before -u is still written"


def jail_tree():
    return {"j.txt": b"inside the jail\n", "sub": {"x.txt": b"x\n"},
            "up.txt": Symlink("sub/../j.txt"),
            "sub/abs.txt": Symlink("/j.txt"),  # absolute, but inside the new root
            "prot": {".htaccess": b"Jail realm\nalice:" + crypt_hash("pw").encode() + b"\n",
                     "f.txt": b"protected in the jail\n"},
            "pf.txt": Symlink("prot/f.txt")}


@needs_root
def test_c_chroots(gatling, build, tmp_path):
    jail = make_docroot(str(tmp_path / "jail"), jail_tree())
    log = tmp_path / "c.log"
    s = gatling({"cwd.txt": b"cwd\n"}, env=no_leak_env(build),
                args=("-T", "10", "-c", jail, "-u", "nobody", "-l", str(log)))
    assert os.readlink("/proc/%d/root" % s.pid) == os.path.realpath(jail)
    assert proc_ids(s.pid)["Uid"][0] == str(pwd.getpwnam("nobody").pw_uid)
    assert_ok(fetch(s.port, "/j.txt"), b"inside the jail\n", "-c dir")
    assert_ok(fetch(s.port, "/sub/x.txt"), b"x\n")
    assert_status(fetch(s.port, "/cwd.txt"), 404, "-c: the old cwd is not served")
    assert_ok(fetch(s.port, "/up.txt"), b"inside the jail\n", "relative symlink in the jail")
    assert len(wait_lines(log, 4)) == 4, "the log opened before the chroot is still written"


@needs_root
def test_c_symlink_cannot_bypass_htaccess(gatling, build, tmp_path):
    # as without -c: a link in an open directory to a protected file is protected too
    jail = make_docroot(str(tmp_path / "jail"), jail_tree())
    s = gatling({"cwd.txt": b"cwd\n"}, env=no_leak_env(build), args=("-T", "10", "-c", jail))
    assert_status(fetch(s.port, "/prot/f.txt"), 401, "the protected file itself")
    r = fetch(s.port, "/pf.txt")
    assert_status(r, 401, "a symlink to a protected file, in a chroot")
    assert b"protected in the jail" not in r.body, r
    assert_ok(fetch(s.port, "/pf.txt", headers=[basic_auth("alice", "pw")]),
              b"protected in the jail\n")


@needs_root
def test_c_absolute_symlink_inside_chroot(gatling, build, tmp_path):
    # in the chroot "/" is the document root, so an absolute link to /j.txt
    # stays inside it (fs.c means to allow anything there: root_real is "/")
    jail = make_docroot(str(tmp_path / "jail"), jail_tree())
    s = gatling({"cwd.txt": b"cwd\n"}, env=no_leak_env(build), args=("-T", "10", "-c", jail))
    assert_ok(fetch(s.port, "/sub/abs.txt"), b"inside the jail\n",
              "absolute symlink to a file inside the chroot")
