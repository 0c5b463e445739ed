"""PATH_INFO for FastCGI and SCGI (-P F/ and S/): a PHP application that
routes by PATH_INFO (/index.php/blog/2026) gets SCRIPT_NAME, SCRIPT_FILENAME,
PATH_INFO and PATH_TRANSLATED split as RFC 3875 4.1 has them, as nginx's
fastcgi_split_path_info and lighttpd give them: the script is the shortest
leading part of the path, ending at a segment's end, that the rule matches up
to its last character (cgienv_script; gatling.8, REVERSE PROXY).

Against the real php-fpm (Debian's, started as test_proxy.py does), which
reports what PHP makes of the variables ($_SERVER, PHP_SELF included), and an
SCGI backend written here that answers every variable it got as JSON: there
an absent PATH_INFO is seen to be absent, not empty.  Expected values are
derived from the document root the test made, never written out.
"""
import json
import os
import urllib.parse

import pytest

import appservers
from conftest import fetch, wait_for
from test_proxy import php_fpm  # noqa: F401 (a fixture)

PHP_SERVER = r'''<?php
header("Content-Type: application/json");
header("X-Php: 1");
$out = [];
foreach (["SCRIPT_NAME", "SCRIPT_FILENAME", "PATH_INFO", "PATH_TRANSLATED", "REQUEST_URI",
          "PHP_SELF", "QUERY_STRING", "DOCUMENT_ROOT"] as $k)
    $out[$k] = array_key_exists($k, $_SERVER) ? $_SERVER[$k] : null;
$out["file"] = __FILE__;
echo json_encode($out);
'''

VARS = ("SCRIPT_NAME", "SCRIPT_FILENAME", "PATH_INFO", "PATH_TRANSLATED", "REQUEST_URI",
        "QUERY_STRING", "DOCUMENT_ROOT")

# (target as sent, SCRIPT_NAME, PATH_INFO or None for none)
CASES = [
    ("/index.php", "/index.php", None),
    ("/index.php/blog/2026", "/index.php", "/blog/2026"),
    ("/index.php/a%20b/", "/index.php", "/a b/"),  # decoded (RFC 3875 4.1.5), its slash kept
    ("/sub/app.php/x?q=1", "/sub/app.php", "/x"),
    ("/index.php/", "/index.php", "/"),
    # the first script of the path, as Apache and lighttpd find it on disk
    ("/index.php/sub/app.php/y", "/index.php", "/sub/app.php/y"),
    # dot segments are gone before the split: neither part climbs
    ("/index.php/../sub/app.php/z", "/sub/app.php", "/z"),
    ("/sub/./app.php/%2e%2e/app.php/w", "/sub/app.php", "/w"),
    # an encoded slash is a slash once decoded, as nginx's $uri has it
    ("/index.php%2Fblog", "/index.php", "/blog"),
]


def tree():
    return {".proxy": "", "index.php": PHP_SERVER, "sub": {"app.php": PHP_SERVER},
            "index.html": "static\n"}


def server(gatling, rule, *extra):
    return gatling(tree(), args=("-T", "10", "-P", rule) + extra, check_fds=False)


def expected(root, target, script, info):
    """What RFC 3875 and gatling.8 give for target below the directory root."""
    query = urllib.parse.urlsplit(target).query
    want = {"SCRIPT_NAME": script, "SCRIPT_FILENAME": root + script, "PATH_INFO": info,
            "PATH_TRANSLATED": None if info is None else root + info, "REQUEST_URI": target,
            "QUERY_STRING": query, "DOCUMENT_ROOT": root}
    return want


def php_get(srv, target, host=None):
    r = fetch(srv.port, target, **({"host": host} if host else {}))
    assert r.status == 200 and r.header("X-Php") == "1", (target, r)
    return json.loads(r.body)


def test_php_fpm_path_info(gatling, php_fpm):  # noqa: F811 (the fixture)
    """The documented rule for PHP, "\\.php$", takes /index.php/blog/2026 (its
    leading part is a script) and php-fpm runs index.php with the rest as
    PATH_INFO; PHP_SELF is SCRIPT_NAME and PATH_INFO again."""
    srv = server(gatling, "F/unix:%s:\\.php$" % php_fpm)
    root = os.path.realpath(srv.docroot)
    for target, script, info in CASES:
        got = php_get(srv, target)
        want = expected(root, target, script, info)
        for k in VARS:
            # PHP shows an absent PATH_INFO or PATH_TRANSLATED as absent too
            assert got[k] == want[k], (target, k, got)
        assert got["PHP_SELF"] == script + (info or ""), (target, got)
        assert got["file"] == root + script, (target, got)


def test_php_fpm_not_a_script(gatling, php_fpm):  # noqa: F811
    """A path with no script part is not the rule's: the static files answer
    (no X-Php), whatever its dot segments or escapes made of it.  A script
    part the backend has no file for is php-fpm's 404."""
    srv = server(gatling, "F/unix:%s:\\.php$" % php_fpm)
    for target, status in [("/index.html", 200), ("/index.phps/x", 404),
                           ("/index.php/%2e%2e/%2e%2e/etc/passwd", 404),
                           ("/sub/app.php/%2e%2e/w", 404),
                           ("/nothing/here.txt", 404)]:
        r = fetch(srv.port, target)
        assert r.status == status and r.header("X-Php") is None, (target, r)
    # the rule's, but no such script: php-fpm's own 404, the split unchanged
    r = fetch(srv.port, "/missing.php/blog")
    assert r.status == 404 and r.header("X-Php") is None, r
    wait_for(lambda: "Primary script unknown" in srv.stderr_text(), 15,
             "php-fpm's complaint in the error log")


def test_php_fpm_catch_all_keeps_the_whole_path(gatling, php_fpm):  # noqa: F811
    """A rule that matches at the path's start ("^/") marks no segment's end
    as a script's: SCRIPT_NAME stays the whole path, as before PATH_INFO was
    split (a PHP file anywhere still runs)."""
    srv = server(gatling, "F/unix:%s:^/" % php_fpm)
    root = os.path.realpath(srv.docroot)
    got = php_get(srv, "/sub/app.php?a=1")
    assert got["SCRIPT_NAME"] == "/sub/app.php" and got["PATH_INFO"] is None, got
    assert got["SCRIPT_FILENAME"] == root + "/sub/app.php", got


def test_php_fpm_vhost(gatling, php_fpm):  # noqa: F811
    """With -v, the vhost's directory is the document root of every path:
    SCRIPT_FILENAME and PATH_TRANSLATED are below it; REQUEST_URI is the
    target as sent."""
    srv = gatling({"index.html": "no vhost\n"},
                  args=("-T", "10", "-v", "-P", "F/unix:%s:\\.php$" % php_fpm), check_fds=False)
    vdir = os.path.join(srv.docroot, "example.test:%d" % srv.port)
    os.makedirs(os.path.join(vdir, "sub"))
    for name, text in ((".proxy", ""), ("index.php", PHP_SERVER),
                       (os.path.join("sub", "app.php"), PHP_SERVER)):
        with open(os.path.join(vdir, name), "w") as f:
            f.write(text)
    root = os.path.realpath(vdir)
    for target, script, info in CASES[1:4]:
        got = php_get(srv, target, host="example.test")
        want = expected(root, target, script, info)
        assert {k: got[k] for k in VARS} == want, (target, got)
    # a host without the directory is not served at all (-v)
    assert fetch(srv.port, "/index.php/blog", host="other.test").status == 404


# ---- SCGI: a backend that answers the variables it got ----

def scgi_answer(conn):
    """One SCGI request: every variable, as JSON, and the body's length."""
    with conn:
        data = b""
        while b":" not in data:
            k = conn.recv(4096)
            if not k:
                return
            data += k
        n, rest = data.split(b":", 1)
        n = int(n)
        while len(rest) < n + 1:
            rest += conn.recv(65536)
        assert rest[n:n + 1] == b",", rest[:n + 1]
        items = rest[:n].split(b"\0")[:-1]
        env = dict(zip((k.decode() for k in items[0::2]), (v.decode() for v in items[1::2])))
        body = json.dumps(env).encode()
        conn.sendall(b"Status: 200 OK\r\nContent-Type: application/json\r\nX-Scgi: 1\r\n"
                     b"\r\n" + body)


@pytest.fixture(scope="module")
def scgi_echo():
    lst = appservers.serve(appservers.listener(), scgi_answer, threaded=True)
    yield lst.getsockname()[1]
    lst.close()


def scgi_get(srv, target):
    r = fetch(srv.port, target)
    assert r.status == 200 and r.header("X-Scgi") == "1", (target, r)
    return json.loads(r.body)


def test_scgi_path_info(gatling, scgi_echo):
    """The same split over SCGI, and what gatling sends exactly: no PATH_INFO
    nor PATH_TRANSLATED at all when no path follows the script."""
    srv = server(gatling, "S/127.0.0.1/%d/\\.php$" % scgi_echo)
    root = os.path.realpath(srv.docroot)
    for target, script, info in CASES:
        got = scgi_get(srv, target)
        want = expected(root, target, script, info)
        for k in VARS:
            assert got.get(k) == want[k], (target, k, got)
        assert ("PATH_INFO" in got) == (info is not None), (target, got)


def test_scgi_mount_point(gatling, scgi_echo):
    """An application mounted at /app ("^/app(/|$)"): SCRIPT_NAME is the
    mount point and PATH_INFO what the application routes by, as lighttpd
    gives a prefix-mapped backend; "^/scgi/" matches no segment's end, so
    its paths go whole, as before."""
    srv = gatling({".proxy": ""}, args=("-T", "10", "-P", "S/127.0.0.1/%d/^/app(/|$)" % scgi_echo,
                                        "-P", "S/127.0.0.1/%d/^/scgi/" % scgi_echo),
                  check_fds=False)
    for target, script, info in [("/app", "/app", None), ("/app/", "/app", "/"),
                                 ("/app/users/7?x=y", "/app", "/users/7"),
                                 ("/scgi/x/y", "/scgi/x/y", None)]:
        got = scgi_get(srv, target)
        assert (got["SCRIPT_NAME"], got.get("PATH_INFO")) == (script, info), (target, got)
    assert fetch(srv.port, "/apple/x").status == 404


def test_scgi_script_depth(gatling, scgi_echo):
    """A script part is looked for among the first 32 segment ends (each one
    is a match of the rule on the loop); a path of 2000 segments is answered
    at once, not the rule's."""
    srv = server(gatling, "S/127.0.0.1/%d/\\.php$" % scgi_echo)
    deep = "/d" * 31 + "/x.php"
    got = scgi_get(srv, deep + "/info")
    assert (got["SCRIPT_NAME"], got["PATH_INFO"]) == (deep, "/info"), got
    r = fetch(srv.port, "/d" + deep + "/info")
    assert r.status == 404 and r.header("X-Scgi") is None, r
    r = fetch(srv.port, "/a" * 2000 + "/x.php/info")
    assert r.status in (404, 414) and r.header("X-Scgi") is None, r


def test_pool_rule(gatling, php_fpm, scgi_echo):  # noqa: F811
    """A rule that sends to a --pool splits as a rule with its own backend:
    by its expression, in the pool's protocol."""
    srv = gatling(tree(), args=("-T", "10", "--pool", "php=F/unix:%s" % php_fpm,
                                "--pool", "app=S/127.0.0.1/%d" % scgi_echo,
                                "-P", "@php/\\.php$", "-P", "@app/^/app(/|$)"),
                  check_fds=False)
    root = os.path.realpath(srv.docroot)
    got = php_get(srv, "/sub/app.php/x?q=1")
    assert {k: got[k] for k in VARS} == expected(root, "/sub/app.php/x?q=1", "/sub/app.php", "/x")
    got = scgi_get(srv, "/app/users/7")
    assert (got["SCRIPT_NAME"], got["PATH_INFO"]) == ("/app", "/users/7"), got
