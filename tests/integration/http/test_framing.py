"""Request framing that smuggling is made of (the hardening issue, items 4
and 5): Transfer-Encoding is a list parsed by RFC 9112 6.1, chunk lines are
hex, extensions and field lines exactly, and a request whose framing is in
doubt gets one answer and the connection closes."""
import pytest

from conftest import Client, assert_status, h1_only

pytestmark = h1_only("Transfer-Encoding and chunked framing")

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"


def post(te, body):
    return (b"POST /f.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te + b"\r\n\r\n" + body)


def one_answer_then_close(port, data, status):
    with Client(port) as c:
        c.send(data)
        r = c.read_response()
        assert_status(r, status, data[:80])
        assert (r.header("Connection") or "").lower() == "close", r
        assert c.closed_within(5), "still open after %d" % status
        assert b"HTTP/1." not in bytes(c.buf), "a second answer: %r" % bytes(c.buf[:200])


@pytest.mark.parametrize("te,status", [(b"xchunked", 501), (b"identity, chunked", 501),
                                       (b"foo chunked", 501), (b"chunked, gzip", 400),
                                       (b"chunked, chunked", 400), (b"gzip", 400),
                                       (b"chunked;a=b", 400), (b"\"chunked\"", 400)])
def test_transfer_encoding_not_ending_in_chunked(gatling, te, status):
    srv = gatling({"f.txt": b"hi\n"})
    one_answer_then_close(srv.port, post(te, b"0\r\n\r\n" + SMUGGLED), status)


def test_transfer_encoding_on_two_lines(gatling):
    srv = gatling({"f.txt": b"hi\n"})
    data = (b"POST /f.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED)
    one_answer_then_close(srv.port, data, 400)


@pytest.mark.parametrize("te", [b"chunked", b"gzip, chunked", b"GZIP , Chunked"])
def test_valid_chunked_lists_keep_the_connection(gatling, te):
    srv = gatling({"f.txt": b"hi\n"})
    with Client(srv.port) as c:
        c.send(post(te, b"3\r\nabc\r\n0\r\n\r\n") + b"GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        assert_status(c.read_response(), 405)
        r = c.read_response()
        assert_status(r, 200, "the request after the body")
        assert r.body == b"hi\n"


@pytest.mark.parametrize("body", [b"0x3d\r\n\r\n", b"5 x\r\nhello\r\n0\r\n\r\n",
                                  b"5\r\nhello\r\n0\r\nno colon\r\n\r\n",
                                  b"5;\r\nhello\r\n0\r\n\r\n", b"-1\r\n\r\n"])
def test_lenient_chunk_lines_are_400(gatling, body):
    srv = gatling({"f.txt": b"hi\n"})
    one_answer_then_close(srv.port, post(b"chunked", body + SMUGGLED), 400)


@pytest.mark.parametrize("data", [
    # 9112 6.1: a Transfer-Encoding in HTTP/1.0 cannot be trusted
    b"POST /f.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST /f.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
    b"0\r\n\r\n",
    b"POST /f.txt HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n",
    b"POST /f.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5x\r\n\r\nhello",
    b"POST /f.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456789\r\n\r\n",
    b"POST /f.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
], ids=["te-in-http10", "te-and-cl", "cl-empty", "cl-letter", "cl-19-digits", "cl-twice"])
def test_lengths_in_doubt_are_400(gatling, data):
    """A body whose end two readers could see differently: one 400, then the
    connection closes before anything after it is read as a request."""
    srv = gatling({"f.txt": b"hi\n"})
    one_answer_then_close(srv.port, data + SMUGGLED, 400)


@pytest.mark.parametrize("expect,version,sent", [
    (b"100-continue", b"1.1", True), (b"100-Continue", b"1.1", True),
    (b"100-continuex", b"1.1", False), (b"100-continue", b"1.0", False),
])
def test_100_continue_only_for_its_own_expectation(gatling, expect, version, sent):
    """Expect: 100-continue (any case) on HTTP/1.1 gets its interim answer
    before the body is sent; another expectation, or HTTP/1.0, gets none:
    the final answer comes once the body came."""
    srv = gatling({"f.txt": b"hi\n"})
    with Client(srv.port) as c:
        c.send(b"PUT /f.txt HTTP/%s\r\nHost: x\r\nExpect: %s\r\nContent-Length: 3\r\n\r\n"
               % (version, expect))
        if sent:
            assert_status(c.read_response(), 100, "the interim answer, before the body")
        c.send(b"abc")
        r = c.read_response()
        assert r.status not in (100, 417), r  # the final answer (405: no PUT of files)
        assert b"HTTP/1.1 100" not in bytes(c.buf), bytes(c.buf)
