"""HTTP/3 with a real browser (issue 34): Debian's Chromium, headless, loads
a demo-like page from gatling over QUIC and its own Resource Timing says so.

Chromium is told to use QUIC for the origin from the first request
(--origin-to-force-quic-on=127.0.0.1:PORT: no Alt-Svc round trip first) and
to accept the test CA's leaf by its key (--ignore-certificate-errors-spki-list,
the base64 SHA-256 of the leaf's SubjectPublicKeyInfo, computed here with
openssl: Chromium has its own certificate store, so the CA is not trusted
otherwise).  The origin is 127.0.0.1, a name the leaf carries: the test
servers listen on 127.0.0.1 only, and with localhost:PORT Chromium's QUIC
handshake failed (tried by hand: it goes to ::1 and does not fall back).
The page's script writes performance.getEntries() into the DOM on the load
event and --dump-dom prints the DOM after it: no DevTools client is needed.
The test requires nextHopProtocol "h3" for the page and every asset (CSS, a
script, PNG and SVG images, a 512 KiB script that takes several
flow-control windows, 16 more images asked for at once), each in the access
log as HTTP/3.0 and counted under protocol h3 in /metrics, and a QUIC
handshake without failures in /server-status.  A second test forces
nothing: the page comes over HTTP/2, and gatling's Alt-Svc alone moves
Chromium's next fetches to HTTP/3.  Chromium runs in a session of its own,
bounded at 15 s, and its process group is killed at the end whatever
happened.  Both fail with -3 (checked by hand: net::ERR_QUIC_HANDSHAKE_FAILED;
50 fetches all over h2).  The second kills Chromium with its connection
open, and the server must still exit within the fixture's 5 s of SIGTERM:
that found the drain waiting out -T for a client that never acknowledged
its last packets (fixed in quic/quic.c; test_h3.py's
test_sigterm_with_a_vanished_client tests it without a browser).

One Chromium run takes about a second here (2 CPUs), the module about
3 s a build, so it runs once per build in the plain pass (each backend,
and the sanitizer build); run-check leaves it out of the HTTPS and h2
passes (HTTPS_SKIP): its server is the same in every scheme.  Skipped,
with the reason, where chromium is not installed (tests/setup.sh installs
it) or the build has no HTTP/3."""
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

from conftest import https_port, random_bytes, skip_without_h3
from test_proxy import import_websockets
from conftest import test_pki as pki_dir

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# 1x1 PNG
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwAD"
                       "hgGAWjR9awAAAABJRU5ErkJggg==")
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" ' \
      b'height="8" fill="#c00"/></svg>\n'
# a script of 512 KiB (comments around one statement): more than a stream's
# first window (256 KiB), so the transfer needs Chromium's window updates
BIG_JS = b"".join(b"// %s\n" % base64.b64encode(random_bytes(96, i)) for i in range(4000))
BIG_JS = BIG_JS[:(512 << 10) - 32].rsplit(b"\n", 1)[0] + b"\nwindow.big = 1;\n"
# small images, requested at once: concurrent streams on one connection
TILES = 16
INDEX = b"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gatling over HTTP/3</title>
<link rel="stylesheet" href="style.css">
<script src="app.js"></script>
<script src="js/big.js"></script>
</head><body>
<h1>It works: gatling is serving this page over HTTP/3.</h1>
<img src="img/dot.png" alt="dot"> <img src="img/box.svg" alt="box">
""" + b"".join(b'<img src="img/tile%02d.png" alt="">' % i for i in range(TILES)) + b"""
<pre id="entries">pending</pre>
<script>
window.addEventListener("load", function () {
  var out = performance.getEntries().filter(function (e) {
    return e.entryType === "navigation" || e.entryType === "resource";
  }).map(function (e) {
    return {name: e.name, type: e.entryType, proto: e.nextHopProtocol};
  });
  document.getElementById("entries").textContent =
    JSON.stringify({app: window.app, big: window.big, entries: out});
});
</script>
</body></html>
"""
ASSETS = ["/style.css", "/app.js", "/js/big.js", "/img/dot.png", "/img/box.svg"] + [
    "/img/tile%02d.png" % i for i in range(TILES)]
TREE = {
    "index.html": INDEX,
    "style.css": b"body { font-family: sans-serif; color: #222 }\nimg { width: 8px }\n",
    "app.js": b"window.app = 'ok';\n",
    "js": {"big.js": BIG_JS},
    "img": dict({"dot.png": PNG, "box.svg": SVG},
                **{"tile%02d.png" % i: PNG for i in range(TILES)}),
    "favicon.ico": PNG,
}


@pytest.fixture(autouse=True)
def browser_and_h3(build):
    if not CHROMIUM:
        pytest.skip("needs Debian's chromium (tests/setup.sh installs it)")
    skip_without_h3(build.binary)


def leaf_spki_sha256(pem):
    """base64(SHA-256(SubjectPublicKeyInfo)) of the certificate in pem, as
    --ignore-certificate-errors-spki-list wants it."""
    pub = subprocess.run(["openssl", "x509", "-in", pem, "-noout", "-pubkey"], check=True,
                         capture_output=True, timeout=10).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub,
                         check=True, capture_output=True, timeout=10).stdout
    dig = subprocess.run(["openssl", "dgst", "-sha256", "-binary"], input=der, check=True,
                         capture_output=True, timeout=10).stdout
    assert len(dig) == 32, dig
    return base64.b64encode(dig).decode()


@contextlib.contextmanager
def chromium(home, origin, spki, args):
    """Headless Chromium with a fresh profile under home, QUIC forced for
    origin, the leaf of key spki accepted, then args; in a session of its
    own, whose process group is killed on the way out, whatever happened.
    Its stderr (D-Bus complaints, mostly) goes to home/stderr, never a pipe
    that nobody reads while the test talks to it."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--no-proxy-server", "--user-data-dir=" + home + "/profile",
           "--origin-to-force-quic-on=" + origin,
           "--ignore-certificate-errors-spki-list=" + spki] + list(args)
    with open(os.path.join(home, "stderr"), "wb") as errf:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=errf, env=dict(os.environ, HOME=home),
                             start_new_session=True)
    try:
        yield p
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()


def chromium_stderr(home):
    with open(os.path.join(home, "stderr"), "rb") as f:
        return f.read()[-3000:].decode(errors="replace")


def chromium_dump_dom(url, origin, spki, timeout=45):
    """Headless Chromium's DOM of url after its load event: (stdout, stderr)."""
    with tempfile.TemporaryDirectory(prefix="gatling-chromium-") as home:
        with chromium(home, origin, spki, ["--dump-dom", url]) as p:
            try:
                out, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise AssertionError("chromium did not finish in %d s; stderr:\n%s"
                                     % (timeout, chromium_stderr(home)))
        return out.decode(errors="replace"), chromium_stderr(home)


async def cdp_session(ws_url, url, expression, timeout, headers=None):
    """Over the DevTools protocol at ws_url: load url in the page (with the
    request fields headers, if given), wait for its load event, then evaluate
    expression (a promise, or a value) and return its value."""
    websockets = import_websockets()
    events = []
    async with websockets.connect(ws_url, max_size=None) as ws:
        ids = iter(range(1, 1 << 30))

        async def call(method, **params):
            n = next(ids)
            await ws.send(json.dumps({"id": n, "method": method, "params": params}))
            while True:
                msg = json.loads(await ws.recv())
                if msg.get("id") == n:
                    assert "error" not in msg, (method, msg)
                    return msg["result"]
                events.append(msg.get("method"))

        if headers:
            await call("Network.enable")
            await call("Network.setExtraHTTPHeaders", headers=headers)
        await call("Page.enable")
        await call("Page.navigate", url=url)
        while "Page.loadEventFired" not in events:
            events.append(json.loads(await ws.recv()).get("method"))
        r = await call("Runtime.evaluate", expression=expression, awaitPromise=True,
                       returnByValue=True)
        assert "exceptionDetails" not in r, r
        return r["result"]["value"]


def chromium_evaluate(url, origin, spki, expression, then, timeout=45, headers=None):
    """Headless Chromium, driven over the DevTools protocol (a websocket at
    the port it picks and writes into DevToolsActivePort): url loaded, then
    expression's value given to then(value), whose result is returned --
    while Chromium still runs, so that it acknowledges what it received."""
    with tempfile.TemporaryDirectory(prefix="gatling-chromium-") as home:
        with chromium(home, origin, spki, ["--remote-debugging-port=0", "about:blank"]) as p:
            deadline = time.monotonic() + timeout
            active = os.path.join(home, "profile", "DevToolsActivePort")
            while not (os.path.exists(active) and open(active).read().count("\n") >= 1):
                assert p.poll() is None and time.monotonic() < deadline, \
                    "no DevToolsActivePort (exit %s); stderr:\n%s" % (p.poll(),
                                                                      chromium_stderr(home))
                time.sleep(0.05)
            port = int(open(active).read().split()[0])
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port,
                                        timeout=15) as r:
                pages = [t for t in json.loads(r.read()) if t["type"] == "page"]
            assert pages, "no page target"
            left = max(1.0, deadline - time.monotonic())
            return then(asyncio.run(asyncio.wait_for(
                cdp_session(pages[0]["webSocketDebuggerUrl"], url, expression, left, headers),
                left)))


def logged(srv, lines, timeout=15):
    """Whether each of lines is in some access log line of srv, waiting up to
    timeout s for the log to come through (the test may be ahead of it)."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [w for w in lines if not any(w in l for l in srv.log)]
        if not missing or time.monotonic() > deadline:
            return not missing
        time.sleep(0.05)


def metric(text, name, labels):
    m = re.search(r"^%s\{%s\} (\d+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return int(m.group(1)) if m else 0


def test_chromium_loads_page_and_assets_over_h3(gatling):
    srv = gatling(TREE, args=("-T", "10", "-S", "-C", os.path.join(pki_dir(), "certs"),
                              "-e", "0"))
    port = https_port(srv)
    origin = "127.0.0.1:%d" % port
    spki = leaf_spki_sha256(os.path.join(pki_dir(), "certs", "server.pem"))
    out, err = chromium_dump_dom("https://%s/" % origin, origin, spki)
    m = re.search(r'<pre id="entries">(.*?)</pre>', out, re.S)
    assert m and m.group(1) != "pending", "no entries in the DOM:\n%s\nstderr:\n%s" % (
        out[-2000:], err[-3000:])
    got = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert got["app"] == "ok" and got["big"] == 1, got  # the scripts ran, whole
    protos = {e["name"].replace("https://" + origin, ""): (e["type"], e["proto"])
              for e in got["entries"]}
    assert protos.get("/") == ("navigation", "h3"), (protos, err[-3000:])
    for a in ASSETS:
        assert protos.get(a) == ("resource", "h3"), (a, protos)
    # the server saw them as HTTP/3 too: the access log, /metrics, /server-status
    assert logged(srv, ['"GET %s HTTP/3.0" 200 ' % p for p in ["/"] + ASSETS]), srv.log
    base = "http://127.0.0.1:%d" % srv.listeners[0][1]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    h3 = metric(text, "gatling_requests_total", 'protocol="h3"')
    assert h3 >= 1 + len(ASSETS), [l for l in text.splitlines() if "requests_total" in l]
    with urllib.request.urlopen(base + "/server-status?json", timeout=10) as r:
        st = json.loads(r.read())
    assert st["h3_handshakes"] >= 1 and st["h3_failed"] == 0, st


# Fetches style.css until one comes over h3 (for at most 5 s, 20 ms apart),
# then gives every protocol seen, the page's first.
ALT_SVC_LOOP = """(async () => {
  const seen = [performance.getEntriesByType("navigation")[0].nextHopProtocol];
  const t0 = performance.now();
  for (let n = 0; performance.now() - t0 < 5000; n++) {
    const url = new URL("style.css?" + n, location).href;
    await (await fetch(url, {cache: "no-store"})).text();
    const e = performance.getEntriesByName(url)[0];
    seen.push(e ? e.nextHopProtocol : "none");
    if (seen[seen.length - 1] === "h3")
      break;
    await new Promise(r => setTimeout(r, 20));
  }
  return seen;
})()"""


def test_chromium_follows_alt_svc_from_h2_to_h3(gatling):
    """No forcing: Chromium loads the page over HTTP/2 on TCP, learns
    Alt-Svc: h3=":PORT" from gatling's answer, and its next requests go over
    QUIC.  (Chromium refuses QUIC for a certificate of a CA that is not a
    known root, as the test CA is, unless the host is one of
    --origin-to-force-quic-on's: that flag names the host at port 9, where
    nothing listens and nothing is asked, so only Alt-Svc leads to PORT.)
    Driven over the DevTools protocol, so the fetches wait in real time
    for the QUIC handshake (--dump-dom's virtual time does not)."""
    srv = gatling(TREE, args=("-T", "10", "-S", "-C", os.path.join(pki_dir(), "certs"),
                              "-e", "0"))
    port = https_port(srv)
    spki = leaf_spki_sha256(os.path.join(pki_dir(), "certs", "server.pem"))

    def check(seen):
        assert seen[0] == "h2" and seen[-1] == "h3", seen
        # an HTTP/3 request is logged when its stream closes: once Chromium
        # has acknowledged the whole answer, so before it is killed
        assert logged(srv, ['"GET / HTTP/2.0" 200 ',
                            '"GET /style.css?%d HTTP/3.0" 200 ' % (len(seen) - 2)]), (
            seen, [l for l in srv.log if "style.css?" in l])
    chromium_evaluate("https://127.0.0.1:%d/" % port, "127.0.0.1:9", spki, ALT_SVC_LOOP, check)
