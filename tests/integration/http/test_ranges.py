"""Range requests (RFC 9110 14): single ranges, suffixes, clamping, 416,
multipart/byteranges, the cases where the whole file is sent instead, and
If-Range.  One server per build on a docroot of this module's own."""
import os

import pytest

from conftest import url, Client, fetch, no_h3_client, random_bytes
from feature_helpers import (assert_ok, assert_status, curl, etag_of, http_date, module_server,
                             norm_ctype, parse_multipart)

MTIME = 1600000000  # Sun, 13 Sep 2020 12:26:40 GMT
DATA = random_bytes(1000, seed=11)
BIG = random_bytes(3 << 20, seed=12)
TEXT = b"".join(b"line %04d of a plain text file\n" % i for i in range(40))
SIZE = len(DATA)

TREE = {"r.bin": DATA, "big.bin": BIG, "t.txt": TEXT, "empty.bin": b""}


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "ranges", TREE, mtime=MTIME)


def get(srv, target="/r.bin", rng=None, headers=(), method="GET"):
    h = list(headers)
    if rng is not None:
        h.append("Range: " + rng)
    return fetch(srv.port, target, method=method, headers=h)


def assert_206(r, first, last, data, what=""):
    assert_status(r, 206, what)
    assert r.header("Content-Range") == "bytes %d-%d/%d" % (first, last, len(data)), (what, r)
    assert r.header("Content-Length") == str(last - first + 1), (what, r)
    assert r.body == data[first:last + 1], "%s: wrong bytes\n%r" % (what, r)
    assert len(r.header_all("Content-Range")) == 1, r


def assert_whole(r, data, what=""):
    assert_ok(r, data, what)
    assert r.header("Content-Range") is None, "%s: 200 with Content-Range\n%r" % (what, r)
    assert r.header("Accept-Ranges") == "bytes", "%s: %r" % (what, r)


# --------------------------------------------------------------------------
# One range

@pytest.mark.parametrize("spec,first,last", [
    ("bytes=0-9", 0, 9),
    ("bytes=0-0", 0, 0),
    ("bytes=999-999", 999, 999),
    ("bytes=10-19", 10, 19),
    ("bytes=-100", 900, 999),      # suffix
    ("bytes=-1", 999, 999),
    ("bytes=-5000", 0, 999),       # suffix longer than the file: all of it
    ("bytes=990-", 990, 999),      # open end
    ("bytes=0-", 0, 999),
    ("bytes=995-5000", 995, 999),  # end past EOF: clamped
    ("bytes=0-999", 0, 999),
    ("BYTES=3-4", 3, 4),           # the unit is case-insensitive
    ("bytes= 5-6", 5, 6),          # OWS inside the list
    ("bytes=0-1,5000-6000", 0, 1),  # the unsatisfiable one dropped: a single part
])
def test_single_range(srv, spec, first, last):
    assert_206(get(srv, rng=spec), first, last, DATA, spec)


def test_range_headers_of_206(srv):
    r = get(srv, rng="bytes=0-9")
    assert_status(r, 206)
    assert norm_ctype(r.header("Content-Type")) == "application/octet-stream", r
    assert r.header("ETag") == etag_of(os.path.join(srv.docroot, "r.bin")), r
    assert r.header("Last-Modified") == http_date(MTIME), r


def test_accept_ranges_on_200(srv):
    assert_whole(get(srv), DATA)


@pytest.mark.parametrize("spec", ["bytes=1000-", "bytes=1000-2000", "bytes=5000-6000",
                                  "bytes=-0", "bytes=1000-,2000-"])
def test_unsatisfiable_416(srv, spec):
    r = get(srv, rng=spec)
    assert_status(r, 416, spec)
    assert r.header("Content-Range") == "bytes */%d" % SIZE, r
    assert r.header("Content-Length") == str(len(r.body)), r
    assert DATA[:16] not in r.body, r


def test_empty_file_range_416(srv):
    r = get(srv, "/empty.bin", rng="bytes=0-")
    assert_status(r, 416)
    assert r.header("Content-Range") == "bytes */0", r


def test_head_ignores_range(srv):
    r = get(srv, rng="bytes=0-9", method="HEAD")
    assert_status(r, 200, "HEAD with Range")
    assert r.header("Content-Length") == str(SIZE), r
    assert r.header("Content-Range") is None, r
    assert r.body == b""


def test_range_in_big_file(srv):
    # an offset deep inside a file that is sent with sendfile
    first, last = 2000000, 2100000
    assert_206(get(srv, "/big.bin", "bytes=%d-%d" % (first, last)), first, last, BIG)
    assert_206(get(srv, "/big.bin", "bytes=-70000"), len(BIG) - 70000, len(BIG) - 1, BIG)


def test_ranges_keepalive_in_sequence(srv):
    # several range requests and a full one on one connection, pipelined
    with Client(srv.port) as c:
        specs = [(0, 9), (500, 599), (990, 999)]
        req = b"".join(b"GET /r.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=%d-%d\r\n\r\n" % s
                       for s in specs) + b"GET /r.bin HTTP/1.1\r\nHost: x\r\n\r\n"
        c.send(req)
        for first, last in specs:
            assert_206(c.read_response(), first, last, DATA, "pipelined %d-%d" % (first, last))
        assert_whole(c.read_response(), DATA, "pipelined full GET after ranges")


# --------------------------------------------------------------------------
# Several ranges

def check_multipart(r, want, data, ctype):
    assert_status(r, 206)
    assert r.header("Content-Range") is None, "multipart 206 with a Content-Range field: %r" % r
    parts = parse_multipart(r)
    assert [(p[1], p[2]) for p in parts] == want, "parts %r, wanted %r" % (
        [(p[1], p[2]) for p in parts], want)
    for pt, first, last, total, got in parts:
        assert norm_ctype(pt) == ctype, "part Content-Type %r" % pt
        assert total == len(data)
        assert got == data[first:last + 1], "part %d-%d: wrong bytes" % (first, last)


@pytest.mark.parametrize("spec,want", [
    ("bytes=0-9,20-29", [(0, 9), (20, 29)]),
    ("bytes=0-9,20-29,990-", [(0, 9), (20, 29), (990, 999)]),
    ("bytes=500-509,0-9", [(500, 509), (0, 9)]),        # in the order asked
    ("bytes=0-0,-1", [(0, 0), (999, 999)]),
    ("bytes=10-19,990-5000", [(10, 19), (990, 999)]),   # the last clamped
    ("bytes=0-9,10-19", [(0, 9), (10, 19)]),            # adjacent, not overlapping
])
def test_multipart(srv, spec, want):
    check_multipart(get(srv, rng=spec), want, DATA, "application/octet-stream")


def test_multipart_text_type_and_big_file(srv):
    check_multipart(get(srv, "/t.txt", "bytes=0-4,100-149"), [(0, 4), (100, 149)], TEXT,
                    "text/plain;charset=utf-8")
    want = [(0, 99999), (1 << 20, (1 << 20) + 99999), (len(BIG) - 10, len(BIG) - 1)]
    spec = "bytes=" + ",".join("%d-%d" % w for w in want)
    check_multipart(get(srv, "/big.bin", spec), want, BIG, "application/octet-stream")


def test_16_ranges_multipart(srv):
    want = [(i * 50, i * 50 + 9) for i in range(16)]
    spec = "bytes=" + ",".join("%d-%d" % w for w in want)
    check_multipart(get(srv, rng=spec), want, DATA, "application/octet-stream")


def test_17_ranges_whole_file(srv):
    spec = "bytes=" + ",".join("%d-%d" % (i * 50, i * 50 + 9) for i in range(17))
    assert_whole(get(srv, rng=spec), DATA, "17 ranges")


@pytest.mark.parametrize("spec", ["bytes=0-10,5-15", "bytes=0-,-1", "bytes=100-199,150-160",
                                  "bytes=0-9,9-19", "bytes=-500,0-"])
def test_overlapping_whole_file(srv, spec):
    assert_whole(get(srv, rng=spec), DATA, spec)


@pytest.mark.parametrize("spec", ["bytes=5-1", "items=0-1", "bytes=abc", "bytes=", "bytes=1-2-3",
                                  "bytes=0-9;x", "bytes 0-9", "bytes=--1", "bytes=1-x",
                                  "bytes=0-9,5-1"])
def test_invalid_range_whole_file(srv, spec):
    assert_whole(get(srv, rng=spec), DATA, spec)


# --------------------------------------------------------------------------
# If-Range (RFC 9110 13.1.5)

def test_if_range_current_etag_206(srv):
    tag = etag_of(os.path.join(srv.docroot, "r.bin"))
    assert_206(get(srv, rng="bytes=0-9", headers=["If-Range: " + tag]), 0, 9, DATA)


@pytest.mark.parametrize("kind", ["other", "weak", "longer", "unquoted", "empty"])
def test_if_range_other_etag_200(srv, kind):
    tag = etag_of(os.path.join(srv.docroot, "r.bin"))
    # If-Range compares strongly: a weak tag never matches, even the current one
    value = {"other": '"other-etag"', "weak": "W/" + tag, "longer": tag[:-1] + 'x"',
             "unquoted": tag.strip('"'), "empty": ""}[kind]
    assert_whole(get(srv, rng="bytes=0-9", headers=["If-Range: " + value]), DATA, value)


def test_if_range_exact_date_206(srv):
    r = get(srv, rng="bytes=0-9", headers=["If-Range: " + http_date(MTIME)])
    assert_206(r, 0, 9, DATA, "If-Range = Last-Modified")


@pytest.mark.parametrize("delta", [-1, 1, 86400])
def test_if_range_other_date_200(srv, delta):
    r = get(srv, rng="bytes=0-9", headers=["If-Range: " + http_date(MTIME + delta)])
    assert_whole(r, DATA, "If-Range %+d s" % delta)


def test_if_range_applies_to_multipart(srv):
    tag = etag_of(os.path.join(srv.docroot, "r.bin"))
    check_multipart(get(srv, rng="bytes=0-1,3-4", headers=["If-Range: " + tag]),
                    [(0, 1), (3, 4)], DATA, "application/octet-stream")
    assert_whole(get(srv, rng="bytes=0-1,3-4", headers=['If-Range: "nope"']), DATA)


def test_if_range_mismatch_ignores_unsatisfiable_range(srv):
    # If-Range false: the Range is ignored, so it cannot make a 416 either
    r = get(srv, rng="bytes=5000-", headers=['If-Range: "nope"'])
    assert_whole(r, DATA, "unsatisfiable Range with a failing If-Range")


def test_preconditions_before_range(srv):
    # RFC 9110 13.2.2: preconditions are evaluated before Range
    tag = etag_of(os.path.join(srv.docroot, "r.bin"))
    r = get(srv, rng="bytes=0-9", headers=["If-None-Match: " + tag])
    assert_status(r, 304, "Range + matching If-None-Match")
    assert r.body == b"" and r.header("Content-Range") is None, r
    r = get(srv, rng="bytes=0-9", headers=['If-Match: "nope"'])
    assert_status(r, 412, "Range + failing If-Match")
    assert_206(get(srv, rng="bytes=0-9", headers=['If-None-Match: "nope"']), 0, 9, DATA)
    assert_206(get(srv, rng="bytes=0-9", headers=["If-Match: " + tag]), 0, 9, DATA)


# --------------------------------------------------------------------------
# curl

@no_h3_client("curl (Debian 12's has no HTTP/3); the ranges are the tests above")
def test_curl_range(srv, tmp_path):
    out = tmp_path / "part"
    p = curl(url(srv.port, "/r.bin"), "-r", "0-99", "-o", str(out),
             "-w", "%{http_code}")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"206", p.stdout
    assert out.read_bytes() == DATA[:100]


@no_h3_client("curl (Debian 12's has no HTTP/3); the ranges are the tests above")
def test_curl_resume(srv, tmp_path):
    # curl -C -: continue a partial download with an open range
    out = tmp_path / "big"
    out.write_bytes(BIG[:1234567])
    p = curl(url(srv.port, "/big.bin"), "-C", "-", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == BIG, "resumed download differs"

