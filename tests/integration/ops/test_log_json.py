"""--log-format json: one JSON object a line (RFC 8259), whatever bytes a client
sends, read back by Python's json and by jq; the fields gatling knows (protocol,
TLS, upstream, cache status); the same reopen on SIGUSR1 (issue 56)."""
import ftplib
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from test_config import backend
from conftest import (IO_TIMEOUT, free_port, http_only, H3Client, assert_status, make_docroot,
                      recv_to_eof, running_server, skip_without_h3, wait_for)
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it

# Plain passes only: the options, the checks and the upgrade are the same over
# any scheme, and the tests speak HTTPS, h2c and HTTP/3 themselves where they
# need them
pytestmark = http_only


# what the combined format has, then gatling's own
FIELDS = ["time", "remote", "request", "status", "bytes", "referer", "user_agent", "protocol",
          "tls_version", "tls_cipher", "client_verify", "client_s_dn", "client_i_dn",
          "client_serial", "client_fingerprint", "host", "vhost", "upstream", "upstream_us",
          "cache", "rule", "dcz", "duration_us", "grpc_status", "early_data"]


def raw(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as s:
        s.sendall(data)
        return recv_to_eof(s)


def read_lines(path, n, timeout=10):
    """The log's lines once there are n (the log is written at a loop round's end)."""
    def enough():
        if not os.path.exists(path):
            return False
        with open(path, "rb") as f:
            return f.read().count(b"\n") >= n
    wait_for(enough, timeout, "%d lines in %s" % (n, path))
    with open(path, "rb") as f:
        return f.read().splitlines()


def parse_all(path, n):
    """Every line through Python's json and through jq: the objects."""
    lines = read_lines(path, n)
    objs = [json.loads(l.decode("utf-8")) for l in lines]  # strict: invalid UTF-8 raises
    if shutil.which("jq"):
        r = subprocess.run(["jq", "-c", "."], stdin=open(path, "rb"), capture_output=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == len(lines)
    else:
        pytest.fail("jq is not installed (sh tests/setup.sh installs it)")
    for o in objs:
        assert list(o) == FIELDS or o.get("protocol") in ("ftp", "ftps"), o
    return objs


HOSTILE = [b"/q\"uote", b"/back\\slash", b"/ctl" + bytes(range(1, 32)), b"/del\x7f",
           b"/high" + bytes(range(0x80, 0x100)), b"/utf8-\xc3\xa9", b"/" + b"A\"\\%" * 1000,
           b"/nul\x00byte"]
AGENTS = [b"\"a\\b\xc3\xa9\xe2\x82\xac", b"\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xff",
          bytes(range(0x80, 0x100)), b"x\x01y"]


def test_hostile_request_lines_give_valid_json(build, tmp_path):
    """Request lines with quotes, backslashes, every control byte, 0x80-0xff, a
    4 KiB target and a NUL, and User-Agents with quotes, backslashes, valid
    and invalid UTF-8 (overlong, surrogate, above U+10FFFF): every line parses
    with Python's json and with jq.  What the parser takes comes back as it
    went (invalid UTF-8 as U+FFFD); what it refuses (controls and 0x80-0xff in
    a target) is logged as a null request, its 400 counted."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n"})
    log = str(tmp_path / "access.log")
    with running_server(build, root, ("--log-format", "json", "-l", log, "-T", "10")) as srv:
        for target in HOSTILE:
            raw(srv.port, b"GET " + target + b" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        for ua in AGENTS:
            raw(srv.port, b"GET /f.txt HTTP/1.1\r\nHost: h\r\nUser-Agent: " + ua +
                b"\r\nReferer: \"\\\xff\r\nConnection: close\r\n\r\n")
        raw(srv.port, b"\xff\xfe garbage that is no request\r\n\r\n")
        objs = parse_all(log, len(HOSTILE) + len(AGENTS) + 1)
    reqs = [o["request"] for o in objs]
    assert "GET /q\"uote HTTP/1.1" in reqs and "GET /back\\slash HTTP/1.1" in reqs, reqs
    long = [o for o in objs if o["request"] and len(o["request"]) > 4000]
    assert long and "A\"\\%" * 1000 in long[0]["request"], objs
    assert [o["status"] for o in objs if o["request"] is None] == [400] * 7, objs
    uas = [o["user_agent"] for o in objs if o["request"] == "GET /f.txt HTTP/1.1"]
    assert uas == ["\"a\\b\u00e9\u20ac", "\ufffd" * 10, "\ufffd" * 128], uas
    refs = [o["referer"] for o in objs if o["request"] == "GET /f.txt HTTP/1.1"]
    assert refs == ["\"\\\ufffd"] * 3, refs
    assert all(isinstance(o["status"], int) and isinstance(o["duration_us"], int) for o in objs)


def test_every_byte_gives_valid_json(build, tmp_path):
    """The bytes no parser lets through (0x00-0x1f in a request line, a NUL, a
    5000-byte field): t_alog logs them straight into a JSON line, which
    Python's json and jq read back, byte for byte where it is UTF-8."""
    out = str(tmp_path / "alog.json")
    r = subprocess.run([os.path.join(build.dir, "tests", "t_alog")], capture_output=True,
                       text=True, timeout=30, env=dict(os.environ, T_ALOG_OUT=out))
    assert r.returncode == 0 and "not ok" not in r.stdout, r.stdout + r.stderr
    objs = [json.loads(l) for l in read_lines(out, 2)]
    line = objs[0]["request"]
    assert line[:128] == "".join(chr(i) for i in range(128)), line[:128]
    assert line[128:] == "\ufffd" * 128
    assert objs[0]["vhost"] == "v\"h\x01" and objs[1]["request"] is None
    r = subprocess.run(["jq", "-r", ".request"], stdin=open(out, "rb"), capture_output=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout.startswith(bytes(range(0, 10))), r.stdout[:40]


def test_fields_tls_h2_upstream_cache_and_reopen(build, tmp_path):
    """Over HTTPS by HTTP/2: protocol h2, TLS 1.3 and its cipher; a proxied request:
    its backend and time; the cache's miss then hit; the vhost; after a rename
    and SIGUSR1 the lines go to a new file, still JSON."""
    root = str(tmp_path / "www")
    make_docroot(root, {"default/f.txt": "x\n", "default/.proxy": "",
                        "default/.cache": "ttl 60\n"})
    log = str(tmp_path / "access.log")
    port = backend(b"proxied", b"Cache-Control: max-age=60\r\n")
    args = ("--log-format", "json", "-l", log, "-C", os.path.join(pki_dir(), "certs"),
            "-e", "0", "-P", "127.0.0.1/%d/^/app/" % port, "--cache", "8M")
    with running_server(build, root, args) as srv:
        from conftest import https_port
        tls = https_port(srv)
        ca = os.path.join(pki_dir(), "ca.pem")
        for path in ("/f.txt", "/app/x", "/app/x"):
            r = subprocess.run(["curl", "-s", "--http2", "--cacert", ca, "-o", "/dev/null",
                                "https://localhost:%d%s" % (tls, path)], timeout=30)
            assert r.returncode == 0
        objs = parse_all(log, 3)
        os.rename(log, log + ".1")
        srv.send_signal(signal.SIGUSR1)
        time.sleep(0.3)
        r = subprocess.run(["curl", "-s", "--http1.1", "--cacert", ca, "-o", "/dev/null",
                            "https://localhost:%d/f.txt" % tls], timeout=30)
        assert r.returncode == 0
        after = parse_all(log, 1)
        srv.signaled = False
    f, miss, hit = objs
    assert f["protocol"] == "h2" and f["tls_version"] == "TLSv1.3" and f["tls_cipher"], f
    assert f["vhost"] == "default:%d" % tls and f["status"] == 200 and f["bytes"] == 2, f
    assert f["host"] == "localhost:%d" % tls, f  # what the client asked for (:authority)
    assert f["upstream"] is None and f["upstream_us"] is None and f["cache"] is None, f
    assert miss["upstream"] == "127.0.0.1/%d" % port and miss["upstream_us"] >= 0, miss
    assert "miss" in miss["cache"], miss
    assert "hit" in hit["cache"] and hit["upstream"] is None, hit
    # the directory that served, for a hit as for the miss (a hit once logged
    # the name asked for: "localhost")
    assert miss["vhost"] == hit["vhost"] == "default:%d" % tls, (miss, hit)
    assert after[0]["protocol"] == "h1" and after[0]["tls_version"].startswith("TLSv1."), after


def test_host_asked_beside_the_vhost_served(build, tmp_path):
    """The Host the client sent beside the directory that served it (issue
    68: a request served from the document root logged only "-:PORT", not
    which name it was for); null without a Host."""
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n", "a.example/f.txt": "a\n"})
    log = str(tmp_path / "access.log")
    with running_server(build, root, ("--log-format", "json", "-l", log)) as srv:
        for req in (b"GET /f.txt HTTP/1.1\r\nHost: A.Example:%d\r\nConnection: close\r\n\r\n",
                    b"GET /f.txt HTTP/1.1\r\nHost: www.nowhere.test\r\nConnection: close\r\n\r\n",
                    b"GET /f.txt HTTP/1.0\r\n\r\n"):
            assert b" 200 " in raw(srv.port, req.replace(b"%d", b"%d" % srv.port))
        objs = parse_all(log, 3)
    named, root_served, none = objs
    assert named["host"] == "A.Example:%d" % srv.port and \
        named["vhost"] == "a.example:%d" % srv.port, named
    assert root_served["host"] == "www.nowhere.test" and \
        root_served["vhost"] == "-:%d" % srv.port, root_served
    assert none["host"] is None, none


def test_h3_line(build, tmp_path):
    """Over HTTP/3: protocol h3, TLS 1.3 and the suite the client took, in the
    RFC's (and OpenSSL's) spelling, for each suite an h3 client offers."""
    skip_without_h3(build.binary)
    root = str(tmp_path / "www")
    make_docroot(root, {"f.txt": "x\n"})
    log = str(tmp_path / "access.log")
    args = ("--log-format", "json", "-l", log, "-C", os.path.join(pki_dir(), "certs"), "-e", "0")
    suites = ("AES_128_GCM_SHA256", "AES_256_GCM_SHA384", "CHACHA20_POLY1305_SHA256")
    with running_server(build, root, args) as srv:
        from conftest import https_port
        for suite in suites:
            c = H3Client(https_port(srv), cipher_suites=[suite])
            try:
                assert_status(c.request("/f.txt"), 200)
            finally:
                c.close()
        objs = parse_all(log, len(suites))
    for o, suite in zip(objs, suites):
        assert o["protocol"] == "h3" and o["tls_version"] == "TLSv1.3", o
        assert o["tls_cipher"] == "TLS_" + suite, (suite, o)


def test_ftp_transfers_give_valid_json(build, tmp_path):
    """-f with --log-format json: each FTP transfer is one JSON line with the fields an FTP
    transfer has (remote, user, the command and path as the request, the reply code as the
    status, the bytes, protocol "ftp"), for a path with a quote, a backslash and UTF-8 too;
    a RETR refused (550) is no transfer and no line, as in the combined format."""
    names = {"plain.txt": "x" * 1000, "q\"b\\s.txt": "quoted\n", "\u00e9t\u00e9.txt": "utf8\n"}
    root = str(tmp_path / "www")
    make_docroot(root, names)
    log = str(tmp_path / "access.log")
    port = free_port()
    with running_server(build, root, ("--log-format", "json", "-l", log, "-T", "10",
                                      "-f", str(port))) as srv:
        f = ftplib.FTP(encoding="utf-8")
        f.connect("127.0.0.1", port, timeout=IO_TIMEOUT)
        f.login()
        got = {}
        for name in names:
            out = bytearray()
            f.retrbinary("RETR /" + name, out.extend)
            got[name] = out.decode()
        with pytest.raises(ftplib.error_perm):
            f.retrbinary("RETR /missing.txt", lambda b: None)
        f.quit()
        assert got == names
    objs = parse_all(log, len(names))  # after the exit: everything flushed
    assert len(objs) == len(names) and all(o["protocol"] == "ftp" for o in objs), objs
    for o, name in zip(objs, names):
        assert list(o) == ["time", "remote", "user", "request", "status", "bytes", "protocol"], o
        assert o["request"] == "RETR /" + name and o["status"] == 226, o
        assert o["bytes"] == len(names[name].encode()) and o["remote"] == "127.0.0.1", o
        assert o["user"] == "anonymous" and o["time"].endswith("Z"), o
