"""A program is never sent as a file (issue 76, 3): a path that a FastCGI
or SCGI rule (-P F/..., S/...) or a -w pattern takes is run by it or
refused, whichever host or index option led to it.  Before, -I index.php
beside -P 'F/unix:...:\\.php$' sent index.php's source for /, and a host
directory without .proxy sent its .php files' source (a wp-config.php is a
database password).

The backend is Debian's php-fpm (appservers.php_fpm); the PHP files carry a
secret in their source that their output never shows.
"""
import shutil

import pytest

import appservers
from conftest import fetch, wait_for

pytestmark = pytest.mark.skipif(not (shutil.which("php-fpm8.2") or shutil.which("php-fpm")),
                                reason="needs php-fpm (tests/setup.sh)")

PHP = ("<?php $db_password = 'hunter2';\n"
       "echo 'ran ', $_SERVER['REQUEST_METHOD'], ' ', $_SERVER['SCRIPT_NAME'], ' ',\n"
       "     $_SERVER['QUERY_STRING'], ' ', file_get_contents('php://input'), ' ',\n"
       "     $_SERVER['REQUEST_URI'], \"\\n\";\n")


@pytest.fixture(scope="module")
def fpm(tmp_path_factory):
    with appservers.php_fpm_running(tmp_path_factory.mktemp("fpm")) as sock:
        yield sock


def tree():
    return {"default": {".proxy": "", "index.php": PHP, "a.txt": "text\n",
                        "blog": {"index.php": PHP},
                        "both": {"index.html": "html\n", "index.php": PHP}},
            "plain.example": {"index.php": PHP, "wp-config.php": PHP, "b.txt": "plain text\n"}}


def start(gatling, fpm, *more):
    return gatling(tree(), args=("-T", "10", "-I", "index.php", "-P",
                                 r"F/unix:%s:\.php$" % fpm) + more, check_fds=False)


def test_an_index_that_a_rule_takes_runs(gatling, fpm):
    """-I index.php beside a FastCGI rule for \\.php$: / and /blog/ run their
    index.php (the query kept), a POST to / too, with its body (nginx's
    index does the same), REQUEST_URI the client's (nginx's $request_uri: a
    front controller routes by it); index.html still comes first; other
    files are files; no source is ever sent."""
    srv = start(gatling, fpm)
    r = fetch(srv.port, "/")
    assert r.status == 200 and r.body == b"ran GET /index.php   /\n", r
    r = fetch(srv.port, "/blog/?p=7")
    assert r.status == 200 and r.body == b"ran GET /blog/index.php p=7  /blog/?p=7\n", r
    r = fetch(srv.port, "/", method="POST", body=b"x=1",
              headers=[("Content-Type", "application/x-www-form-urlencoded"),
                       ("Content-Length", "3")])
    assert r.status == 200 and r.body == b"ran POST /index.php  x=1 /\n", r
    r = fetch(srv.port, "/both/")
    assert r.status == 200 and r.body == b"html\n", r
    r = fetch(srv.port, "/a.txt")
    assert r.status == 200 and r.body == b"text\n", r


def test_a_host_without_proxy_never_sends_a_programs_source(gatling, fpm):
    """plain.example has no .proxy, so no rule runs there: its .php files
    (by name, and as the index) are 403, its other files served, a missing
    .php 404; the error log says why."""
    srv = start(gatling, fpm)
    for path in ("/wp-config.php", "/index.php", "/", "/wp-config.php?x"):
        r = fetch(srv.port, path, host="plain.example")
        assert r.status == 403 and b"hunter2" not in r.body, (path, r)
    assert fetch(srv.port, "/missing.php", host="plain.example").status == 404
    r = fetch(srv.port, "/b.txt", host="plain.example")
    assert r.status == 200 and r.body == b"plain text\n", r
    wait_for(lambda: any("not its source" in l for l in srv.errlog), 5,
             "the refusal logged: %r" % srv.errlog)
