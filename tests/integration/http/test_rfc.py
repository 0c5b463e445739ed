"""RFC 9110/9112 requirements the brief does not spell out but which any
HTTP/1.1 origin server must meet (each test names its clause)."""
import pytest

from conftest import TEXT, Client, build_request, h1_only, raw_exchange


def test_absolute_form_target(srv):
    # RFC 9112 3.2.2: a server MUST accept the absolute-form in requests
    r = raw_exchange(srv.port, b"GET http://localhost/f.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert r is not None and r.status == 200 and r.body == TEXT, r


@h1_only("the HTTP/1.1 parser")
def test_space_before_colon_400(srv):
    # RFC 9112 5.1: whitespace between field name and colon MUST be rejected with 400
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.1\r\nHost : x\r\n\r\n")
    assert r is not None and r.status == 400, r


@h1_only("Host (HTTP/2 has :authority)")
def test_duplicate_host_400(srv):
    # RFC 9112 3.2: more than one Host field line -> 400
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    assert r is not None and r.status == 400, r


@h1_only("Connection: close")
def test_header_names_case_insensitive(srv):
    # RFC 9110 5.1
    with Client(srv.port) as c:
        c.send(b"GET /f.txt HTTP/1.1\r\nhOsT: x\r\ncONNECTION: CLOSE\r\n\r\n")
        r = c.read_response()
        assert r.status == 200, r
        c.assert_closed(5, "after 'cONNECTION: CLOSE'")


@h1_only("Connection: close")
def test_connection_token_list(srv):
    # RFC 9110 7.6.1: Connection is a list; "close" among other tokens still closes
    with Client(srv.port) as c:
        r = c.request("/f.txt", headers=["Connection: foo, close"])
        assert r.status == 200, r
        c.assert_closed(5, "after 'Connection: foo, close'")


@h1_only("the HTTP/1.1 parser")
def test_one_leading_empty_line(srv):
    # RFC 9112 2.2: SHOULD ignore at least one empty line before the request-line
    r = raw_exchange(srv.port, b"\r\n" + build_request("/f.txt"))
    assert r is not None and r.status == 200, r


@h1_only("RFC 9112 framing")
@pytest.mark.parametrize("cl", ["abc", "-1", "1, 2", "0x10"])
def test_invalid_content_length_400(srv, cl):
    # RFC 9112 6.3 (5): an invalid Content-Length is an unrecoverable framing error
    r = raw_exchange(srv.port, build_request("/f.txt", headers=["Content-Length: " + cl]))
    assert r is not None and r.status == 400, "Content-Length %r: %r" % (cl, r)


@h1_only("HTTP/1.0")
def test_response_version_is_11(srv):
    # RFC 9110 6.2: a server sends its own highest conforming version
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.0\r\n\r\n")
    assert r is not None and r.version == "HTTP/1.1", r


def test_get_with_body_framing(srv):
    # a GET with Content-Length: the body is skipped, then the next request served
    body = b"XXXXXXXXXX"
    with Client(srv.port) as c:
        c.send(build_request("/f.txt", headers=["Content-Length: 10"], body=body)
               + build_request("/data.json"))
        assert c.read_response().body == TEXT
        try:
            r = c.read_response()
        except ConnectionError:
            return
        assert r.status == 200 and r.body == b'{"a": 1}\n', r
