"""Helpers shared by the feature suites (test_ranges, test_conditional,
test_vhost, test_listing, test_encoding, test_access, test_ops, test_dictionary,
test_hardening, test_fastpath, test_cgi, test_h2) on top of
conftest's harness: precise status checks, HTTP dates and ETags as gatling
makes them, a strict multipart/byteranges parser, password hashes for
.htaccess, compressors for precompressed siblings, curl, and a module-scoped
server on a docroot of the module's own.

A module that defines a fixture named `server` with module_server() gets the
conftest `srv` fixture (per-test liveness and socket-leak checks) on its own
docroot: pytest resolves `srv`'s dependency from the test module first.
"""
import base64
import ctypes
import ctypes.util
import email.utils
import os
import re
import shutil
import subprocess
import tempfile
import time
import warnings

from conftest import (IMF_FIXDATE, assert_status, make_docroot, norm_ctype,  # noqa: F401
                      curl_version_args, serve_then_check, start_server)

# gatling's open-file cache keeps a file's descriptor and stat for 1 s
# (FCACHE_TTL_MS): after changing a file that was served, wait this long.
CACHE_TTL_WAIT = 1.2

def assert_ok(resp, body, what=""):
    """200 with exactly `body` and a Content-Length saying so."""
    assert_status(resp, 200, what)
    assert resp.header("Content-Length") == str(len(body)), "%s: %r" % (what, resp)
    assert resp.body == body, "%s: body differs (%d bytes, wanted %d): %r...\n%r" % (
        what, len(resp.body), len(body), resp.body[:80], resp)


def http_date(t):
    """IMF-fixdate of t (seconds since the epoch)."""
    return email.utils.formatdate(t, usegmt=True)


def date_value(v):
    """Seconds since the epoch of an IMF-fixdate header value (asserts the format)."""
    assert v and IMF_FIXDATE.fullmatch(v), "not an IMF-fixdate: %r" % v
    return email.utils.parsedate_to_datetime(v).timestamp()


def etag_of(path, coding=None):
    """The strong ETag gatling gives the file at path: "<ino>-<size>-<mtime>"
    in hex, plus "-gz"/"-br"/"-zst" inside the quotes for a coding (for a
    precompressed sibling pass the sibling's path)."""
    st = os.stat(path)
    suffix = {None: "", "gzip": "-gz", "br": "-br", "zstd": "-zst"}[coding]
    return '"%x-%x-%x%s"' % (st.st_ino, st.st_size, int(st.st_mtime), suffix)


def set_mtime(path, t):
    os.utime(path, (t, t))


# --------------------------------------------------------------------------
# multipart/byteranges (RFC 9110 14.6, RFC 2046 5.1.1)

CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


def parse_multipart(resp):
    """Parse a 206 multipart/byteranges response strictly.  Returns a list of
    (content_type, first, last, complete_length, data) in the order sent.
    Each part's length is taken from its Content-Range, so binary data that
    happens to contain the boundary cannot confuse the parse."""
    ctype = resp.header("Content-Type") or ""
    m = re.fullmatch(r"multipart/byteranges;\s*boundary=(\"?)([^\";]+)\1", ctype)
    assert m, "not multipart/byteranges with a boundary: %r\n%r" % (ctype, resp)
    delim = b"--" + m.group(2).encode()
    body = resp.body
    assert resp.header("Content-Length") == str(len(body)), resp
    pos = 0
    assert body.startswith(delim + b"\r\n"), "body does not open with the boundary: %r" % body[:100]
    pos = len(delim) + 2
    parts = []
    while True:
        end = body.find(b"\r\n\r\n", pos)
        assert end >= 0, "part %d: no end of its header block" % len(parts)
        headers = {}
        for line in body[pos:end].split(b"\r\n"):
            k, sep, v = line.partition(b":")
            assert sep, "part %d: bad header line %r" % (len(parts), line)
            headers[k.decode().strip().lower()] = v.decode().strip()
        cr = CONTENT_RANGE.fullmatch(headers.get("content-range", ""))
        assert cr, "part %d: Content-Range %r" % (len(parts), headers)
        first, last, total = (int(x) for x in cr.groups())
        pos = end + 4
        data = body[pos:pos + last - first + 1]
        assert len(data) == last - first + 1, "part %d truncated" % len(parts)
        pos += len(data)
        parts.append((headers.get("content-type"), first, last, total, data))
        assert body[pos:pos + 2 + len(delim)] == b"\r\n" + delim, (
            "part %d not followed by CRLF and the boundary: %r" % (len(parts) - 1,
                                                                     body[pos:pos + 80]))
        pos += 2 + len(delim)
        if body[pos:pos + 2] == b"--":
            assert body[pos + 2:] in (b"", b"\r\n"), "bytes after the close delimiter: %r" % (
                body[pos + 2:pos + 80])
            return parts
        assert body[pos:pos + 2] == b"\r\n", "boundary without CRLF: %r" % body[pos:pos + 20]
        pos += 2


# --------------------------------------------------------------------------
# .htaccess

def crypt_hash(password):
    """A SHA-512 crypt(3) hash: Python's crypt module if present (deprecated
    in 3.11, gone in 3.13), else `openssl passwd -6`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt
        h = crypt.crypt(password, crypt.mksalt(crypt.METHOD_SHA512))
        if h and h.startswith("$6$"):
            return h
    except ImportError:
        pass
    out = subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=password.encode(),
                         capture_output=True, check=True, timeout=10).stdout
    return out.decode().strip()


def basic_auth(user, password):
    tok = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    return "Authorization: Basic " + tok


# --------------------------------------------------------------------------
# Compressors for precompressed siblings (gzip: the gzip module)

def brotli_compress(data):
    """Real brotli via libbrotlienc (curl's dependency), or None."""
    name = ctypes.util.find_library("brotlienc")
    if not name:
        return None
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    out_size = ctypes.c_size_t(len(data) + 1024)
    out = ctypes.create_string_buffer(out_size.value)
    ok = lib.BrotliEncoderCompress(ctypes.c_int(5), ctypes.c_int(22), ctypes.c_int(0),
                                   ctypes.c_size_t(len(data)), ctypes.c_char_p(data),
                                   ctypes.byref(out_size), out)
    return out.raw[:out_size.value] if ok else None


def zstd_compress(data):
    """Real zstd via the zstd tool, or None."""
    if not shutil.which("zstd"):
        return None
    r = subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, timeout=10)
    return r.stdout if r.returncode == 0 else None


# --------------------------------------------------------------------------
# curl

def curl(url, *opts, timeout=20):
    """Run curl -sS (--http2 in the h2 pass); returns the CompletedProcess (stdout bytes)."""
    assert shutil.which("curl"), "curl is not installed"
    return subprocess.run(["curl", "-sS", "--max-time", "10"] + curl_version_args() + list(opts)
                          + [url],
                          capture_output=True, timeout=timeout)


# --------------------------------------------------------------------------
# Servers

def module_server(build, tmp_path_factory, tag, tree, args=("-T", "10"), mtime=None,
                  setup=None, started=None, env=None, tmpfs=False):
    """Generator for a module-scoped server fixture on a docroot of its own:
    make the tree, call setup(docroot) if given, start, call started(srv) if
    given (e.g. to make directories named after the port), yield the Server,
    and at the end check that no descriptor leaked and that it exits cleanly
    (as conftest's `server` fixture does for the standard docroot).
    tmpfs=True puts the docroot on /dev/shm (removed at the end): creating
    thousands of files on a busy disk can take seconds, on tmpfs ~0.1 s."""
    scratch = None
    if tmpfs and os.access("/dev/shm", os.W_OK):
        scratch = tempfile.mkdtemp(prefix="gatling-%s-%s-" % (tag, build.name), dir="/dev/shm")
        base = scratch
    else:
        base = str(tmp_path_factory.mktemp("%s-%s" % (tag, build.name)))
    try:
        yield from _serve(build, base, tree, args, mtime, setup, started, env)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _serve(build, base, tree, args, mtime, setup, started, env):
    root = make_docroot(os.path.join(base, "root"), tree, mtime=mtime)
    if setup:
        setup(root)
    srv = start_server(build, root, args, env)
    if started:
        try:
            started(srv)
        except BaseException:
            srv.finish()
            raise
    yield from serve_then_check(srv)


def wait_for(pred, timeout=2.0, step=0.02):
    """Poll pred() until it is true or timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    v = pred()
    while not v and time.monotonic() < deadline:
        time.sleep(step)
        v = pred()
    return v


def no_leak_env(build):
    """Environment for a server that drops privileges or chroots: LeakSanitizer
    cannot read /proc then, so leak checking is off for it."""
    return {"ASAN_OPTIONS": "detect_leaks=0"} if build.sanitized else None
