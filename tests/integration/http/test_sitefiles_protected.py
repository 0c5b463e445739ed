"""A site file's rule resolves through the checks a request for its file
would meet (issue 92, items 4, 6 and 8).  Before: an error-page rule
(/pgf/* /:splat 404!) let the client choose the page, a file behind
.htaccess, in a closed directory, a program's source; a 200 rewrite naming
_redirects or _headers served them; a Netlify Basic-Auth line in _headers
was sent to every client as a response field and its paths stayed open;
two blocks setting X-Frame-Options both sent it; a placeholder put `;` and
`=` into Set-Cookie (attributes chosen by the URL)."""
import base64
import os
import subprocess

from conftest import fetch
from feature_helpers import crypt_hash

SECRET = b"top secret\n"
PHP = b"<?php $db_password = 'hunter2'; echo 'hi';\n"
REDIRECTS = """\
/pgf/* /:splat 404!
/gone/* /:splat 410!
/rw/* /:splat 200!
/page404 /404page.html 404
/rules /_redirects 200
/hdrs /_headers 200
"""
HEADERS = """\
/members/*
  Basic-Auth: ann:s3cret bob:pass:word
  X-Members: yes
/*
  X-Frame-Options: DENY
/framed/*
  X-Frame-Options: SAMEORIGIN
/c/:name
  Set-Cookie: last=:name; Path=/c
"""


def tree():
    return {"_redirects": REDIRECTS, "_headers": HEADERS, "404page.html": b"a fine page\n",
            "open.html": b"open\n", "wp-config.php": PHP,
            "prot": {".htaccess": ("Realm\n\nann:%s\n" % crypt_hash("pw")).encode(),
                     "secret.html": SECRET},
            "closed": {"secret.html": SECRET},
            "members": {"page.html": b"members only\n"},
            "framed": {"x.html": b"framed\n"}, "c": {"a": b"c\n", "b;x=1": b"c\n"}}


def start(gatling):
    # a FastCGI rule makes .php a program; no .proxy: nothing runs, no backend needed
    srv = gatling(tree(), args=("-T", "10", "-P", r"F/unix:/nonexistent/fpm.sock:\.php$"))
    os.chmod(os.path.join(srv.docroot, "closed"), 0o700)
    return srv


def auth(user, password):
    return [("Authorization",
             "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode())]


def test_an_error_page_rule_gives_no_file_a_request_could_not_get(gatling):
    """The page a 404! or 410! rule names is a file a request could get, or
    the status alone: never a file behind .htaccess or Basic-Auth, in a
    closed directory, a program's source, a rule file."""
    srv = start(gatling)
    for path, status in (("/pgf/prot/secret.html", 404), ("/pgf/closed/secret.html", 404),
                         ("/gone/closed/secret.html", 410), ("/pgf/wp-config.php", 404),
                         ("/gone/wp-config.php", 410), ("/pgf/members/page.html", 404),
                         ("/pgf/_headers", 404), ("/pgf/_redirects", 404)):
        r = fetch(srv.port, path)
        assert r.status == status, (path, r)
        for leak in (b"secret", b"hunter2", b"members only", b"Basic-Auth", b"404!"):
            assert leak not in r.body, (path, leak, r.body)
    for path, status in (("/page404", 404), ("/pgf/404page.html", 404),
                         ("/gone/404page.html", 410)):
        r = fetch(srv.port, path)
        assert r.status == status and r.body == b"a fine page\n", (path, r)


def test_a_rewrite_never_serves_the_rule_files_nor_opens_a_lock(gatling):
    srv = start(gatling)
    for path in ("/rules", "/hdrs", "/rw/_redirects", "/rw/_headers"):
        r = fetch(srv.port, path)
        assert r.status == 404 and b"Basic-Auth" not in r.body and b"/rw/" not in r.body, \
            (path, r)
    assert fetch(srv.port, "/rw/members/page.html").status == 401
    r = fetch(srv.port, "/rw/open.html")
    assert r.status == 200 and r.body == b"open\n", r


def test_basic_auth_asks_and_is_never_sent(gatling):
    """Netlify's password protection: 401 with a Basic challenge unless a
    user:password pair of the block comes; the field never goes out."""
    srv = start(gatling)
    for creds in ([], auth("ann", "wrong"), auth("bob", "pass"), auth("eve", "s3cret")):
        r = fetch(srv.port, "/members/page.html", headers=creds)
        assert r.status == 401 and b"members only" not in r.body, (creds, r)
        assert r.header("WWW-Authenticate", "").startswith("Basic realm="), r
        assert not r.header_all("basic-auth"), r
    for creds in (auth("ann", "s3cret"), auth("bob", "pass:word")):
        r = fetch(srv.port, "/members/page.html", headers=creds)
        assert r.status == 200 and r.body == b"members only\n", (creds, r)
        assert r.header("X-Members") == "yes" and not r.header_all("basic-auth"), r
    r = fetch(srv.port, "/open.html")
    assert r.status == 200 and not r.header_all("basic-auth"), r


def test_check_names_basic_auth(build, gatling):
    srv = start(gatling)
    p = subprocess.run([build.binary, "--check", "-p", "0", "--no-chroot"], cwd=srv.docroot,
                       capture_output=True, text=True, timeout=60)
    said = [l for l in p.stderr.splitlines() if "Basic-Auth" in l]
    assert len(said) == 1 and "_headers:1:" in said[0] and "401" in said[0], p.stderr


def test_one_value_of_a_field_two_blocks_set(gatling):
    """The later (more specific) block's X-Frame-Options wins: one field."""
    srv = start(gatling)
    r = fetch(srv.port, "/framed/x.html")
    assert r.status == 200 and r.header_all("x-frame-options") == ["SAMEORIGIN"], r
    r = fetch(srv.port, "/open.html")
    assert r.header_all("x-frame-options") == ["DENY"], r


def test_a_placeholder_adds_no_cookie_attribute(gatling):
    """A placeholder bringing ; or = (decoded from the URL) would choose the
    cookie's attributes: they are percent-encoded, as the rest of it."""
    srv = start(gatling)
    r = fetch(srv.port, "/c/a")
    assert r.status == 200 and r.header_all("set-cookie") == ["last=a; Path=/c"], r
    r = fetch(srv.port, "/c/b%3Bx%3D1")
    assert r.status == 200 and r.header_all("set-cookie") == ["last=b%3Bx%3D1; Path=/c"], r


def test_check_names_a_nul_in_a_rule_line(build, tmp_path):
    """A NUL cuts a line short where the parser reads it: --check names the
    line (before: _headers' said nothing, _redirects' a wrong reason)."""
    root = tmp_path / "nul"
    root.mkdir()
    (root / "_redirects").write_bytes(b"/a\x00b /c 301\n/d /e 302\n")
    (root / "_headers").write_bytes(b"/x\n  X-A: b\x00c\n/y\n  X-B: d\n")
    p = subprocess.run([build.binary, "--check", "-p", "0", "--no-chroot"], cwd=str(root),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    for where in ("_redirects:1: a NUL byte", "_headers:2: a NUL byte"):
        assert where in p.stderr, p.stderr
    assert "_redirects:2" not in p.stderr and "_headers:4" not in p.stderr, p.stderr
