"""Content codings and types: on-the-fly gzip, brotli and zstd of text files of
256 bytes or more, precompressed siblings (name.br / .gz / .zst, used only when not older
than the file), Accept-Encoding negotiation, a variant's own ETag, ranges over
the encoded bytes, -Z; and Content-Type from -m's MIME file."""
import gzip
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import url, Client, Mode, Symlink, build_request, fetch, no_h3_client, random_bytes
from feature_helpers import (CACHE_TTL_WAIT, assert_ok, assert_status, brotli_compress, curl,
                             etag_of, http_date, module_server, norm_ctype, set_mtime,
                             zstd_compress)

MTIME = 1680000000


def text(seed, n):
    words = [b"gatling", b"static", b"server", b"event", b"loop", b"epoll", b"sendfile",
             b"header", b"range", b"coding"]
    out, i = [], seed
    while sum(len(w) + 1 for w in out) < n:
        out.append(words[i % len(words)])
        i = i * 7 + 3
    return (b" ".join(out) + b"\n")[:n]


TYPED = {  # name -> Content-Type; each file is 3000 bytes of text
    "t.html": "text/html;charset=utf-8",
    "t.css": "text/css;charset=utf-8",
    "t.js": "text/javascript;charset=utf-8",
    "t.json": "application/json",
    "t.svg": "image/svg+xml",
    "t.txt": "text/plain;charset=utf-8",
    "t.xml": "application/xml",
}
X = text(1, 4000)       # x.css: every sibling
Y = text(2, 3000)       # y.css: a .gz sibling only
OLD = text(3, 3000)     # old.css: siblings older than the file
SMALL_CSS = b"a { color: red }\n"
Z1 = text(4, 3000)      # z.css: changed while the server runs
GZ = {"x": gzip.compress(X, mtime=0), "y": gzip.compress(Y, mtime=0),
      "small": gzip.compress(SMALL_CSS, mtime=0), "z": gzip.compress(Z1, mtime=0)}
BR = brotli_compress(X)
ZST = zstd_compress(X)
REAL_BR = BR is not None
BR = BR or b"not really brotli, but served as the .br sibling\n"
ZST = ZST or b"not really zstd, but served as the .zst sibling\n"
OLD_GZ = gzip.compress(b"stale sibling\n", mtime=0)

TREE = dict({n: text(i, 3000) for i, n in enumerate(TYPED, start=10)}, **{
    "small.txt": b"small text file, under 256 bytes\n",
    "edge255.txt": text(30, 255),
    "edge256.txt": text(31, 256),
    "rand.txt": random_bytes(4000, seed=3),   # gzip would not shrink it
    "img.png": random_bytes(4000, seed=4),
    "x.css": X, "x.css.gz": GZ["x"], "x.css.br": BR, "x.css.zst": ZST,
    "y.css": Y, "y.css.gz": GZ["y"],
    "old.css": OLD, "old.css.gz": OLD_GZ, "old.css.br": b"stale br\n",
    "small.css": SMALL_CSS, "small.css.gz": GZ["small"],
    "priv.css": OLD, "priv.css.gz": Mode(OLD_GZ, 0o600),
    "empty.css": OLD, "empty.css.gz": b"",
    "z.css": Z1, "z.css.gz": GZ["z"],
    # siblings that are no regular file of the file's owner: never served
    "dir.css": OLD, "dir.css.gz": {"inside.txt": b"a directory, not a sibling\n"},
    "out.css": OLD, "out.css.gz": Symlink("../outside.gz"),
    "in.css": OLD, "in.css.gz": Symlink("x.css.gz"),
    "nobody.css": OLD, "nobody.css.gz": OLD_GZ,
})
SIBLING = {"gzip": GZ["x"], "br": BR, "zstd": ZST}
SUFFIX = {"gzip": ".gz", "br": ".br", "zstd": ".zst"}


def setup_tree(root):
    with open(os.path.join(root, "..", "outside.gz"), "wb") as f:  # beside the root
        f.write(OLD_GZ)
    os.chown(os.path.join(root, "nobody.css.gz"), 65534, 65534)  # another user's upload
    for name in ("old.css.gz", "old.css.br"):
        set_mtime(os.path.join(root, name), MTIME - 1000)
    for name in ("x.css.br", "x.css.zst"):  # newer than the file is fine too
        set_mtime(os.path.join(root, name), MTIME + 10)


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "enc", TREE, mtime=MTIME, setup=setup_tree)


def get(srv, target, ae=None, *headers, method="GET"):
    h = list(headers)
    if ae is not None:
        h.append("Accept-Encoding: " + ae)
    return fetch(srv.port, target, method=method, headers=h)


def path(srv, name):
    return os.path.join(srv.docroot, name)


def varies(r):
    return "accept-encoding" in r.tokens("Vary")


def assert_identity(r, body, what=""):
    assert_ok(r, body, what)
    assert r.header("Content-Encoding") is None, "%s: %r" % (what, r)


def assert_coded(r, coding, body, what=""):
    assert_status(r, 200, what)
    assert r.header_all("Content-Encoding") == [coding], "%s: wanted %s\n%r" % (what, coding, r)
    assert r.header("Content-Length") == str(len(r.body)), r
    assert varies(r), "%s: no Vary: Accept-Encoding\n%r" % (what, r)
    if body is not None:
        assert r.body == body, "%s: not the sibling's bytes" % what


# --------------------------------------------------------------------------
# On-the-fly gzip

@pytest.mark.parametrize("name", sorted(TYPED))
def test_gzip_on_the_fly(srv, name):
    r = get(srv, "/" + name, "gzip")
    assert_coded(r, "gzip", None, name)
    assert gzip.decompress(r.body) == TREE[name], "%s: gunzipped body differs" % name
    assert len(r.body) < len(TREE[name])
    assert norm_ctype(r.header("Content-Type")) == TYPED[name], r
    assert r.header("ETag") == etag_of(path(srv, name), "gzip"), r
    assert r.header("ETag") != etag_of(path(srv, name))
    assert r.header("ETag").endswith('-gz"'), r


@pytest.mark.parametrize("ae", [None, "", "gzip;q=0", "identity", "deflate", "compress",
                                "gzip;q=0, identity", "*;q=0", "gzip;q=x"])
def test_identity_with_vary(srv, ae):
    r = get(srv, "/t.html", ae)
    assert_identity(r, TREE["t.html"], "Accept-Encoding: %r" % ae)
    assert varies(r), "Accept-Encoding: %r: identity without Vary\n%r" % (ae, r)
    assert r.header("ETag") == etag_of(path(srv, "t.html")), r


@pytest.mark.parametrize("ae", ["GZIP", "x-gzip", "gzip;q=0.001", "br;q=0.5, gzip",
                                "zstd;q=0, gzip", "identity;q=0.5, gzip", "deflate, gzip;q=1.0", " gzip ,, "])
def test_gzip_accepted_forms(srv, ae):
    r = get(srv, "/t.html", ae)
    assert_coded(r, "gzip", None, "Accept-Encoding: %r" % ae)
    assert gzip.decompress(r.body) == TREE["t.html"]


def decoded(coding, body):
    sys.path.append("/usr/lib/python3/dist-packages")  # Debian's, from another python3 too
    if coding == "br":
        return pytest.importorskip("brotli").decompress(body)
    return pytest.importorskip("zstandard").ZstdDecompressor().decompressobj().decompress(body)


@pytest.mark.parametrize("ae,coding", [("br", "br"), ("zstd", "zstd"), ("br, gzip", "br"),
                                       ("*", "br"), ("gzip;q=0.5, zstd", "zstd")])
def test_br_zstd_on_the_fly(srv, ae, coding):
    """A text file without a sibling, in brotli or zstd as the client
    prefers: coded on a worker thread once, then from the cache (the same
    bytes), with its own ETag."""
    r = get(srv, "/t.css", ae)
    assert_coded(r, coding, None, "Accept-Encoding: %r" % ae)
    assert decoded(coding, r.body) == TREE["t.css"]
    assert r.header("ETag").endswith({"br": '-br"', "zstd": '-zst"'}[coding]), r
    again = get(srv, "/t.css", ae)
    assert again.body == r.body and again.header("ETag") == r.header("ETag"), again


@pytest.mark.parametrize("name", ["small.txt", "edge255.txt", "img.png", "rand.txt"])
def test_not_compressed(srv, name):
    # under 256 bytes, not a text type, or gzip would not make it smaller
    assert_identity(get(srv, "/" + name, "gzip, br, zstd"), TREE[name], name)


def test_256_bytes_compressed(srv):
    r = get(srv, "/edge256.txt", "gzip")
    assert_coded(r, "gzip", None)
    assert gzip.decompress(r.body) == TREE["edge256.txt"]


def test_head_gzip(srv):
    g = get(srv, "/t.css", "gzip")
    r = get(srv, "/t.css", "gzip", method="HEAD")
    assert_status(r, 200)
    assert r.body == b""
    for h in ("Content-Length", "Content-Encoding", "ETag", "Vary", "Content-Type"):
        assert r.header(h) == g.header(h), "HEAD %s %r, GET %r" % (h, r.header(h), g.header(h))


# --------------------------------------------------------------------------
# Precompressed siblings

@pytest.mark.parametrize("ae,coding", [
    ("br", "br"), ("gzip", "gzip"), ("zstd", "zstd"),
    ("gzip, br", "br"), ("gzip, zstd, br", "br"), ("zstd, gzip", "zstd"),
    ("br;q=0.5, gzip", "gzip"), ("gzip;q=1, zstd;q=0.9", "gzip"),
    ("*", "br"), ("br;q=0, *", "zstd"), ("br;q=0, zstd;q=0, *", "gzip"),
    ("identity, br;q=0.5", None), (None, None), ("deflate", None),
])
def test_precompressed_sibling(srv, ae, coding):
    r = get(srv, "/x.css", ae)
    what = "Accept-Encoding: %r" % ae
    if coding is None:
        assert_identity(r, X, what)
        assert varies(r), r
        assert r.header("ETag") == etag_of(path(srv, "x.css")), r
        return
    assert_coded(r, coding, SIBLING[coding], what)
    assert norm_ctype(r.header("Content-Type")) == "text/css;charset=utf-8", r
    # the sibling's own tag: its bytes are what the tag identifies
    assert r.header("ETag") == etag_of(path(srv, "x.css" + SUFFIX[coding]), coding), r
    # Last-Modified stays the file's (the representation's), not the sibling's
    assert r.header("Last-Modified") == http_date(MTIME), r


def test_sibling_of_small_file(srv):
    # precompressed siblings are used whatever the size
    assert_coded(get(srv, "/small.css", "gzip"), "gzip", GZ["small"])


@pytest.mark.parametrize("name", ["old.css", "priv.css", "empty.css"])
def test_unusable_gz_sibling_ignored(srv, name):
    # older than the file, not world-readable, or empty: gzip on the fly instead
    r = get(srv, "/" + name, "gzip")
    assert_coded(r, "gzip", None, name)
    assert r.body != OLD_GZ, "%s: the unusable sibling was served" % name
    assert gzip.decompress(r.body) == OLD, name
    assert r.header("ETag") == etag_of(path(srv, name), "gzip"), r


@pytest.mark.parametrize("name", ["dir.css", "out.css", "in.css", "nobody.css"])
def test_sibling_not_a_file_of_the_owner_ignored(srv, name):
    # a directory, a symlink (out of the root or not) or another user's file
    # named like a sibling is never served: gzip on the fly instead
    r = get(srv, "/" + name, "gzip")
    assert_coded(r, "gzip", None, name)
    assert r.body not in (OLD_GZ, GZ["x"]), "%s: the sibling's bytes were served" % name
    assert gzip.decompress(r.body) == OLD, name
    assert r.header("ETag") == etag_of(path(srv, name), "gzip"), r


@pytest.mark.parametrize("ae", ["identity;q=0", "identity;q=0, br", "br;q=1, identity;q=0",
                                "*;q=0", "IDENTITY;Q=0, zstd"])
def test_identity_refused_but_nothing_else_served_anyway(srv, ae):
    # img.png is never coded: Accept-Encoding is a preference, not a demand
    # (gatling.8), so the file comes as it is, not 406
    r = get(srv, "/img.png", ae)
    assert_identity(r, TREE["img.png"], "Accept-Encoding: %r" % ae)


@pytest.mark.parametrize("ae", ["identity;q=0, br", "br, identity;q=0", "zstd;q=0.9, identity;q=0"])
def test_sibling_not_taken_coded_on_the_fly(srv, ae):
    # y.css has only a .gz sibling and the client does not take gzip: br or
    # zstd on the fly (before, identity)
    r = get(srv, "/y.css", ae)
    coding = "zstd" if "zstd" in ae else "br"
    assert_coded(r, coding, None, "Accept-Encoding: %r" % ae)
    assert decoded(coding, r.body) == Y


@pytest.mark.parametrize("ae", ["br;q=0.5, gzip;q=0.9", "gzip;q=0.9, br;q=0.5",
                                "Gzip ; q=1.0 , br;q=0, zstd;Q=0", "\tgzip;q=0.90,br;q=0.899"])
def test_q_values_pick_gzip_sibling(srv, ae):
    r = get(srv, "/x.css", ae)
    assert_coded(r, "gzip", GZ["x"], "Accept-Encoding: %r" % ae)
    assert r.header("ETag") == etag_of(path(srv, "x.css.gz"), "gzip"), r


def test_long_accept_encoding(srv):
    # a long list of unknown codings before the known one: still negotiated
    ae = ", ".join("x-unknown-%d;q=0.%d" % (i, i % 9 + 1) for i in range(300)) + ", br"
    r = get(srv, "/x.css", ae)
    assert_coded(r, "br", BR, "300 unknown codings, then br")


def test_older_br_sibling_ignored(srv):
    r = get(srv, "/old.css", "br")  # br on the fly instead of the stale sibling
    assert_coded(r, "br", None, "older .br sibling")
    assert decoded("br", r.body) == OLD


def test_sibling_becomes_stale(srv):
    # the file is rewritten after its sibling: from then on the sibling is ignored
    assert_coded(get(srv, "/z.css", "gzip"), "gzip", GZ["z"], "fresh sibling")
    new = text(5, 3500)
    with open(path(srv, "z.css"), "wb") as f:
        f.write(new)
    set_mtime(path(srv, "z.css"), MTIME + 100)
    time.sleep(CACHE_TTL_WAIT)  # the open-file cache remembers the siblings for 1 s
    r = get(srv, "/z.css", "gzip")
    assert_coded(r, "gzip", None, "stale sibling")
    assert r.body != GZ["z"], "a sibling older than its file was served"
    assert gzip.decompress(r.body) == new
    assert_identity(get(srv, "/z.css"), new)


# --------------------------------------------------------------------------
# Ranges and conditionals on encoded variants

def test_range_over_gzip_bytes(srv):
    full = get(srv, "/t.html", "gzip").body
    r = get(srv, "/t.html", "gzip", "Range: bytes=0-9")
    assert_status(r, 206)
    assert r.header("Content-Encoding") == "gzip", r
    assert r.header("Content-Range") == "bytes 0-9/%d" % len(full), r
    assert r.body == full[:10]
    r = get(srv, "/t.html", "gzip", "Range: bytes=-20")
    assert r.header("Content-Range") == "bytes %d-%d/%d" % (len(full) - 20, len(full) - 1,
                                                            len(full)), r
    assert r.body == full[-20:]


def test_range_over_sibling_bytes(srv):
    r = get(srv, "/x.css", "br", "Range: bytes=2-6")
    assert_status(r, 206)
    assert r.header("Content-Encoding") == "br", r
    assert r.header("Content-Range") == "bytes 2-6/%d" % len(BR), r
    assert r.body == BR[2:7]


def test_conditional_per_variant(srv):
    gz_tag = etag_of(path(srv, "t.html"), "gzip")
    r = get(srv, "/t.html", "gzip", "If-None-Match: " + gz_tag)
    assert_status(r, 304, "the gzip variant's tag, gzip accepted")
    assert r.header("ETag") == gz_tag, r
    # the same tag does not match the identity variant
    assert_identity(get(srv, "/t.html", None, "If-None-Match: " + gz_tag), TREE["t.html"])
    br_tag = etag_of(path(srv, "x.css.br"), "br")
    assert_status(get(srv, "/x.css", "br", "If-None-Match: " + br_tag), 304)
    assert_coded(get(srv, "/x.css", "gzip", "If-None-Match: " + br_tag), "gzip", GZ["x"])


# --------------------------------------------------------------------------
# curl --compressed

@no_h3_client("curl (Debian 12's has no HTTP/3); the codings are the tests above")
@pytest.mark.parametrize("name", ["t.html", "y.css", "x.css"])
def test_curl_compressed(srv, tmp_path, name):
    if name == "x.css" and not REAL_BR:
        pytest.skip("no brotli encoder here to make a real .br sibling")
    out = tmp_path / "out"
    p = curl(url(srv.port, "/" + name), "--compressed", "-o", str(out),
             "-D", str(tmp_path / "head"))
    assert p.returncode == 0, p.stderr
    head = (tmp_path / "head").read_text().lower()
    assert "content-encoding:" in head, head
    assert out.read_bytes() == TREE[name], "%s: curl --compressed got other bytes" % name


# --------------------------------------------------------------------------
# Misses while compressions already occupy the worker threads (issue 23, item 5)

def hex_text(seed, n):
    """Text that gzips about 2:1 but slowly (a 1 MiB miss is tens of ms of deflate)."""
    return random_bytes(n // 2, seed).hex().encode()


def test_gzip_miss_served_identity_while_threads_compress(gatling):
    """With -j 1, eight misses on eight connections at once: one compression runs, the
    misses that find it running are answered identity at once (not queued behind it) and
    counted in /server-status as gzip_skipped_busy; a later request for such a file gets
    gzip again (the skip is not remembered).  Before, every miss queued for the one thread
    and all eight were gzipped.  The thread runs at SCHED_IDLE: on a machine whose CPUs
    are all busy (make check's first phase) a compression waits for an idle moment, up to
    the head deadline (-s, 60 here), so the compressed answers are waited for as long."""
    n = 8
    tree = {"b%d.txt" % i: hex_text(40 + i, 1 << 20) for i in range(n)}
    s = gatling(tree, args=("-T", "60", "-s", "60", "-S", "-j", "1"))
    clients = [Client(s.port, timeout=60) for _ in range(n)]
    reqs = [build_request("/b%d.txt" % i, headers=["Accept-Encoding: gzip"]) for i in range(n)]
    for c, rq in zip(clients, reqs):  # all sent before any answer is read
        c.send(rq)
    coded, plain = [], []
    for i, c in enumerate(clients):
        r = c.read_response()
        body = tree["b%d.txt" % i]
        if r.header("Content-Encoding") is None:
            assert_identity(r, body, "busy miss b%d" % i)
            assert varies(r), r  # a cache must still key on Accept-Encoding
            plain.append(i)
        else:
            assert_coded(r, "gzip", None, "b%d" % i)
            assert gzip.decompress(r.body) == body
            coded.append(i)
        c.close()
    st = json.loads(fetch(s.port, "/server-status?json").body)
    assert coded and plain, "gzip for %s, identity for %s: wanted some of each" % (coded, plain)
    assert st["gzip_skipped_busy"] == len(plain), (st, plain)
    i = plain[0]  # nothing runs now: this miss is compressed
    r = fetch(s.port, "/b%d.txt" % i, headers=["Accept-Encoding: gzip"], timeout=60)
    assert_coded(r, "gzip", None, "b%d again" % i)
    assert gzip.decompress(r.body) == tree["b%d.txt" % i]


# --------------------------------------------------------------------------
# -Z

def test_Z_no_compression(gatling):
    s = gatling(TREE, args=("-T", "10", "-Z"))
    for name, body in [("t.html", TREE["t.html"]), ("x.css", X), ("small.css", SMALL_CSS)]:
        r = get(s, "/" + name, "gzip, br, zstd")
        assert_identity(r, body, "-Z: " + name)
        assert r.header("ETag") == etag_of(os.path.join(s.docroot, name)), r


# --------------------------------------------------------------------------
# Content-Type and -m

MIME_FILE = b"""# test types
application/x-test\ttst
text/x-foo   foo  bar
image/x-no-ext
text/plain  html
"""


def test_mime_file(gatling, tmp_path):
    mt = tmp_path / "mime.types"
    mt.write_bytes(MIME_FILE)
    s = gatling({"a.TST": b"t\n", "b.foo": b"f\n", "c.Bar": b"b\n", "d.css": b"c\n",
                 "e.html": b"h\n", "f.unknownext": b"u\n", "noext": b"n\n", "g.tst.txt": b"g\n"},
                args=("-T", "10", "-m", str(mt)))
    want = {
        "a.TST": "application/x-test",             # case-insensitive extension
        "b.foo": "text/x-foo;charset=utf-8",       # text types get a charset
        "c.Bar": "text/x-foo;charset=utf-8",
        "d.css": "text/css;charset=utf-8",          # the built-in list fills in
        "e.html": "text/plain;charset=utf-8",       # the file wins over the built-in
        "f.unknownext": "application/octet-stream",
        "noext": "application/octet-stream",
        "g.tst.txt": "text/plain;charset=utf-8",    # the last extension counts
    }
    for name, ctype in want.items():
        r = fetch(s.port, "/" + name)
        assert_status(r, 200, name)
        assert norm_ctype(r.header("Content-Type")) == ctype, "%s: %r" % (name, r)
        assert r.header("X-Content-Type-Options") == "nosniff", r


def test_mime_file_missing_fails(build, tmp_path):
    p = subprocess.run([build.binary, "-i", "127.0.0.1", "-p", "0", "-m", "/nonexistent/mime"],
                       cwd=str(tmp_path), capture_output=True, timeout=10)
    assert p.returncode != 0, "started with a missing -m file: %r" % p.stderr
    assert b"/nonexistent/mime" in p.stderr, p.stderr
    assert b"listening on" not in p.stderr, p.stderr
