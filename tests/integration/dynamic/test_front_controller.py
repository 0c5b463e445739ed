"""Front controllers (issue 77, part 1): "the file if it exists, else this
script", nginx's try_files $uri $uri/ /index.php?$args, for a FastCGI rule:
front=/index.php; on -P, or "front /index.php" in a site's .proxy (read again
when it changes, checked by --check).  WordPress permalinks, Laravel,
Symfony and Drupal route every path that is not a file through index.php.

Against Debian's php-fpm (appservers.php_fpm) and a hand-made front
controller that answers what PHP made of its variables: a path that names
no file runs /index.php with SCRIPT_NAME /index.php, SCRIPT_FILENAME below
the root, REQUEST_URI the target as sent, QUERY_STRING, no PATH_INFO; a
file beside it is served as a file; a directory runs its own index.php, or
is index.html's, or else the front's; a script the rule matches runs itself
(php-fpm's 404 when it is missing); a POST's body reaches the controller;
the response cache and the coding stage take its answers.  Every test runs
over HTTP/1.1, HTTP/2 and HTTP/3 (GATLING_SCHEME).
"""
import gzip
import json
import os
import shutil
import subprocess

import pytest

import appservers
from conftest import fetch, wait_for

pytestmark = pytest.mark.skipif(not (shutil.which("php-fpm8.2") or shutil.which("php-fpm")),
                                reason="needs php-fpm (tests/setup.sh)")

FRONT = r'''<?php
header("Content-Type: application/json");
header("X-Front: 1");
$out = [];
foreach (["SCRIPT_NAME", "SCRIPT_FILENAME", "PATH_INFO", "REQUEST_URI", "QUERY_STRING",
          "DOCUMENT_ROOT", "REQUEST_METHOD", "PHP_SELF"] as $k)
    $out[$k] = array_key_exists($k, $_SERVER) ? $_SERVER[$k] : null;
$out["body"] = file_get_contents("php://input");
$out["file"] = __FILE__;
$out["pad"] = str_repeat("front controller ", 40);
echo json_encode($out);
'''

CSS = "body { color: #333 }\n" * 20


def tree(proxy="front /index.php\n"):
    return {".proxy": proxy, "index.php": FRONT, "other.php": FRONT, "style.css": CSS,
            "wp-admin": {"index.php": FRONT}, "withhtml": {"index.html": "html\n"},
            "empty": {"a.txt": "a\n"}}


@pytest.fixture(scope="module")
def fpm(tmp_path_factory):
    with appservers.php_fpm_running(tmp_path_factory.mktemp("fpm")) as sock:
        yield sock


def start(gatling, fpm, proxy="front /index.php\n", rule=None, more=()):
    rule = rule or r"F/unix:%s:\.php$" % fpm
    return gatling(tree(proxy), args=("-T", "10", "-P", rule) + tuple(more), check_fds=False)


def front(srv, target, **kw):
    r = fetch(srv.port, target, **kw)
    assert r.status == 200 and r.header("X-Front") == "1", (target, r)
    return json.loads(r.body)


def assert_front(srv, target, script="/index.php", **kw):
    """target ran script as a front controller, with nginx's variables."""
    root = os.path.realpath(srv.docroot)
    got = front(srv, target, **kw)
    query = target.split("?", 1)[1] if "?" in target else ""
    want = {"SCRIPT_NAME": script, "SCRIPT_FILENAME": root + script, "REQUEST_URI": target,
            "QUERY_STRING": query, "DOCUMENT_ROOT": root, "PHP_SELF": script}
    assert {k: got[k] for k in want} == want, (target, got)
    assert got["PATH_INFO"] in (None, ""), (target, got)
    assert got["file"] == root + script, (target, got)
    return got


def test_paths_that_name_no_file_run_the_front(gatling, fpm):
    """A permalink, the root, an escaped path: /index.php runs, REQUEST_URI
    is the target as sent (the controller routes by it)."""
    srv = start(gatling, fpm)
    assert_front(srv, "/blog/2026?x=1")
    assert_front(srv, "/")
    assert_front(srv, "/a%20b/c/")
    assert_front(srv, "/2026/11/28/hello-world/?replytocom=3#x".split("#")[0])
    got = assert_front(srv, "/wp-json/wp/v2/posts", method="POST", body=b"title=x&n=1",
                       headers=[("Content-Type", "application/x-www-form-urlencoded"),
                                ("Content-Length", "11")])
    assert got["REQUEST_METHOD"] == "POST" and got["body"] == "title=x&n=1", got


def test_files_beside_it_are_files(gatling, fpm):
    """A stylesheet is gatling's file (no PHP), a directory's index.html too;
    a directory without index.html runs its own index.php, or else the
    front; a directory without its slash gets the files' 301; a dotfile is
    never the controller's."""
    srv = start(gatling, fpm)
    r = fetch(srv.port, "/style.css")
    assert r.status == 200 and r.body == CSS.encode() and r.header("X-Front") is None, r
    assert r.header("Content-Type").startswith("text/css"), r
    assert r.header("Accept-Ranges") == "bytes", r  # the files handler's
    r = fetch(srv.port, "/withhtml/")
    assert r.status == 200 and r.body == b"html\n", r
    assert_front(srv, "/wp-admin/", "/wp-admin/index.php")
    assert_front(srv, "/wp-admin/?a=1", "/wp-admin/index.php")
    assert_front(srv, "/empty/")
    r = fetch(srv.port, "/wp-admin")
    assert r.status == 301 and r.header("Location").endswith("/wp-admin/"), r
    r = fetch(srv.port, "/empty/a.txt")
    assert r.status == 200 and r.body == b"a\n", r
    r = fetch(srv.port, "/.proxy")
    assert r.status == 404 and r.header("X-Front") is None, r


def test_scripts_run_themselves_never_their_source(gatling, fpm):
    """A script the rule matches runs as itself (its PATH_INFO split as
    before); one that is missing is php-fpm's 404, not the front's (as nginx's
    location for \\.php$); no .php is ever sent as a file."""
    srv = start(gatling, fpm)
    root = os.path.realpath(srv.docroot)
    got = front(srv, "/other.php?q=1")
    assert got["SCRIPT_NAME"] == "/other.php" and got["REQUEST_URI"] == "/other.php?q=1", got
    got = front(srv, "/other.php/x/y")
    assert got["SCRIPT_NAME"] == "/other.php" and got["PATH_INFO"] == "/x/y", got
    got = front(srv, "/index.php")
    assert got["SCRIPT_FILENAME"] == root + "/index.php", got
    r = fetch(srv.port, "/missing.php")
    assert r.status == 404 and r.header("X-Front") is None and b"<?php" not in r.body, r
    for target in ("/index.php", "/wp-admin/index.php", "/"):
        assert b"<?php" not in fetch(srv.port, target).body, target


def test_on_the_rule_and_off_in_dot_proxy(gatling, fpm):
    """front=/index.php; on -P makes it every site's (an empty .proxy);
    "front off" in a site's .proxy turns it off there, and a change of the
    file takes effect within a second or two, without a restart."""
    srv = start(gatling, fpm, proxy="", rule=r"front=/index.php;F/unix:%s:\.php$" % fpm)
    assert_front(srv, "/blog/2026?x=1")
    with open(os.path.join(srv.docroot, ".proxy"), "w") as f:
        f.write("# not here\nfront off\n")
    wait_for(lambda: fetch(srv.port, "/blog/2026").status == 404, 10,
             "front off taking effect")
    assert fetch(srv.port, "/other.php").header("X-Front") == "1"  # the rule still runs
    with open(os.path.join(srv.docroot, ".proxy"), "w") as f:
        f.write("front /other.php\n")
    wait_for(lambda: fetch(srv.port, "/blog/2026").status == 200, 10, "front /other.php")
    assert_front(srv, "/blog/2026", "/other.php")


def test_virtual_hosts(gatling, fpm):
    """With -v each host's directory is its own: its .proxy says its front
    controller, which runs with that directory as DOCUMENT_ROOT; a host
    whose .proxy says nothing has none; a file beside it is a file."""
    srv = gatling({"index.html": "no vhost\n"},
                  args=("-T", "10", "-v", "-P", r"F/unix:%s:\.php$" % fpm), check_fds=False)
    for host, proxy in (("a.test", "front /index.php\n"), ("b.test", "")):
        make = os.path.join(srv.docroot, "%s:%d" % (host, srv.port))
        os.makedirs(os.path.join(make, "wp-admin"))
        for name, text in ((".proxy", proxy), ("index.php", FRONT), ("style.css", CSS),
                           (os.path.join("wp-admin", "index.php"), FRONT)):
            with open(os.path.join(make, name), "w") as f:
                f.write(text)
    root = os.path.realpath(os.path.join(srv.docroot, "a.test:%d" % srv.port))
    got = front(srv, "/blog/2026?x=1", host="a.test")
    assert got["SCRIPT_FILENAME"] == root + "/index.php" and got["DOCUMENT_ROOT"] == root, got
    assert got["REQUEST_URI"] == "/blog/2026?x=1", got
    got = front(srv, "/wp-admin/", host="a.test")
    assert got["SCRIPT_FILENAME"] == root + "/wp-admin/index.php", got
    r = fetch(srv.port, "/style.css", host="a.test")
    assert r.status == 200 and r.body == CSS.encode() and r.header("X-Front") is None, r
    r = fetch(srv.port, "/blog/2026", host="b.test")
    assert r.status == 404 and r.header("X-Front") is None, r
    assert fetch(srv.port, "/index.php", host="b.test").header("X-Front") == "1"


def test_status_pages_stay_gatlings(gatling, fpm):
    """-S's /server-status and /metrics name no file, yet are gatling's own
    pages, not the controller's."""
    srv = start(gatling, fpm, more=("-S",))
    r = fetch(srv.port, "/server-status?json")
    assert r.status == 200 and r.header("X-Front") is None, r
    r = fetch(srv.port, "/metrics")
    assert r.status == 200 and r.header("X-Front") is None and b"gatling_" in r.body, r
    assert_front(srv, "/server-status/x")


def test_without_a_front_nothing_changes(gatling, fpm):
    """An empty .proxy and a rule without front=: a path that names no file
    is the files' 404, as before."""
    srv = start(gatling, fpm, proxy="")
    r = fetch(srv.port, "/blog/2026")
    assert r.status == 404 and r.header("X-Front") is None, r
    assert fetch(srv.port, "/other.php").header("X-Front") == "1"


def test_bad_dot_proxy(gatling, fpm, build):
    """A .proxy whose words are not a setting: the rules still apply to the
    site (it is the switch), its front controller is off and the error log
    says why; --check names the file and line and fails."""
    srv = start(gatling, fpm, proxy="front index.php\n")
    r = fetch(srv.port, "/blog/2026")
    assert r.status == 404 and r.header("X-Front") is None, r
    assert fetch(srv.port, "/other.php").header("X-Front") == "1"
    wait_for(lambda: ".proxy:1: front: not a script's path" in srv.stderr_text(), 10,
             "the error log's line")
    p = subprocess.run([build.binary, "-p", "0", "-P", r"F/unix:%s:\.php$" % fpm, "--check"],
                       cwd=srv.docroot, capture_output=True, text=True, timeout=20)
    assert p.returncode != 0 and "/.proxy:1: front: not a script's path" in p.stderr, p.stderr


def test_bad_rules_refused(build, fpm):
    """front= needs a script the FastCGI or SCGI rule runs."""
    for args in (["-P", r"front=index.php;F/unix:/x.sock:\.php$"],  # not a path
                 ["-P", r"front=/index.php;F/unix:/x.sock:^/app/"],  # not the rule's script
                 ["-P", r"front=/index.php;127.0.0.1/8080/\.php$"],  # an HTTP rule
                 ["-P", r"front=/index.php"],                       # no rule
                 ["--pool", "web=127.0.0.1/8080",                   # an HTTP pool
                  "-P", r"front=/index.php;@web/\.php$"]):
        p = subprocess.run([build.binary, "-p", "0"] + args + ["--check"],
                           capture_output=True, text=True, timeout=20)
        assert p.returncode == 2 and "front=" in p.stderr, (args, p.stderr)
    p = subprocess.run([build.binary, "-p", "0", "--pool", "php=F/unix:/x.sock", "-P",
                        r"front=/index.php;@php/\.php$", "--check"],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr  # a FastCGI pool


def test_cached_and_coded(gatling, fpm):
    """The micro-cache (.cache) stores the controller's answers per target
    (two permalinks, two entries: each a hit with its own REQUEST_URI) and
    the coding stage codes them."""
    srv = start(gatling, fpm, more=("--cache", "16M"))
    with open(os.path.join(srv.docroot, ".cache"), "w") as f:
        f.write("ttl 30\n")
    a1 = front(srv, "/blog/a")
    wait_for(lambda: "hit" in (fetch(srv.port, "/blog/a").header("Cache-Status") or ""), 10,
             "a hit for /blog/a")
    b1 = front(srv, "/blog/b")
    assert a1["REQUEST_URI"] == "/blog/a" and b1["REQUEST_URI"] == "/blog/b"
    assert json.loads(fetch(srv.port, "/blog/a").body)["REQUEST_URI"] == "/blog/a"
    r = fetch(srv.port, "/blog/c", headers=[("Accept-Encoding", "gzip")])
    assert r.status == 200 and r.header("Content-Encoding") == "gzip", r
    assert json.loads(gzip.decompress(r.body))["REQUEST_URI"] == "/blog/c"
