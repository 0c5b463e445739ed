"""Validators and conditional requests (RFC 9110 8.8, 13): the strong ETag,
If-None-Match, If-Modified-Since, If-Match, If-Unmodified-Since and their
precedence, a changed file getting a new ETag, and -M's Cache-Control and
Expires.  The files have a fixed mtime so that dates are deterministic."""
import os
import time

import pytest

from conftest import Client, fetch
from feature_helpers import (CACHE_TTL_WAIT, assert_ok, assert_status, date_value, etag_of,
                             http_date, module_server, set_mtime)

MTIME = 1650000000  # Fri, 15 Apr 2022 05:20:00 GMT
BODY = b"conditional requests\n" * 5
TREE = {"c.txt": BODY, "other.txt": b"other\n", "changing.txt": b"version one\n"}


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "cond", TREE, mtime=MTIME)


def tag(srv, name="c.txt"):
    return etag_of(os.path.join(srv.docroot, name))


def get(srv, *headers, target="/c.txt", method="GET"):
    return fetch(srv.port, target, method=method, headers=list(headers))


def assert_304(r, etag, what=""):
    assert_status(r, 304, what)
    assert r.body == b""
    assert r.header("ETag") == etag, "%s: 304 must carry the ETag (RFC 9110 15.4.5)\n%r" % (
        what, r)
    cl = r.header("Content-Length")
    assert cl is None or cl == str(len(BODY)), "%s: 304 with Content-Length %s" % (what, cl)
    assert r.header("Transfer-Encoding") is None, r


def assert_full(r, what=""):
    assert_ok(r, BODY, what)


# --------------------------------------------------------------------------
# Validators on 200

def test_strong_etag_format(srv):
    r = get(srv)
    assert_full(r)
    st = os.stat(os.path.join(srv.docroot, "c.txt"))
    want = '"%x-%x-%x"' % (st.st_ino, st.st_size, MTIME)
    assert r.header("ETag") == want, "ETag %r, wanted <ino>-<size>-<mtime> = %s" % (
        r.header("ETag"), want)
    assert r.header("Last-Modified") == http_date(MTIME), r
    assert len(r.header_all("ETag")) == 1, r


def test_etag_differs_between_files(srv):
    assert get(srv).header("ETag") != get(srv, target="/other.txt").header("ETag")


def test_no_cache_control_without_M(srv):
    r = get(srv)
    assert r.header("Cache-Control") is None and r.header("Expires") is None, r


# --------------------------------------------------------------------------
# If-None-Match (weak comparison)

@pytest.mark.parametrize("form", ["exact", "star", "list", "list-ows", "weak", "weak-in-list"])
def test_if_none_match_304(srv, form):
    t = tag(srv)
    value = {"exact": t, "star": "*", "list": '"a", %s, "b"' % t, "list-ows": '"a" ,\t%s' % t,
             "weak": "W/" + t, "weak-in-list": 'W/"zz", W/%s' % t}[form]
    assert_304(get(srv, "If-None-Match: " + value), t, value)


@pytest.mark.parametrize("value", ['"nope"', '"a", "b"', 'W/"nope"', "garbage", '""'])
def test_if_none_match_other_200(srv, value):
    assert_full(get(srv, "If-None-Match: " + value), value)


def test_if_none_match_head_304(srv):
    t = tag(srv)
    assert_304(get(srv, "If-None-Match: " + t, method="HEAD"), t, "HEAD")


def test_304_keeps_connection_in_sync(srv):
    # a 304 has no body: the next response on the connection must start right after its head
    t = tag(srv)
    with Client(srv.port) as c:
        c.send(b"GET /c.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n\r\n"
               b"GET /other.txt HTTP/1.1\r\nHost: x\r\n\r\n" % t.encode())
        assert_304(c.read_response(), t)
        assert_ok(c.read_response(), b"other\n", "after a 304")


def test_304_carries_last_modified_and_date(srv):
    r = get(srv, "If-None-Match: " + tag(srv))
    assert_304(r, tag(srv))
    assert r.header("Last-Modified") == http_date(MTIME), r
    assert abs(date_value(r.header("Date")) - time.time()) < 5, r


# --------------------------------------------------------------------------
# If-Modified-Since

@pytest.mark.parametrize("delta", [0, 1, 3600, 10 * 365 * 86400])
def test_if_modified_since_not_modified_304(srv, delta):
    assert_304(get(srv, "If-Modified-Since: " + http_date(MTIME + delta)), tag(srv),
               "IMS = mtime %+d" % delta)


@pytest.mark.parametrize("delta", [-1, -86400])
def test_if_modified_since_earlier_200(srv, delta):
    assert_full(get(srv, "If-Modified-Since: " + http_date(MTIME + delta)), "IMS %+d" % delta)


@pytest.mark.parametrize("value", ["yesterday", "Fri, 15 Apr 2022 05:20:00", ""])
def test_if_modified_since_invalid_ignored(srv, value):
    # RFC 9110 13.1.3: a value that is not a valid HTTP-date MUST be ignored (an
    # empty field value included)
    assert_full(get(srv, "If-Modified-Since: " + value), "If-Modified-Since: %r" % value)


@pytest.mark.parametrize("value", ["Fri, 15 Apr 2022 05:20:00 GMT", "Friday, 15-Apr-22 05:20:00 GMT",
                                   "Fri Apr 15 05:20:00 2022"])
def test_if_modified_since_three_forms_304(srv, value):
    # RFC 9110 5.6.7: a recipient MUST accept all three forms; the rfc850-date
    # (two-digit year: 2022, not 2122) once went to libowfat's scan_httpdate,
    # which knows no such form, and was ignored (http/cachectl.c's
    # cc_http_date is the one parser now)
    assert_304(get(srv, "If-Modified-Since: " + value), tag(srv), value)


@pytest.mark.parametrize("value", ["Fri, 31 Apr 2022 05:20:00 GMT", "Fri, 15 Apr 22 05:20:00 GMT",
                                   "Fri, 15 Apr 2022 24:00:00 GMT", "Fri, 15 Foo 2022 05:20:00 GMT"])
def test_if_modified_since_not_a_date_ignored(srv, value):
    # no 31 April, no two-digit year in IMF-fixdate, no hour 24, no month Foo:
    # not an HTTP-date, so ignored (13.1.3), where scan_httpdate read each as
    # a time after the file's (a 304 of a file the client never had)
    assert_full(get(srv, "If-Modified-Since: " + value), "If-Modified-Since: %r" % value)


def test_if_unmodified_since_rfc850_412(srv):
    # an rfc850-date a day before the file's mtime: modified since, 412
    r = get(srv, "If-Unmodified-Since: Thursday, 14-Apr-22 05:20:00 GMT")
    assert_status(r, 412, "If-Unmodified-Since in the rfc850 form")


@pytest.mark.parametrize("value", ["yesterday", "Fri, 15 Apr 2022 05:19:59", ""])
def test_if_unmodified_since_invalid_ignored(srv, value):
    # 13.1.4: likewise
    assert_full(get(srv, "If-Unmodified-Since: " + value), "If-Unmodified-Since: %r" % value)


def test_inm_not_matching_beats_ims_in_future(srv):
    # RFC 9110 13.1.3: If-Modified-Since is ignored when If-None-Match is present
    r = get(srv, 'If-None-Match: "nope"', "If-Modified-Since: " + http_date(time.time() + 86400))
    assert_full(r, "INM not matching + IMS in the future")


def test_inm_matching_beats_ims_earlier(srv):
    r = get(srv, "If-None-Match: " + tag(srv), "If-Modified-Since: " + http_date(MTIME - 86400))
    assert_304(r, tag(srv), "INM matching + IMS earlier")


# --------------------------------------------------------------------------
# If-Match (strong comparison) and If-Unmodified-Since

@pytest.mark.parametrize("kind", ["other", "weak-current", "list-other", "garbage"])
def test_if_match_not_matching_412(srv, kind):
    t = tag(srv)
    value = {"other": '"nope"', "weak-current": "W/" + t, "list-other": '"a", "b"',
             "garbage": "nope"}[kind]
    r = get(srv, "If-Match: " + value)
    assert_status(r, 412, value)
    assert BODY not in r.body, r


@pytest.mark.parametrize("kind", ["star", "exact", "list"])
def test_if_match_matching_200(srv, kind):
    t = tag(srv)
    value = {"star": "*", "exact": t, "list": '"a", %s' % t}[kind]
    assert_full(get(srv, "If-Match: " + value), value)


@pytest.mark.parametrize("delta", [-1, -86400])
def test_if_unmodified_since_earlier_412(srv, delta):
    assert_status(get(srv, "If-Unmodified-Since: " + http_date(MTIME + delta)), 412)


@pytest.mark.parametrize("delta", [0, 1, 86400])
def test_if_unmodified_since_not_earlier_200(srv, delta):
    assert_full(get(srv, "If-Unmodified-Since: " + http_date(MTIME + delta)))


def test_if_match_beats_if_unmodified_since(srv):
    # RFC 9110 13.1.4: If-Unmodified-Since is ignored when If-Match is present
    early = "If-Unmodified-Since: " + http_date(MTIME - 86400)
    assert_full(get(srv, "If-Match: " + tag(srv), early), "If-Match matching + IUS earlier")
    assert_full(get(srv, "If-Match: *", early), "If-Match * + IUS earlier")
    late = "If-Unmodified-Since: " + http_date(MTIME + 86400)
    assert_status(get(srv, 'If-Match: "nope"', late), 412, "If-Match failing + IUS later")


def test_if_match_evaluated_before_if_none_match(srv):
    # 13.2.2: a failed If-Match is 412 whatever If-None-Match says
    r = get(srv, 'If-Match: "nope"', "If-None-Match: " + tag(srv))
    assert_status(r, 412)
    # both pass as preconditions: then If-None-Match decides (304)
    assert_304(get(srv, "If-Match: " + tag(srv), "If-None-Match: " + tag(srv)), tag(srv))


# --------------------------------------------------------------------------
# A changed file

def test_etag_changes_with_the_file(srv):
    path = os.path.join(srv.docroot, "changing.txt")
    r1 = get(srv, target="/changing.txt")
    assert_ok(r1, b"version one\n")
    old = r1.header("ETag")
    assert old == etag_of(path)
    new_body = b"version two, longer\n"
    with open(path, "wb") as f:  # same inode, new size and mtime
        f.write(new_body)
    set_mtime(path, MTIME + 1000)
    time.sleep(CACHE_TTL_WAIT)  # the open-file cache holds the old stat for 1 s
    r2 = get(srv, "If-None-Match: " + old, target="/changing.txt")
    assert_ok(r2, new_body, "If-None-Match with the old ETag after a change")
    assert r2.header("ETag") == etag_of(path) != old, r2
    assert r2.header("Last-Modified") == http_date(MTIME + 1000), r2
    assert_304(get(srv, "If-None-Match: " + r2.header("ETag"), target="/changing.txt"),
               r2.header("ETag"))


# --------------------------------------------------------------------------
# -M: Cache-Control and Expires

def test_max_age(gatling):
    s = gatling({"f.txt": b"cache me\n"}, args=("-T", "10", "-M", "3600"))
    t0 = time.time()
    r = fetch(s.port, "/f.txt")
    assert_ok(r, b"cache me\n")
    assert r.header_all("Cache-Control") == ["max-age=3600"], r
    expires = date_value(r.header("Expires"))
    assert t0 + 3600 - 2 <= expires <= time.time() + 3600 + 2, "Expires %r is not now + 3600" % (
        r.header("Expires"))
    # a 304 repeats Cache-Control and Expires (RFC 9110 15.4.5)
    r = fetch(s.port, "/f.txt", headers=["If-None-Match: " + r.header("ETag")])
    assert_status(r, 304)
    assert r.header("Cache-Control") == "max-age=3600", r
    assert abs(date_value(r.header("Expires")) - (time.time() + 3600)) <= 2, r


def test_max_age_zero(gatling):
    s = gatling({"f.txt": b"x\n"}, args=("-T", "10", "-M", "0"))
    r = fetch(s.port, "/f.txt")
    assert_ok(r, b"x\n")
    assert r.header("Cache-Control") == "max-age=0", r
    assert abs(date_value(r.header("Expires")) - date_value(r.header("Date"))) <= 1, r
