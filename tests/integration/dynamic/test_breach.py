"""BREACH (issue 78): an answer that may carry a secret is not coded on the
fly unless the site says so (--compress secrets).  A CGI reflects the query
beside a CSRF-like token; with a Cookie, a correct and a wrong guess of the
token must come out the same size by default."""
import gzip
import sys

import pytest

from conftest import Client, Mode
from feature_helpers import module_server

sys.path.append("/usr/lib/python3/dist-packages")  # Debian's, from another python3 too
zstandard = pytest.importorskip("zstandard")
brotli = pytest.importorskip("brotli")

TOKEN = "csrf=7f3a9c1e5b2d8046"
SH = "#!/bin/sh\n"
FILLER = "".join("<p>paragraph %d of the account page</p>\n" % i for i in range(40))


def page(extra=""):
    return SH + ("printf 'Content-Type: text/html\\r\\n%s\\r\\n'\n"
                 "printf '<form><input name=csrf value=\"%s\"></form>\\n'\n"
                 "printf '<p>You searched: %%s</p>\\n' \"$QUERY_STRING\"\n"
                 "cat filler.html\n" % (extra, TOKEN))


CGI = {"page.sh": page(), "setcookie.sh": page("Set-Cookie: s=1\\r\\n"),
       "private.sh": page("Cache-Control: private\\r\\n"),
       "nostore.sh": page("Cache-Control: no-store\\r\\n")}
ARGS = ("-T", "10", "-S", "-w", r"\.sh$")


def tree():
    return {"cgi": dict({k: Mode(v, 0o755) for k, v in CGI.items()},
                        **{"filler.html": FILLER.encode()})}


@pytest.fixture(scope="module")
def srv(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "breach", tree(), args=ARGS)


@pytest.fixture(scope="module")
def srv_secrets(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "breach-secrets", tree(),
                             args=ARGS + ("--compress", "secrets"))


def decode(coding, body):
    if coding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    if coding == "br":
        return brotli.decompress(body)
    return gzip.decompress(body)


def get(port, target, coding, headers=()):
    with Client(port) as c:
        return c.request(target, headers=list(headers) + [("Accept-Encoding", coding)])


CREDS = [("Cookie", "session=abc"), ("Authorization", "Basic dXNlcjpwYXNz")]


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip"])
@pytest.mark.parametrize("cred", CREDS, ids=["cookie", "authorization"])
def test_credentials_not_coded(srv, coding, cred):
    """With credentials the answer goes as it is: a correct guess of the token
    and wrong ones are the same size (the guess is the same length)."""
    sizes = {}
    for guess in (TOKEN, "csrf=0000000000000000", "csrf=7f3a9c1e5b2d8000"):
        r = get(srv.port, "/cgi/page.sh?" + guess, coding, [cred])
        assert r.status == 200 and r.header("Content-Encoding") is None, r
        assert TOKEN.encode() in r.body
        sizes[guess] = len(r.body)
    assert len(set(sizes.values())) == 1, sizes


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip"])
@pytest.mark.parametrize("script", ["setcookie.sh", "private.sh", "nostore.sh"])
def test_secret_answers_not_coded(srv, coding, script):
    """An answer that sets a cookie or is private / no-store is not coded,
    even to a request without credentials."""
    r = get(srv.port, "/cgi/%s?x" % script, coding)
    assert r.status == 200 and r.header("Content-Encoding") is None, r


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip"])
def test_public_still_coded(srv, coding):
    """A public answer to a request without credentials is coded by default."""
    r = get(srv.port, "/cgi/page.sh?x", coding)
    assert r.status == 200 and r.header("Content-Encoding") == coding, r
    assert TOKEN.encode() in decode(coding, r.body)


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip"])
def test_secrets_opt_in(srv_secrets, coding):
    """--compress secrets: the site says so, and credentialed and private
    answers are coded (and decode)."""
    for target, h in (("/cgi/page.sh?x", [CREDS[0]]), ("/cgi/setcookie.sh?x", []),
                      ("/cgi/private.sh?x", [CREDS[1]])):
        r = get(srv_secrets.port, target, coding, h)
        assert r.status == 200 and r.header("Content-Encoding") == coding, (target, r)
        assert TOKEN.encode() in decode(coding, r.body)
