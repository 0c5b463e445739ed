"""The standard document tree every `server` serves, and the assertions the
modules share (assert_status, assert_refused, assert_ends_connection) and
serve_then_check, the server fixtures' teardown check."""

import os
import re

from harness.env import MUX
from harness.clients import close_all_clients, ServerHang
from harness.servers import make_docroot, Mode, Symlink


def random_bytes(n, seed):
    """Deterministic pseudo-random bytes (fast, stdlib only)."""
    import random
    return random.Random(seed).randbytes(n)


# --------------------------------------------------------------------------
# The standard document root and the shared (module-scoped) server

MTIME = 1700000000  # Tue, 14 Nov 2023 22:13:20 GMT
SECRET = b"TOPSECRET-9f2c61e0-outside-the-docroot\n"
BIG = random_bytes(5 << 20, seed=5)
TEXT = b"hello, gatling\n"


def standard_tree():
    return {
        "f.txt": TEXT,
        "index.html": "<html><body>root index</body></html>\n",
        "page.html": "<html><body>page</body></html>\n",
        "style.css": "body { color: red }\n",
        "img.png": b"\x89PNG\r\n\x1a\n" + random_bytes(300, 1),
        "data.json": '{"a": 1}\n',
        "noext": b"no extension\n",
        "blob.xyzzy": b"unknown extension\n",
        "empty.txt": b"",
        "a b.txt": b"file with a space\n",
        "q?.txt": b"file with a question mark\n",
        "big.bin": BIG,
        "private.txt": Mode(b"not world-readable\n", 0o600),
        "dir": {"index.html": "<html>dir index</html>\n", "f.txt": "in dir\n",
                "sub": {"index.html": "<html>sub index</html>\n"}},
        "my dir": {"index.html": "<html>my dir index</html>\n"},
        "noindex": {"x.txt": "x\n"},
        "link_ok.txt": Symlink("f.txt"),
        "dir/link_up.txt": Symlink("../f.txt"),
        "link_passwd": Symlink("/etc/passwd"),
        "link_secret.txt": Symlink("../secret.txt"),
        "link_outdir": Symlink("../outside"),
    }


def make_standard_root(base):
    """base/root is the docroot; base/secret.txt and base/outside/ lie outside it."""
    base = str(base)
    make_docroot(base, {"secret.txt": SECRET, "outside": {"secret.txt": SECRET}})
    return make_docroot(os.path.join(base, "root"), standard_tree(), mtime=MTIME)


IMF_FIXDATE = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d "
                         r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                         r"\d\d:\d\d:\d\d GMT")


def norm_ctype(v):
    """A Content-Type value lower-cased, without spaces around ';'."""
    return ";".join(p.strip() for p in (v or "").lower().split(";"))


def assert_status(resp, want, what=""):
    assert resp is not None, "%s: server closed without a response (wanted %s)" % (what, want)
    if isinstance(want, int):
        want = (want,)
    assert resp.status in want, "%s: got %d, wanted %s\n%r" % (what, resp.status, want, resp)


def assert_refused(resp, want, what=""):
    """A request the server must refuse with status want.  Over HTTP/2 a
    request with a field HTTP/2 forbids (a NUL, RFC 9113 8.2.1) is malformed:
    the stream is reset (resp None, from raw_exchange) or answered with want;
    the same over HTTP/3 (RFC 9114 4.1.2)."""
    if MUX and resp is None:
        return
    assert_status(resp, want, what)


def cut_short(c, method="GET"):
    """The response on c, or None if it was cut off (HTTP/1.1: the
    connection closed inside the body; HTTP/2 and HTTP/3: the stream reset).
    A hang is a failure, not a cut."""
    try:
        return c.read_response(method)
    except ServerHang:
        raise
    except ConnectionError:
        return None


def assert_ends_connection(c, timeout=5.0, why=""):
    """After an error that ends an HTTP/1.1 connection (a 414 or 431: the
    server cannot trust the framing that follows) the server closes it; over
    HTTP/2 and HTTP/3 only that stream is over and the connection stays open."""
    if MUX:
        c.assert_open(0.3)
    else:
        c.assert_closed(timeout, why)


def serve_then_check(srv):
    """Yield srv to a module's tests, then check it leaked no descriptor and stop it."""
    yield srv
    close_all_clients()
    try:
        if srv.alive():
            srv.check_all_fds("the module's tests")
    finally:
        srv.finish()
