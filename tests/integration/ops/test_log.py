"""Access log: Combined Log Format on stdout, one line per request; -n: none."""
import datetime
import json
import re
import shutil
import subprocess
import time

import pytest

from conftest import (MUX, LOG_VERSION, TLS, TEXT, Client, close_all_clients, http_only,
                      make_docroot, start_server)

CLF = re.compile(r'(?P<host>\S+) (?P<ident>\S+) (?P<user>\S+) '
                 r'\[(?P<time>\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\] '
                 r'"(?P<request>(?:[^"\\]|\\.)*)" (?P<status>\d{3}) (?P<bytes>\d+|-) '
                 r'"(?P<referer>(?:[^"\\]|\\.)*)" "(?P<agent>(?:[^"\\]|\\.)*)"'
                 + (" https" if TLS else ""))

# (method, target, extra headers, expected status, expected bytes)
REQUESTS = [
    ("GET", "/f.txt", ["User-Agent: curl/7.88.1"], 200, str(len(TEXT))),
    ("HEAD", "/f.txt", ["User-Agent: tester"], 200, "-"),
    ("GET", "/missing.txt", ["Referer: http://example.com/page", "User-Agent: ua/1"], 404, None),
    ("GET", "/f.txt", [], 200, str(len(TEXT))),
    ("GET", "/f.txt", ['User-Agent: evil "quoted" agent', 'Referer: http://x/"q"'], 200,
     str(len(TEXT))),
    ("GET", "/f.txt?x=1", ["User-Agent: q"], 200, str(len(TEXT))),
    ("GET", "/empty.txt", [], 200, None),
]


@pytest.fixture(scope="module")
def logrun(build, tmp_path_factory):
    """Run the REQUESTS against a fresh server, stop it, return (lines, t0, t1)."""
    base = tmp_path_factory.mktemp("log-" + build.name)
    root = make_docroot(str(base / "root"), {"f.txt": TEXT, "empty.txt": b""})
    srv = start_server(build, root, ("-T", "10"))
    t0 = time.time()
    try:
        with Client(srv.port) as c:
            for m, t, h, st, _ in REQUESTS:
                r = c.request(t, method=m, headers=h)
                assert r.status == st, (m, t, r)
        # a second connection, HTTP/1.0 (HTTP/1.1 over HTTP/2)
        with Client(srv.port) as c:
            c.request("/f.txt", version="HTTP/1.1" if MUX else "HTTP/1.0",
                      headers=["User-Agent: old"])
        srv.wait_log(len(REQUESTS) + 1, timeout=10.0)
    finally:
        close_all_clients()
        srv.finish()
    return srv.log, t0, time.time()


def test_one_line_per_request(logrun):
    lines, _, _ = logrun
    assert len(lines) == len(REQUESTS) + 1, "%d log lines for %d requests:\n%s" % (
        len(lines), len(REQUESTS) + 1, "\n".join(lines))


def test_lines_are_combined_format(logrun):
    lines, t0, t1 = logrun
    for ln in lines:
        m = CLF.fullmatch(ln)
        assert m, "not a Combined Log Format line: %r" % ln
        assert m["host"] == "127.0.0.1" and m["ident"] == "-" and m["user"] == "-", ln
        when = datetime.datetime.strptime(m["time"], "%d/%b/%Y:%H:%M:%S %z").timestamp()
        assert t0 - 2 <= when <= t1 + 2, "log time %r is not the request time" % m["time"]


def test_fields(logrun):
    lines, _, _ = logrun
    assert len(lines) >= len(REQUESTS), lines
    for ln, (meth, t, hdrs, st, nbytes) in zip(lines, REQUESTS):
        m = CLF.fullmatch(ln)
        assert m, ln
        assert m["request"] == "%s %s %s" % (meth, t, LOG_VERSION), ln
        assert int(m["status"]) == st, ln
        if nbytes is not None:
            assert m["bytes"] == nbytes, "bytes field %r, want %r: %s" % (
                m["bytes"], nbytes, ln)
        h = dict(x.split(": ", 1) for x in hdrs)
        want_ref = h.get("Referer", "-").replace('"', '\\"')
        want_ua = h.get("User-Agent", "-").replace('"', '\\"')
        assert m["referer"] == want_ref, "referer %r, want %r: %s" % (m["referer"], want_ref, ln)
        assert m["agent"] == want_ua, "agent %r, want %r: %s" % (m["agent"], want_ua, ln)
    assert CLF.fullmatch(lines[len(REQUESTS)])["request"] == "GET /f.txt " + (
        LOG_VERSION if MUX else "HTTP/1.0")


def test_404_bytes_is_body_length(logrun):
    lines, _, _ = logrun
    m = CLF.fullmatch(lines[2])
    assert m and m["status"] == "404"
    assert m["bytes"] != "-" and int(m["bytes"]) > 0, "a 404 with a body logs its size: %s" % (
        lines[2])


def test_empty_file_bytes(logrun):
    lines, _, _ = logrun
    m = CLF.fullmatch(lines[6])
    assert m and m["bytes"] in ("0", "-"), lines[6]


def test_quotes_escaped(logrun):
    lines, _, _ = logrun
    assert r'"evil \"quoted\" agent"' in lines[4], lines[4]
    assert r'"http://x/\"q\""' in lines[4], lines[4]


def test_goaccess_reads_log(logrun, tmp_path):
    exe = shutil.which("goaccess")
    if not exe:
        pytest.skip("goaccess not installed")
    lines, _, _ = logrun
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "report.json"
    p = subprocess.run([exe, str(log), "--log-format=COMBINED", "--no-progress", "-o", str(out)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    assert p.returncode == 0, p.stdout.decode(errors="replace")
    g = json.loads(out.read_text())["general"]
    assert g["total_requests"] == len(lines) and g["failed_requests"] == 0, g


def test_no_log_with_n(gatling):
    srv = gatling({"f.txt": TEXT}, args=("-T", "10", "-n"))
    with Client(srv.port) as c:
        for _ in range(3):
            assert c.request("/f.txt").status == 200
        assert c.request("/nope").status == 404
    close_all_clients()
    srv.finish()
    assert srv.log == [], "-n but the server logged:\n%s" % "\n".join(srv.log)


def test_log_written_promptly(gatling):
    # the log is useful only if lines show up while the server runs (not only at exit)
    srv = gatling({"f.txt": TEXT})
    with Client(srv.port) as c:
        c.request("/f.txt")
    lines = srv.wait_log(1, timeout=10.0)  # the alternative is at exit: never, here
    assert len(lines) == 1, "no access-log line on stdout within 10 s of the request"


@http_only
def test_dual_stack_clients_by_their_own_address(gatling):
    """On a dual-stack listener (-i ::) each client is known by its own
    address, an IPv4 one not by its v4-mapped form: in the access log, and
    as a CGI program's REMOTE_ADDR."""
    import socket
    from conftest import Mode, recv_to_eof
    cgi = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s' \"$REMOTE_ADDR\"\n"
    srv = gatling({"f.txt": TEXT, "addr.cgi": Mode(cgi, 0o755)},
                  args=("-T", "10", "-i", "::", "-w", r"\.cgi$"))
    for family, host, want in ((socket.AF_INET6, "::1", "::1"),
                               (socket.AF_INET, "127.0.0.1", "127.0.0.1")):
        for path in ("/f.txt", "/addr.cgi"):
            with socket.socket(family) as s:
                s.settimeout(10)
                s.connect((host, srv.port))
                s.sendall(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path.encode())
                got = recv_to_eof(s)  # HTTP/1.0: the body runs to the close
            assert got.startswith(b"HTTP/1.1 200"), got
            if path == "/addr.cgi":
                assert got.endswith(b"\r\n\r\n" + want.encode()), (want, got)
    lines = srv.wait_log(4, timeout=10.0)
    assert [CLF.match(l).group("host") for l in lines] == ["::1"] * 2 + ["127.0.0.1"] * 2, lines
