"""BREACH (issue 78): an answer that may carry a secret is not coded on the
fly unless the site says so (--compress secrets).  A CGI reflects the query
beside a CSRF-like token; with a Cookie, a correct and a wrong guess of the
token must come out the same size by default."""
import gzip
import sys

import pytest

from conftest import Client, Mode, http_only
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


def padded(srv):
    """gatling_compress_padded_total from /metrics."""
    with Client(srv.port) as c:
        r = c.request("/metrics")
    for line in r.body.decode().splitlines():
        if line.startswith("gatling_compress_padded_total "):
            return float(line.split()[1])
    raise AssertionError("no gatling_compress_padded_total on /metrics")


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


SECRET_ANSWERS = (("/cgi/page.sh?x", [CREDS[0]]), ("/cgi/setcookie.sh?x", []),
                  ("/cgi/private.sh?x", [CREDS[1]]))


@pytest.mark.parametrize("coding", ["zstd", "gzip"])
def test_secrets_opt_in_padded(srv_secrets, coding):
    """--compress secrets: the site says so, and credentialed and private answers are
    coded, with random padding (a gzip header comment, a zstd skippable frame after
    the data) that the decoders skip; counted."""
    before = padded(srv_secrets)
    for target, h in SECRET_ANSWERS:
        r = get(srv_secrets.port, target, coding, h)
        assert r.status == 200 and r.header("Content-Encoding") == coding, (target, r)
        assert TOKEN.encode() in decode(coding, r.body)
    assert padded(srv_secrets) == before + len(SECRET_ANSWERS)


def test_secrets_brotli_not_padded(srv_secrets):
    """Brotli has no room a decoder skips: a secret answer goes in the client's next
    choice (gzip here), or as it is when brotli is all it takes; a public one in br."""
    r = get(srv_secrets.port, "/cgi/page.sh?x", "br, gzip", [CREDS[0]])
    assert r.header("Content-Encoding") == "gzip" and TOKEN.encode() in decode("gzip", r.body)
    r = get(srv_secrets.port, "/cgi/setcookie.sh?x", "br")
    assert r.status == 200 and r.header("Content-Encoding") is None and TOKEN.encode() in r.body
    r = get(srv_secrets.port, "/cgi/page.sh?x", "br")
    assert r.header("Content-Encoding") == "br", r


def test_public_not_padded(srv_secrets):
    """A public answer to a request without credentials is coded as before, unpadded
    (its size varies a few bytes with where the CGI's writes flush, not by hundreds)."""
    before = padded(srv_secrets)
    sizes = {len(get(srv_secrets.port, "/cgi/page.sh?x", "gzip").body) for _ in range(5)}
    assert max(sizes) - min(sizes) < 40 and padded(srv_secrets) == before, sizes


@pytest.mark.parametrize("coding", ["zstd", "gzip"])
def test_padding_hides_the_guess(srv_secrets, coding):
    """The oracle of the issue, with --compress secrets: unpadded, the correct guess of the
    token reflected beside it came out smaller every time; padded, the sizes of 40 correct
    and 40 wrong guesses (each the same length) interleave: the correct guess is neither
    always smaller nor smaller by its few bytes on average."""
    wrong = "csrf=7f3a9c1e5b2d8000"
    sizes = {TOKEN: [], wrong: []}
    for _ in range(40):
        for guess in sizes:
            r = get(srv_secrets.port, "/cgi/page.sh?" + guess, coding, [CREDS[0]])
            assert r.header("Content-Encoding") == coding and TOKEN.encode() in \
                decode(coding, r.body)
            sizes[guess].append(len(r.body))
    right, other = sizes[TOKEN], sizes[wrong]
    assert max(right) > min(other) and len(set(right)) > 10, sizes
    # unpadded the gap is 5-15 bytes (the figures); the padding (1-256 bytes,
    # sd ~74) is wider than it: the means of 40 differ by noise, not by a constant
    assert max(right) - min(right) > 100, sizes


@http_only  # curl over plain HTTP/1.1: one pass is enough
def test_curl_decodes_padded(srv_secrets, tmp_path):
    """A real client: curl --compressed decodes the padded gzip and zstd answers."""
    import shutil
    import subprocess
    if not shutil.which("curl"):
        pytest.skip("curl missing")
    for coding in ("gzip", "zstd"):
        p = subprocess.run(["curl", "-sS", "--compressed", "-H", "Accept-Encoding: " + coding,
                            "-H", "Cookie: s=1", "-D", "-",
                            "http://127.0.0.1:%d/cgi/page.sh?x" % srv_secrets.port],
                           capture_output=True, timeout=20)
        if coding == "zstd" and b"zstd" not in subprocess.run(
                ["curl", "-V"], capture_output=True).stdout:
            continue  # a curl built without zstd
        assert p.returncode == 0, p.stderr
        assert b"content-encoding: " + coding.encode() in p.stdout.lower(), p.stdout[:400]
        assert TOKEN.encode() in p.stdout and b"paragraph 39" in p.stdout, p.stdout[-400:]
