"""Compression Dictionary Transport (RFC 9842, issue 48) for static files: a
.dictionary rule gives its files Use-As-Dictionary; a request that offers one
of them (Available-Dictionary: its SHA-256) for a URL its match pattern fits,
with dcz in Accept-Encoding, gets the file as dcz (40 bytes of header, the
hash, then a zstd frame made with the dictionary as prefix), which Debian's
`zstd -d -D dictionary` decodes to the file byte for byte.  Every refusal is
the ordinary response.  HEAD, ranges and conditionals over the dcz bytes, a
dictionary changed in place, one larger than the bound, /metrics and the
access log, a response cache in front that keeps deltas apart, real
data (two published versions of lodash from npm, tests/setup.sh), and a
real browser: headless Chromium over h2 and h3 stores app.v1.js as a
dictionary and fetches app.v2.js as a delta of a few dozen bytes."""
import base64
import gzip
import hashlib
import os
import random
import shutil
import subprocess
import sys
import time

import pytest

from conftest import ROOT, fetch
from feature_helpers import CACHE_TTL_WAIT, assert_status, module_server

MTIME = 1680000000
MAGIC = bytes([0x5e, 0x2a, 0x4d, 0x18, 0x20, 0, 0, 0])
DICTDATA = os.path.join(ROOT, "build", "dictdata")


def js(seed, n):
    """Text as varied as minified code: gzip leaves a third of it."""
    words = [b"function", b"return", b"const", b"render", b"props", b"state", b"update",
             b"child", b"node", b"value", b"this", b"let"]
    rnd = random.Random(seed)
    out = b" ".join(rnd.choice(words) + b"%d" % rnd.randrange(5000) for _ in range(n // 6))
    return out[:n]


V1 = js(1, 120000)
V2 = V1[:40000] + b" /* a change in v2 */ " + V1[40000:90000] + V1[91000:]
S1 = js(2, 50000)
TREE = {
    "js/.dictionary": b"# dictionaries for the app\napp.*.js match-dest=script id=app\n"
                      b"lib.*.js match=/js/lib*\n",
    "js/app.v1.js": V1, "js/app.v2.js": V2,
    "js/other.js": V2,                     # named by no rule, matched by none
    "js/lib.v1.js": S1, "js/lib.v2.js": S1 + b" more",
    "css/app.v2.js": V2,                   # outside the match pattern's path
    "big/.dictionary": b"huge.js\n",
}


def setup_tree(root):
    with open(os.path.join(root, "big", "huge.js"), "wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)   # one byte over the bound
    os.utime(os.path.join(root, "big", "huge.js"), (MTIME, MTIME))


@pytest.fixture(scope="module")
def srv(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "dict", TREE, args=("-T", "10", "-S"),
                             mtime=MTIME, setup=setup_tree, tmpfs=True)


def b64(h):
    return base64.b64encode(h).decode()


def sf(data):
    return ":%s:" % b64(hashlib.sha256(data).digest())


def get(srv, target, *headers, method="GET"):
    return fetch(srv.port, target, method=method, headers=list(headers))


AE = "Accept-Encoding: gzip, deflate, br, zstd, dcb, dcz"


def delta(srv, target, dictionary, *more, method="GET"):
    return get(srv, target, AE, "Available-Dictionary: " + sf(dictionary), *more, method=method)


def undcz(body, dictionary, tmp):
    """The file a dcz body decodes to with Debian's zstd, the header checked."""
    assert body[:8] == MAGIC, body[:40]
    assert body[8:40] == hashlib.sha256(dictionary).digest(), "the header's hash"
    d, z = os.path.join(tmp, "dict"), os.path.join(tmp, "body.zst")
    with open(d, "wb") as f:
        f.write(dictionary)
    with open(z, "wb") as f:
        f.write(body[40:])
    return subprocess.run(["zstd", "-d", "-q", "-c", "-D", d, z], check=True,
                          capture_output=True, timeout=30).stdout


def use_dictionary(srv, target):
    """GET target as a browser first would: it becomes a dictionary."""
    r = get(srv, target, "Accept-Encoding: gzip")
    assert_status(r, 200)
    return r


pytestmark = pytest.mark.skipif(not shutil.which("zstd"), reason="zstd (Debian's zstd) missing")


def test_use_as_dictionary(srv):
    r = use_dictionary(srv, "/js/app.v1.js")
    assert r.header("Use-As-Dictionary") == \
        'match="/js/app.*.js", match-dest=("script"), id="app"', r
    assert gzip.decompress(r.body) == V1
    r = use_dictionary(srv, "/js/lib.v1.js")
    assert r.header("Use-As-Dictionary") == 'match="/js/lib*"', r


def test_no_rule_no_header(srv):
    for target in ("/js/other.js", "/css/app.v2.js"):
        assert get(srv, target).header("Use-As-Dictionary") is None, target


def test_too_large_refused(srv):
    r = get(srv, "/big/huge.js", method="HEAD")
    assert_status(r, 200)
    assert r.header("Use-As-Dictionary") is None, "a dictionary over 16 MiB: %r" % r


def test_delta(srv, tmp_path):
    use_dictionary(srv, "/js/app.v1.js")
    r = delta(srv, "/js/app.v2.js", V1)
    assert_status(r, 200)
    assert r.header("Content-Encoding") == "dcz", r
    assert {"accept-encoding", "available-dictionary"} <= set(r.tokens("Vary")), r
    assert r.header("Content-Length") == str(len(r.body))
    assert undcz(r.body, V1, str(tmp_path)) == V2
    assert len(r.body) < len(gzip.compress(V2)) / 10, (len(r.body), len(gzip.compress(V2)))
    tag = r.header("ETag")
    assert tag.endswith('-dcz-%s"' % hashlib.sha256(V1).hexdigest()[:8]), tag
    g = get(srv, "/js/app.v2.js", "Accept-Encoding: gzip")
    assert g.header("Content-Encoding") == "gzip" and g.header("ETag") != tag
    # v2 is a dictionary too (the rule names it), for the next deploy
    assert r.header("Use-As-Dictionary", "").startswith('match="/js/app.*.js"'), r
    again = delta(srv, "/js/app.v2.js", V1)
    assert again.body == r.body and again.header("ETag") == tag, "from the delta cache"
    # the access log says dcz at the end of the line (after https, if any)
    lines = srv.wait_log(1)
    assert any('"GET /js/app.v2.js ' in l and l.endswith(" dcz") for l in lines), lines[-5:]
    assert not any('"GET /js/app.v1.js ' in l and l.endswith(" dcz") for l in lines)


def test_delta_head_range_conditional(srv):
    use_dictionary(srv, "/js/app.v1.js")
    full = delta(srv, "/js/app.v2.js", V1)
    assert full.header("Content-Encoding") == "dcz", full
    h = delta(srv, "/js/app.v2.js", V1, method="HEAD")
    assert_status(h, 200)
    assert h.body == b""
    for name in ("Content-Length", "Content-Encoding", "ETag", "Vary"):
        assert h.header(name) == full.header(name), name
    r = delta(srv, "/js/app.v2.js", V1, "Range: bytes=0-39")
    assert_status(r, 206)
    assert r.body == full.body[:40], "a range of the dcz bytes"
    tag = full.header("ETag")
    r = delta(srv, "/js/app.v2.js", V1, "If-None-Match: " + tag)
    assert_status(r, 304)
    r = delta(srv, "/js/app.v2.js", V1, "Range: bytes=0-9", "If-Range: " + tag)
    assert_status(r, 206)


def test_match_crosses_directories(srv, tmp_path):
    use_dictionary(srv, "/js/lib.v1.js")
    r = delta(srv, "/js/lib.v2.js", S1)
    assert r.header("Content-Encoding") == "dcz", r
    assert undcz(r.body, S1, str(tmp_path)) == S1 + b" more"


def decoded(r):
    """The body of an answer that is no delta, decoded: gzip, or br and zstd
    (a file without a sibling is coded on the fly in either)."""
    ce = r.header("Content-Encoding")
    if ce == "gzip":
        return gzip.decompress(r.body)
    if ce in ("br", "zstd"):
        sys.path.append("/usr/lib/python3/dist-packages")  # Debian's python3-brotli, -zstandard
        if ce == "br":
            return pytest.importorskip("brotli").decompress(r.body)
        z = pytest.importorskip("zstandard")
        return z.ZstdDecompressor().decompressobj().decompress(r.body)
    return r.body


def ordinary(r, what):
    assert_status(r, 200, what)
    assert r.header("Content-Encoding") != "dcz", "%s: %r" % (what, r)
    assert decoded(r) == V2, what


H1 = hashlib.sha256(V1).digest()
REFUSALS = {
    "no dcz": ["Accept-Encoding: gzip, br", "Available-Dictionary: :%s:" % b64(H1)],
    "dcz;q=0": ["Accept-Encoding: gzip, dcz;q=0", "Available-Dictionary: :%s:" % b64(H1)],
    "no Available-Dictionary": [AE],
    "bad base64": [AE, "Available-Dictionary: :%s-%s:" % (b64(H1)[:5], b64(H1)[6:])],
    "not a byte sequence": [AE, "Available-Dictionary: %s" % b64(H1)],
    "wrong length": [AE, "Available-Dictionary: :%s:" % b64(H1[:20])],
    "unknown hash": [AE, "Available-Dictionary: :%s:" % b64(hashlib.sha256(b"x").digest())],
    "two of them": [AE, "Available-Dictionary: :%s:" % b64(H1)] * 2,
    "a list": [AE, "Available-Dictionary: :%s:, :%s:" % (b64(H1), b64(H1))],
    "many": [AE] + ["Available-Dictionary: :%s:" % b64(H1)] * 60,
    "huge": [AE, "Available-Dictionary: :" + "A" * 6000 + ":"],
}


@pytest.mark.parametrize("why", sorted(REFUSALS))
def test_refusals(srv, why):
    use_dictionary(srv, "/js/app.v1.js")
    r = get(srv, "/js/app.v2.js", *REFUSALS[why])
    if why in ("many", "huge") and r.status in (400, 431):
        return  # the head's own bounds answered first: cheap, and no delta
    ordinary(r, why)


def test_outside_the_match(srv):
    use_dictionary(srv, "/js/app.v1.js")
    ordinary(delta(srv, "/css/app.v2.js", V1), "another directory")
    ordinary(delta(srv, "/js/other.js", V1), "a name the pattern does not fit")


def test_changed_in_place(srv, tmp_path):
    """A dictionary rewritten in place: its old hash is stale, never a wrong delta."""
    old = S1 + b" old"
    p = os.path.join(srv.docroot, "js", "lib.v0.js")
    with open(p, "wb") as f:
        f.write(old)
    use_dictionary(srv, "/js/lib.v0.js")
    r = delta(srv, "/js/lib.v2.js", old)
    assert r.header("Content-Encoding") == "dcz", r
    with open(p, "r+b") as f:  # same inode, other bytes
        f.write(b"X" * 100)
    os.utime(p, (MTIME + 5, MTIME + 5))
    # the delta made before stays right: it was made from bytes with that hash
    assert undcz(delta(srv, "/js/lib.v2.js", old).body, old, str(tmp_path)) == S1 + b" more"
    r = delta(srv, "/js/lib.v1.js", old)  # a new delta needs the dictionary's bytes: gone
    assert_status(r, 200)
    assert r.header("Content-Encoding") != "dcz", "a stale dictionary was used: %r" % r
    time.sleep(CACHE_TTL_WAIT)
    new = open(p, "rb").read()
    use_dictionary(srv, "/js/lib.v0.js")
    r = delta(srv, "/js/lib.v2.js", new)
    assert r.header("Content-Encoding") == "dcz", "the new version indexed: %r" % r
    assert undcz(r.body, new, str(tmp_path)) == S1 + b" more"


def test_metrics(srv):
    use_dictionary(srv, "/js/app.v1.js")
    r = delta(srv, "/js/app.v2.js", V1)
    assert r.header("Content-Encoding") == "dcz"
    m = get(srv, "/metrics").body.decode()
    vals = {ln.split()[0]: float(ln.split()[1]) for ln in m.splitlines()
            if ln.startswith("gatling_dictionary_")}
    assert vals.get("gatling_dictionary_hits_total", 0) >= 1, vals
    assert vals.get("gatling_dictionary_bytes_saved_total", 0) >= len(V2) - len(r.body), vals
    assert vals.get("gatling_dictionary_deltas_made_total", 0) >= 1, vals


def get_metrics(base):
    import urllib.request
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines()
            if ln.startswith("gatling_dictionary_")}


def real(name):
    p = os.path.join(DICTDATA, name)
    if not os.path.exists(p):
        pytest.skip("%s missing: tests/setup.sh fetches it from npm (offline?)" % p)
    return open(p, "rb").read()


def test_real_lodash(srv, tmp_path):
    """lodash 4.17.20 as the dictionary of 4.17.21: dcz against gzip's size."""
    old, new = real("lodash-4.17.20.js"), real("lodash-4.17.21.js")
    for name, data in (("lodash.4.17.20.js", old), ("lodash.4.17.21.js", new)):
        with open(os.path.join(srv.docroot, "js", name), "wb") as f:
            f.write(data)
    with open(os.path.join(srv.docroot, "js", ".dictionary"), "ab") as f:
        f.write(b"lodash.*.js\n")
    time.sleep(CACHE_TTL_WAIT)  # the open-file cache reads .dictionary again
    use_dictionary(srv, "/js/lodash.4.17.20.js")
    r = delta(srv, "/js/lodash.4.17.21.js", old)
    assert r.header("Content-Encoding") == "dcz", r
    assert undcz(r.body, old, str(tmp_path)) == new
    gz = len(gzip.compress(new, 6))
    print("lodash 4.17.21: %d bytes, gzip %d, dcz %d" % (len(new), gz, len(r.body)))
    assert len(r.body) * 10 < gz, (len(r.body), gz)


# --------------------------------------------------------------------------
# A real browser: Debian's Chromium, headless, over HTTPS (h2, and h3 where
# the build has it).  One page, one profile: the page loads app.v1.js, which
# comes with Use-As-Dictionary; a second later (Chromium stores the
# dictionary meanwhile) it loads app.v2.js, as after a deploy, and returns
# what that script set and its Resource Timing entry.  The server is the
# same in every scheme: the test runs in the plain pass only.

PAGE_JS_FILLER = b"".join(b"var f%d = %s;\n" % (i, repr(js(i, 200)).encode()[1:])
                          for i in range(300))
APP1 = b'window.APP = "v1";\n' + PAGE_JS_FILLER
APP2 = b'window.APP = "v2";\n' + PAGE_JS_FILLER.replace(b"f17 ", b"g17 ")
PAGE = b"""<!doctype html><title>dictionary</title><script src="/b/app.v1.js"></script>
<pre id="out">pending</pre>
"""
BROWSER_TREE = {"index.html": PAGE, "b/app.v1.js": APP1, "b/app.v2.js": APP2,
                "b/.dictionary": b"app.*.js match-dest=script\n"}
# after the load event: wait for the dictionary to be stored, load v2 as a
# script, give what it set and its Resource Timing entry
LOAD_V2 = """(async () => {
  await new Promise(r => setTimeout(r, 1500));
  const s = document.createElement("script");
  s.src = "/b/app.v2.js";
  await new Promise((ok, no) => { s.onload = ok; s.onerror = no; document.head.append(s); });
  const e = performance.getEntriesByName(new URL(s.src, location).href)[0];
  return {app: window.APP, enc: e.encodedBodySize, dec: e.decodedBodySize,
          proto: e.nextHopProtocol};
})()"""


def skip_h3_needed(build):
    """Does the build serve HTTP/3 (so that -3 must turn it off for an h2-only run)?"""
    from conftest import skip_without_h3
    try:
        skip_without_h3(build.binary)
    except pytest.skip.Exception:
        return False
    return True


@pytest.mark.skipif(os.environ.get("GATLING_SCHEME", "http") != "http",
                    reason="its own HTTPS server: the same in every scheme (plain pass only)")
@pytest.mark.parametrize("proto", ["h2", "h3"])
def test_chromium_uses_the_dictionary(gatling, build, proto, request):
    """Chromium over h2 and h3 asks for and decodes a dcz delta.  On the first
    backend and its sanitizer build only: the dictionary coding is above io/
    (test_h3_browser.py drives Chromium over each backend's h3 path), and two
    Chromium runs are 8 s and several CPU seconds a build."""
    from conftest import first_backend_only, https_port, skip_without_h3
    first_backend_only(request, ("test_chromium_uses_the_dictionary",),
                       "the dictionary coding is above io/: on the first backend")
    from conftest import test_pki as pki_dir
    import test_h3_browser as hb
    if not hb.CHROMIUM:
        pytest.skip("needs Debian's chromium (tests/setup.sh installs it)")
    if proto == "h3":
        skip_without_h3(build.binary)
    no_h3 = ("-3",) if proto == "h2" and skip_h3_needed(build) else ()
    srv = gatling(BROWSER_TREE, args=("-T", "10", "-S", "-M", "3600", "-C",
                                      os.path.join(pki_dir(), "certs"), "-e", "0") + no_h3)
    port = https_port(srv)
    origin = "127.0.0.1:%d" % port
    spki = hb.leaf_spki_sha256(os.path.join(pki_dir(), "certs", "server.pem"))
    force = origin if proto == "h3" else "127.0.0.1:9"  # h2: QUIC forced on no port of ours
    got = hb.chromium_evaluate("https://%s/" % origin, force, spki, LOAD_V2, lambda v: v)
    v2_lines = [l for l in srv.log if "/b/app.v2.js" in l]
    assert got["app"] == "v2" and got["dec"] == len(APP2), (got, v2_lines)
    assert got["proto"] == proto, got
    assert got["enc"] < len(APP2) / 20, ("not a delta", got, v2_lines)
    assert hb.logged(srv, ["GET /b/app.v2.js"]) and any(
        l.endswith(" https dcz") for l in srv.log if "/b/app.v2.js" in l), srv.log
    # the server sent it as dcz: /metrics counts the hit
    base = "http://127.0.0.1:%d" % srv.listeners[0][1]
    m = get_metrics(base)
    assert m.get("gatling_dictionary_hits_total", 0) >= 1, m


def test_response_cache_keeps_deltas_apart(gatling, build):
    """A response cache in front (route/cache.c, .cache) of a gatling that
    serves dcz: it stores the delta under its Vary (Accept-Encoding,
    Available-Dictionary) and never gives it to a client that did not offer
    that dictionary; the dictionary's Use-As-Dictionary passes through."""
    back = gatling(TREE, args=("-T", "10", "-M", "3600"), check_fds=False)
    front = gatling({".proxy": "", ".cache": ""},
                    args=("-T", "10", "-P", "127.0.0.1/%d/^/js/" % (back.plain_port or back.port)),
                    check_fds=False)
    r = get(front, "/js/app.v1.js", "Accept-Encoding: gzip")
    assert r.header("Use-As-Dictionary", "").startswith('match="/js/app.*.js"'), r
    for _ in range(2):  # a miss, then a hit
        d = delta(front, "/js/app.v2.js", V1)
        assert d.header("Content-Encoding") == "dcz", d
        assert undcz_ok(d.body, V1)
    assert (d.header("Cache-Status") or "").endswith("hit"), d
    for headers in ([AE], [AE, "Available-Dictionary: :%s:" % b64(hashlib.sha256(S1).digest())],
                    ["Accept-Encoding: gzip", "Available-Dictionary: " + sf(V1)]):
        ordinary(get(front, "/js/app.v2.js", *headers), "through the cache: %r" % headers)


def undcz_ok(body, dictionary):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        return undcz(body, dictionary, tmp) == V2


def test_no_compression_no_dictionaries(gatling):
    """-Z: no Use-As-Dictionary, no dcz."""
    srv = gatling(TREE, args=("-T", "10", "-Z"))
    assert get(srv, "/js/app.v1.js").header("Use-As-Dictionary") is None
    r = delta(srv, "/js/app.v2.js", V1)
    assert_status(r, 200)
    assert r.header("Content-Encoding") is None and r.body == V2, r


def test_dictionary_never_served_by_this_process(gatling, tmp_path):
    """After a restart (or from another -W worker) the index has not seen the
    hash: the first such request waits for a scan of the target's directory,
    which hashes the files its .dictionary names, and gets its delta."""
    srv = gatling(TREE, args=("-T", "10", "-S"))
    r = delta(srv, "/js/app.v2.js", V1)  # app.v1.js never requested
    assert r.header("Content-Encoding") == "dcz", r
    assert undcz(r.body, V1, str(tmp_path)) == V2
    ordinary(delta(srv, "/js/other.js", V1), "other.js: no rule names it, no scan")
    # an unknown hash scans the same directory version once only
    for _ in range(3):
        ordinary(get(srv, "/js/app.v2.js", AE, "Available-Dictionary: :%s:"
                     % b64(hashlib.sha256(b"never").digest())), "unknown")


def test_workers_share_no_index(gatling, tmp_path):
    """-W 2: whichever worker answers, the delta comes."""
    srv = gatling(TREE, args=("-T", "10", "-W", "2"))
    for _ in range(6):
        r = delta(srv, "/js/app.v2.js", V1)
        assert r.header("Content-Encoding") == "dcz", r
        assert undcz(r.body, V1, str(tmp_path)) == V2


@pytest.mark.skipif(os.environ.get("GATLING_SCHEME", "http") != "http",
                    reason="its own plain and HTTPS ports: the same in every scheme")
@pytest.mark.parametrize("first", ["http", "https"])
def test_one_dictionary_on_every_port(gatling, tmp_path, first):
    """The same files on the plain and the HTTPS port (no vhost directory):
    a delta on both, whichever port offered the hash first (issue 55: the
    index held it for the first port's Host, 127.0.0.1:PORT, and the other
    port got gzip for as long as the process lived)."""
    from conftest import H1Client, client_tls_context, https_port
    from conftest import test_pki as pki_dir
    srv = gatling(TREE, args=("-T", "10", "-S", "-C", os.path.join(pki_dir(), "certs"),
                              "-e", "0", "-3"))
    ports = {"http": srv.listeners[0][1], "https": https_port(srv)}

    def on(scheme, *headers):
        with H1Client(ports[scheme]) as c:
            if scheme == "https" and not isinstance(c.sock, __import__("ssl").SSLSocket):
                c.sock = client_tls_context().wrap_socket(c.sock, server_hostname="localhost")
            return c.request("/js/app.v2.js", headers=list(headers),
                             host="127.0.0.1:%d" % ports[scheme])
    other = "https" if first == "http" else "http"
    for scheme in (first, other, first):
        r = on(scheme, AE, "Available-Dictionary: " + sf(V1))
        assert r.header("Content-Encoding") == "dcz", (scheme, r)
        assert undcz(r.body, V1, str(tmp_path)) == V2


def test_scan_versions_appear_and_disappear(gatling, tmp_path):
    """A directory of versions (v*.js) that this process never served: the
    scan an unknown hash starts indexes the published ones only (a file not
    world-readable, an empty one and a directory that the pattern names are
    not dictionaries); a version added later is found by the next scan (the
    directory changed); one deleted is forgotten (the ordinary response,
    never a delta made against what is gone); a delta that would save
    nothing (an incompressible file) is not sent."""
    v1, v3, v4 = js(11, 30000), js(13, 30000), js(14, 30000)
    target = v3[:20000] + b" /* v9 */ " + v3[20000:]
    noise = random.Random(5).randbytes(3000)
    tree = {"p/.dictionary": b"v*.js\n", "p/v1.js": v1, "p/v0.js": b"", "p/v3.js": v3,
            "p/v9.js": target, "p/vr.js": noise}
    srv = gatling(tree, args=("-T", "10", "-S"))
    p = os.path.join(srv.docroot, "p")
    os.chmod(os.path.join(p, "v1.js"), 0o600)
    os.mkdir(os.path.join(p, "vdir.js"))

    def plain(r, body, what):
        assert_status(r, 200, what)
        assert r.header("Content-Encoding") != "dcz", "%s: %r" % (what, r)
        assert decoded(r) == body, what

    def dcz(r, dictionary, body, what):
        assert_status(r, 200, what)
        assert r.header("Content-Encoding") == "dcz", "%s: %r" % (what, r)
        assert undcz(r.body, dictionary, str(tmp_path)) == body, what

    plain(delta(srv, "/p/v9.js", v1), target, "a dictionary not world-readable")
    plain(delta(srv, "/p/v9.js", b""), target, "an empty file")
    dcz(delta(srv, "/p/v9.js", v3), v3, target, "found by the same scan")
    with open(os.path.join(p, "v4.js"), "wb") as f:
        f.write(v4)
    dcz(delta(srv, "/p/v9.js", v4), v4, target, "a version added: scanned again")
    for _ in range(2):
        plain(delta(srv, "/p/vr.js", v3), noise, "a delta that saves nothing")
    os.unlink(os.path.join(p, "v3.js"))
    time.sleep(CACHE_TTL_WAIT)
    for _ in range(2):
        plain(delta(srv, "/p/v4.js", v3), v4, "a dictionary deleted")
    m = {ln.split()[0]: float(ln.split()[1]) for ln in get(srv, "/metrics").body.decode()
         .splitlines() if ln.startswith("gatling_dictionary_")}
    assert m["gatling_dictionary_hits_total"] == 2, m
    assert m["gatling_dictionary_unknown_total"] >= 3, m


def test_rewritten_in_place(gatling, tmp_path):
    """Files rewritten in place (the same inode, other bytes): a target's
    delta is made again from its new bytes (never the old one's delta from
    the delta cache); a dictionary served again is indexed anew under its
    new hash, and its old hash is no longer one (the ordinary response)."""
    a, b = js(21, 30000), js(22, 30000)
    t1 = a[:15000] + b" /* t1 */ " + a[15000:]
    t2 = t1[:100] + b"X" * 10 + t1[110:]  # the same size
    srv = gatling({"q/.dictionary": b"w*.js\n", "q/w1.js": a, "q/w2.js": t1},
                  args=("-T", "10", "-S"))
    q = os.path.join(srv.docroot, "q")
    use_dictionary(srv, "/q/w1.js")
    r = delta(srv, "/q/w2.js", a)
    assert r.header("Content-Encoding") == "dcz" and undcz(r.body, a, str(tmp_path)) == t1, r
    with open(os.path.join(q, "w2.js"), "r+b") as f:
        f.write(t2)
    os.utime(os.path.join(q, "w2.js"), (MTIME + 7, MTIME + 7))
    time.sleep(CACHE_TTL_WAIT)
    r = delta(srv, "/q/w2.js", a)
    assert r.header("Content-Encoding") == "dcz", r
    assert undcz(r.body, a, str(tmp_path)) == t2, "the old file's delta"
    with open(os.path.join(q, "w1.js"), "r+b") as f:
        f.write(b)
    os.utime(os.path.join(q, "w1.js"), (MTIME + 9, MTIME + 9))
    time.sleep(CACHE_TTL_WAIT)
    use_dictionary(srv, "/q/w1.js")
    r = delta(srv, "/q/w2.js", b)
    assert r.header("Content-Encoding") == "dcz" and undcz(r.body, b, str(tmp_path)) == t2, r
    r = delta(srv, "/q/w2.js", a)
    assert_status(r, 200)
    assert r.header("Content-Encoding") != "dcz", "the old hash: %r" % r
