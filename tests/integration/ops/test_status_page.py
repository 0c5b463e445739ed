"""/server-status as an admin reads it (issue 81): sections with their zero
rows folded, what is wrong marked with what it means, the rates of the last
10 s, and graphs of the last 15 minutes from a ring of one-second samples
(?json's "series"), drawn by a script of the server's own (?js, ?css) under
a strict Content-Security-Policy.

The series are checked against the counters after a known number of
requests: once a sample has been taken after the last request, every
series summed over the ring equals its counter (requests, bytes, 4xx).
Headless Chromium (Debian's chromium, driven over the DevTools protocol)
loads the page while bench/'s load generator loads a -P backend that the
test then kills: the graphs' point counts grow between two looks, the
dead backend is marked (its state cell and a red warning) and a
certificate in its renewal window too (amber), every request
the page made went to the server's own origin (the DevTools' Network
events), and a screenshot is kept in the test's tmp dir.  Skipped where
chromium or bench is missing (tests/setup.sh installs chromium).
"""
import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import Client, fetch, free_port, http_only
from feature_helpers import assert_ok, assert_status, norm_ctype, wait_for
from test_loadgen import PyServer, read_request

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
F = b"the f file\n" * 20
TREE = {"f.txt": F, ".proxy": ""}


def status_json(port, query="json", client=None):
    target = "/server-status?" + query
    r = client.request(target) if client else fetch(port, target)
    assert_status(r, 200, target)
    assert norm_ctype(r.header("Content-Type")) == "application/json", r
    return json.loads(r.body)


def summed(series, key):
    v = series[key]
    return sum(sum(x) for x in v.values()) if isinstance(v, dict) else sum(v)


def test_series_against_the_counters(gatling):
    """25 files and 5 misses: once a sample follows the last of them, the
    ring's requests, bytes and 4xx summed equal the counters, the last 10 s
    hold the 30 requests, and ?json&since=T has only the samples after T."""
    srv = gatling(TREE, args=("-T", "10", "-S"))
    with Client(srv.port) as c:
        for _ in range(25):
            assert_ok(c.request("/f.txt"), F)
        for _ in range(5):
            assert_status(c.request("/missing"), 404)

    def settled():
        time.sleep(1.2)  # more than a sample apart: each look's own request is in the ring
        j = status_json(srv.port)
        s = j["series"]
        return j if (summed(s, "requests") == j["requests"] and
                     summed(s, "bytes") == j["bytes"]) else None
    j = wait_for(settled, timeout=15, step=0)
    assert j, "the ring never caught up with the counters"
    s = j["series"]
    assert j["requests"] >= 30 and j["responses_4xx"] == 5, j
    assert summed(s, "responses_4xx") == 5 and summed(s, "responses_5xx") == 0, s
    assert len(s["t"]) == len(s["bytes"]) == len(s["connections"]) <= s["slots"] == 900
    assert s["t"] == sorted(s["t"]) and s["t"][-1] <= j["now"], s["t"]
    c = j["series_10s"]  # the last hour's ten-second sums: none closed yet, or each a 10 s end
    assert c["interval"] == 10 and c["slots"] == 360 and all(t % 10 == 0 for t in c["t"]), c
    assert summed(c, "requests") <= summed(s, "requests"), c
    # the requests' durations give a latency in the seconds that had them
    assert any(p > 0 for p in s["latency_p50_us"]), s
    assert all(a <= b <= c for a, b, c in zip(s["latency_p50_us"], s["latency_p90_us"],
                                              s["latency_p99_us"]))
    w = j["window"]
    assert 1 <= w["seconds"] <= 10, w
    assert sum(w["requests_" + p] for p in ("http1", "h2", "h3", "ftp")) <= j["requests"]
    assert j["warnings"] == [], j["warnings"]
    # since: only what is newer (the page's refresh)
    t = s["t"][-1]
    later = status_json(srv.port, "json&since=%d" % t)["series"]
    assert all(x > t for x in later["t"]), (t, later["t"])
    assert len(later["t"]) < len(s["t"]), later
    # a malformed since is the HTML page, as any other query
    r = fetch(srv.port, "/server-status?json&since=x")
    assert_status(r, 200)
    assert norm_ctype(r.header("Content-Type")) == "text/html;charset=utf-8", r


def test_sections_fold_zero_rows_under_a_strict_csp(gatling):
    """The HTML page: one section per subject, rows that are 0 inside a
    <details>, the others before it; no inline script or style (the CSP
    allows only 'self'); the script and style sheet come from ?js and ?css;
    no URL to any other origin anywhere in them."""
    srv = gatling(TREE, args=("-T", "10", "-S"))
    assert_ok(fetch(srv.port, "/f.txt"), F)
    r = fetch(srv.port, "/server-status")
    assert_status(r, 200)
    csp = r.header("Content-Security-Policy")
    assert csp and "script-src 'self'" in csp and "default-src 'none'" in csp, r
    assert "unsafe-inline" not in csp, csp
    page = r.body.decode()
    for sid in ("traffic", "conns", "tls", "h2h3", "cache", "compress", "backends", "cgi", "ftp"):
        assert 'id="s-%s"' % sid in page, sid
    traffic = page.split('<section id="s-traffic">')[1].split("</section>")[0]
    shown, folded = traffic.split("<details", 1)
    assert re.search(r"<th>requests</th><td>[1-9]", shown), shown
    assert "<td>0</td>" not in shown and "<td>0</td>" in folded, traffic
    assert '<section class="quiet" id="s-ftp">' in page  # nothing but zeros: greyed
    assert not re.search(r"<script(?![^>]*\bsrc=)", page), "an inline script"
    assert "<style" not in page and " style=" not in page
    assert '<ul id="warnings">' in page and "nothing wrong" in page
    for q, ctype in (("js", "text/javascript"), ("css", "text/css")):
        a = fetch(srv.port, "/server-status?" + q)
        assert_status(a, 200, q)
        assert norm_ctype(a.header("Content-Type")).startswith(ctype), a
        assert len(a.body) > 1000 and b"\0" not in a.body, q
        urls = re.findall(rb"https?://[^\s\"')]+", a.body)
        assert urls in ([], [b"http://www.w3.org/2000/svg"]), urls  # a namespace's name
    assert not re.findall(r"https?://", page), "a URL in the page"


def dated_cert(directory, name, days_ago, days_left, hosts=None):
    """A self-signed certificate for hosts (default: name) valid from days_ago
    days before now to days_left days after it, as
    directory/name/{fullchain,privkey}.pem."""
    hosts = hosts or [name]
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=days_ago))
            .not_valid_after(now + datetime.timedelta(days=days_left))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    d = os.path.join(directory, name)
    os.makedirs(d)
    with open(os.path.join(d, "fullchain.pem"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(d, "privkey.pem"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.chmod(os.path.join(d, "privkey.pem"), 0o600)


@http_only  # its own -C
def test_certificate_near_its_end_is_marked(gatling, tmp_path):
    """The rule gatling.8 and README state (issue 90): fewer than 30 days
    left, or a quarter of its lifetime when that is less.  Marked: 85 days
    long with 5 left, 10 days long with 2 left, a year long with 20 left;
    not: 90 days long with 60 left, a year long with 100 left (the last
    third, as the code had it, marked it), 10 days long with 10 left.  Each
    named by the hosts it serves (three, and how many more) and its file."""
    certs = str(tmp_path / "certs")
    os.makedirs(certs)
    dated_cert(certs, "soon", 80, 5, ["soon.test"])
    dated_cert(certs, "short.test", 8, 2)
    dated_cert(certs, "late.test", 345, 20)
    dated_cert(certs, "many", 80, 5, ["a.test", "b.test", "c.test", "d.test"])
    for name, ago, left in (("fine.test", 30, 60), ("year.test", 265, 100),
                            ("ten.test", 0, 10)):
        dated_cert(certs, name, ago, left)
    srv = gatling(TREE, args=("-T", "10", "-S", "-C", certs, "-e", "0"))
    j = status_json(srv.port)
    marked = {w["what"].split(" (")[1].split(")")[0]: w for w in j["warnings"]
              if w["what"].startswith("cert")}
    assert set(marked) == {"soon", "short.test", "late.test", "many"}, j["warnings"]
    assert all(w["level"] == "warn" and "--acme" in w["means"] and "there there" not in
               w["means"].replace("it there it", "there there") for w in marked.values())
    assert re.fullmatch(r"certificate for soon\.test \(soon\) expires in (4\.9|5\.0) days",
                        marked["soon"]["what"]), marked
    assert marked["many"]["what"].startswith(
        "certificate for a.test, b.test, c.test and 1 more (many) expires in "), marked
    assert "fewer than 30 days left" in marked["soon"]["means"], marked
    page = fetch(srv.port, "/server-status").body.decode()
    assert re.search(r'<li class="warn"><b>certificate for soon\.test \(soon\) expires in',
                     page), page[:2000]
    assert "fine.test (" not in page and "year.test (" not in page and "ten.test (" not in page


@http_only  # its own -C
def test_certificate_that_cannot_be_reloaded_is_marked(gatling, tmp_path):
    """-u nobody, a private key only root may read (issue 90): loaded at
    start as root, a renewal (the files changed) fails to load as nobody
    ("Permission denied") and the old certificate stays.  The page's "what
    is wrong" list says so in red, naming the file and what to do; a reload
    that works again clears it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start with -u nobody")
    certs = str(tmp_path / "certs")
    os.makedirs(certs)
    dated_cert(certs, "locked.test", 1, 300)
    for d in (str(tmp_path), certs, os.path.join(certs, "locked.test")):
        os.chmod(d, 0o755)
    key = os.path.join(certs, "locked.test", "privkey.pem")
    srv = gatling(TREE, args=("-T", "10", "-S", "-C", certs, "-e", "0", "-u", "nobody"))
    assert not [w for w in status_json(srv.port)["warnings"] if "reloaded" in w["what"]]
    os.utime(key, (time.time() + 5, time.time() + 5))  # renewed by root, still 0600
    srv.send_signal(signal.SIGUSR1)
    assert wait_for(lambda: any("reloading the certificates failed" in l for l in srv.errlog),
                    5), srv.errlog
    bad = [w for w in status_json(srv.port)["warnings"] if "cannot be reloaded" in w["what"]]
    assert len(bad) == 1 and bad[0]["level"] == "bad", status_json(srv.port)["warnings"]
    assert "locked.test" in bad[0]["what"] and "Permission denied" in bad[0]["what"], bad
    assert "readable by -u" in bad[0]["means"], bad
    page = fetch(srv.port, "/server-status").body.decode()
    assert re.search(r'<li class="bad"><b>certificates cannot be reloaded: [^<]*locked\.test',
                     page), page[:3000]
    os.chmod(key, 0o644)
    os.utime(key, (time.time() + 10, time.time() + 10))
    srv.send_signal(signal.SIGUSR1)
    assert wait_for(lambda: not [w for w in status_json(srv.port)["warnings"]
                                 if "cannot be reloaded" in w["what"]], 5), srv.errlog


# ---------------------------------------------------------------- Chromium

def answer_ok(c, server):
    """A backend's connection (test_loadgen's PyServer): "ok" to each request."""
    buf = b""
    while not server.closed:
        head, buf = read_request(c, buf)
        if head is None:
            return
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")


@contextlib.contextmanager
def chromium(home):
    """Headless Chromium with DevTools on a port of its choosing, in a
    session of its own whose process group is killed on the way out."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-proxy-server", "--window-size=1300,1500", "--user-data-dir=" + home + "/profile",
           "--remote-debugging-port=0", "about:blank"]
    with open(os.path.join(home, "stderr"), "wb") as errf:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=errf, env=dict(os.environ, HOME=home),
                             start_new_session=True)
    try:
        active = os.path.join(home, "profile", "DevToolsActivePort")
        assert wait_for(lambda: os.path.exists(active) and open(active).read().count("\n"),
                        timeout=30, step=0.05), "no DevToolsActivePort"
        port = int(open(active).read().split()[0])
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=15) as r:
            pages = [t for t in json.loads(r.read()) if t["type"] == "page"]
        yield pages[0]["webSocketDebuggerUrl"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


POINTS = "Array.from(document.querySelectorAll('svg[data-chart]'))" \
         ".map(s => [s.dataset.chart, +s.dataset.points])"
MARKS = """({bad: Array.from(document.querySelectorAll('table.be b.bad')).map(b => b.textContent),
  warnings: Array.from(document.querySelectorAll('#warnings li.bad')).map(l => l.textContent),
  amber: Array.from(document.querySelectorAll('#warnings li.warn')).map(l => l.textContent),
  charts: Array.from(document.querySelectorAll('figure.chart.bad figcaption'))
          .map(f => f.textContent),
  state: (document.getElementById('state') || {}).textContent})"""


async def look(ws_url, url, shot, between):
    """Load url, look at the graphs twice `between` s apart, take the marks
    and a screenshot; every URL the page asked for, from Network events."""
    from test_proxy import import_websockets
    websockets = import_websockets()
    asked, ids = [], iter(range(1, 1 << 30))
    async with websockets.connect(ws_url, max_size=None) as ws:
        async def call(method, **params):
            n = next(ids)
            await ws.send(json.dumps({"id": n, "method": method, "params": params}))
            while True:
                msg = json.loads(await ws.recv())
                if msg.get("method") == "Network.requestWillBeSent":
                    asked.append(msg["params"]["request"]["url"])
                if msg.get("id") == n:
                    assert "error" not in msg, (method, msg)
                    return msg["result"]

        async def value(expr):
            r = await call("Runtime.evaluate", expression=expr, returnByValue=True)
            assert "exceptionDetails" not in r, r
            return r["result"]["value"]

        async def pause(secs):  # the events keep coming meanwhile
            end = time.monotonic() + secs
            while time.monotonic() < end:
                await call("Runtime.evaluate", expression="1")
                await asyncio.sleep(0.2)

        await call("Network.enable")
        await call("Page.enable")
        await call("Page.navigate", url=url)
        await pause(3)
        first = dict(await value(POINTS))
        await pause(between)
        second = dict(await value(POINTS))
        marks = await value(MARKS)
        png = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png["data"]))
    return first, second, marks, asked


@http_only
@pytest.mark.skipif(not CHROMIUM, reason="no chromium (tests/setup.sh installs it)")
def test_chromium_sees_graphs_move_and_the_dead_backend(gatling, build, tmp_path):
    bench = os.path.join(os.path.dirname(build.binary), "bench")
    if not os.access(bench, os.X_OK):
        pytest.skip("no bench beside %s (make tests-build builds it)" % build.binary)
    certs = str(tmp_path / "certs")
    os.makedirs(certs)
    dated_cert(certs, "soon.test", 80, 5)  # in its renewal window
    # a pool's last backend is never taken out: two, one killed under load
    live, be = PyServer(answer_ok), PyServer(answer_ok)
    srv = gatling(TREE, args=("-T", "10", "-S", "-P", "@web/^/app/", "--pool",
                              "web=127.0.0.1/%d,127.0.0.1/%d;fails=2;window=30;down=60"
                              % (live.port, be.port), "-C", certs, "-e", "0"),
                  check_fds=False)
    base = "http://127.0.0.1:%d" % srv.port
    assert_ok(fetch(srv.port, "/app/x"), b"ok\n")
    loads = [subprocess.Popen([bench, "-q", "-c", "2", "-d", "25", base + path],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for path in ("/f.txt", "/app/x")]
    try:
        time.sleep(2)
        be.close()  # the backend dies under load: 502s, then it is taken out
        assert wait_for(lambda: [b["state"] != "up" for b in status_json(srv.port)["backends"]]
                        == [False, True], timeout=15, step=0.3), \
            status_json(srv.port)["backends"]
        with tempfile.TemporaryDirectory(prefix="gatling-chromium-") as home:
            with chromium(home) as ws_url:
                first, second, marks, asked = asyncio.run(asyncio.wait_for(
                    look(ws_url, base + "/server-status", str(tmp_path / "status.png"), 4), 60))
    finally:
        for p in loads:
            p.kill()
            p.wait()
        be.close()
        live.close()
    # the graphs move: each chart has more points than 4 s before
    assert set(first) >= {"requests", "bytes", "connections", "errors", "cache", "latency",
                          "backend-0", "backend-1"}, first
    assert all(second[k] > first[k] for k in first), (first, second)
    # the dead backend: its state cell, a red warning, its chart; the live one is not
    assert marks["bad"], marks
    assert any("127.0.0.1/%d" % be.port in w and " is " in w for w in marks["warnings"]), marks
    assert [c for c in marks["charts"] if "127.0.0.1/" in c] == [
        c for c in marks["charts"] if "127.0.0.1/%d" % be.port in c] != [], marks
    assert any(w.startswith("certificate for soon.test (soon.test) expires in")
               for w in marks["amber"]), marks
    assert "updated" in (marks["state"] or ""), marks
    # only this server was asked: the page, ?css, ?js, ?json and the page again
    assert asked and all(u.startswith(base + "/") for u in asked), asked
    assert any("?json" in u for u in asked) and any(u.endswith("?js") for u in asked), asked
    assert os.path.getsize(tmp_path / "status.png") > 10000


@http_only
@pytest.mark.skipif(not CHROMIUM, reason="no chromium (tests/setup.sh installs it)")
def test_chromium_sees_a_certificate_that_cannot_be_reloaded(gatling, tmp_path):
    """Issue 90: as an admin sees it, in Chromium: -u nobody, a renewed key
    only root may read, and the page's "what is wrong" list has it in red,
    with the file and why; a screenshot is taken."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start with -u nobody")
    certs = str(tmp_path / "certs")
    os.makedirs(certs)
    dated_cert(certs, "locked.test", 1, 300)
    for d in (str(tmp_path), certs, os.path.join(certs, "locked.test")):
        os.chmod(d, 0o755)
    key = os.path.join(certs, "locked.test", "privkey.pem")
    srv = gatling(TREE, args=("-T", "10", "-S", "-C", certs, "-e", "0", "-u", "nobody"))
    os.utime(key, (time.time() + 5, time.time() + 5))
    srv.send_signal(signal.SIGUSR1)
    assert wait_for(lambda: any("reloading the certificates failed" in l for l in srv.errlog),
                    5), srv.errlog
    base = "http://127.0.0.1:%d" % srv.port
    with tempfile.TemporaryDirectory(prefix="gatling-chromium-") as home:
        with chromium(home) as ws_url:
            _, _, marks, _ = asyncio.run(asyncio.wait_for(
                look(ws_url, base + "/server-status", str(tmp_path / "status.png"), 0), 60))
    red = [w for w in marks["warnings"] if w.startswith("certificates cannot be reloaded")]
    assert len(red) == 1 and "locked.test/privkey.pem: Permission denied" in red[0], marks
    assert "readable by -u" in red[0], marks
    assert os.path.getsize(tmp_path / "status.png") > 10000
