"""What is a program is decided by the file, not by the rule a request
matched (issue 92, items 3, 5, 6 and 8).  Before: a rule narrowed to
MediaWiki's entry scripts (-P 'F/...:^/w/(index|load|...)\\.php$') sent
/w/LocalSettings.php's source as bytes and --check said nothing; backup
copies of a script (LocalSettings.php~, wp-config.php.bak, .swp, .orig,
.save, .old) were sent with the password; /uploads/evil.jpg/x.php went to
php-fpm, whose cgi.fix_pathinfo ran evil.jpg (a pool allowing .jpg printed
the payload); a closed directory (mode 700) ran its .php files.

The backend is Debian's php-fpm (appservers.php_fpm) with a pool that lets
.jpg run too, as the report's did; the PHP files carry a secret in their
source that their output never shows.
"""
import os
import shutil
import subprocess

import pytest

import appservers
from conftest import fetch, wait_for

pytestmark = pytest.mark.skipif(not (shutil.which("php-fpm8.2") or shutil.which("php-fpm")),
                                reason="needs php-fpm (tests/setup.sh)")

PHP = ("<?php $wgSecretKey = 'hunter2';\n"
       "echo 'ran ', $_SERVER['SCRIPT_NAME'], ' [', $_SERVER['PATH_INFO'] ?? '', \"]\\n\";\n")
EVIL = "GIF89a\n<?php echo 'payload ', 6 * 7, \"\\n\";\n"
BACKUPS = ("~", ".bak", ".swp", ".orig", ".save", ".old", ".php.BAK")
NARROW = r"F/unix:%s:^/w/(index|load|api|rest|thumb|opensearch_desc|img_auth)\.php$"


@pytest.fixture(scope="module")
def fpm(tmp_path_factory):
    pool = "pm = static\npm.max_children = 2\nsecurity.limit_extensions = .php .jpg\n"
    with appservers.php_fpm_running(tmp_path_factory.mktemp("fpm"), pool=pool) as sock:
        yield sock


def tree():
    w = {"index.php": PHP, "LocalSettings.php": PHP}
    w.update(("LocalSettings.php" + b, PHP) for b in BACKUPS)
    return {".proxy": "", "w": w, "wp-config.php.bak": PHP, "notes.bak": "a text's copy\n",
            "readme.txt": "text\n", "uploads": {"evil.jpg": EVIL},
            "closed": {"run.php": PHP, "f.txt": "closed text\n"}}


def start(gatling, rule, *more):
    srv = gatling(tree(), args=("-T", "10", "-P", rule) + more, check_fds=False)
    os.chmod(os.path.join(srv.docroot, "closed"), 0o700)
    return srv


def refused(r):
    return r.status == 403 and b"hunter2" not in r.body and b"payload" not in r.body


def test_a_narrowed_rule_never_sends_the_other_scripts(gatling, fpm):
    """Only the entry scripts run; every other .php is still a program:
    403, never its source, whatever the case of its extension."""
    srv = start(gatling, NARROW % fpm)
    r = fetch(srv.port, "/w/index.php")
    assert r.status == 200 and r.body == b"ran /w/index.php []\n", r
    for path in ("/w/LocalSettings.php", "/w/LocalSettings.php?action=raw"):
        r = fetch(srv.port, path)
        assert refused(r), (path, r)
    r = fetch(srv.port, "/readme.txt")
    assert r.status == 200 and r.body == b"text\n", r
    wait_for(lambda: any("not its source" in l for l in srv.errlog), 5,
             "the refusal logged: %r" % srv.errlog)


def test_backup_copies_of_programs_are_refused(gatling, fpm):
    """An editor's or admin's copy of a script is its source too: 403;
    a copy of what is no program is a file."""
    srv = start(gatling, r"F/unix:%s:\.php$" % fpm)
    for path in ["/w/LocalSettings.php" + b for b in BACKUPS] + ["/wp-config.php.bak"]:
        r = fetch(srv.port, path)
        assert refused(r), (path, r)
    r = fetch(srv.port, "/notes.bak")
    assert r.status == 200 and r.body == b"a text's copy\n", r


def test_check_names_a_rule_narrower_than_the_scripts(build, tmp_path):
    """--check (and the start) warn of a rule that runs only some of the
    .php files, naming the rule; a rule for them all says nothing."""
    os.makedirs(str(tmp_path / "root"))
    open(str(tmp_path / "root" / ".proxy"), "w").close()
    sock = str(tmp_path / "none.sock")
    for rule, warned in ((NARROW % sock, True), (r"F/unix:%s:\.php$" % sock, False)):
        p = subprocess.run([build.binary, "--check", "-p", "0", "--no-chroot", "-P", rule],
                           cwd=str(tmp_path / "root"), capture_output=True, text=True,
                           timeout=30)
        said = [l for l in p.stderr.splitlines() if "runs only some .php files" in l]
        assert bool(said) == warned, (rule, p.stderr)
        if warned:
            assert rule in said[0] and "403" in said[0], said


def test_path_info_splits_only_at_a_script_that_is_there(gatling, fpm):
    """/uploads/evil.jpg/x.php: a file where the way needs a directory is
    404 and php-fpm never hears of it (its fix_pathinfo would run the
    upload); a script that is there still gets its PATH_INFO, a missing
    one is still the backend's 404."""
    srv = start(gatling, r"F/unix:%s:\.php$" % fpm)
    for path in ("/uploads/evil.jpg/x.php", "/uploads/evil.jpg/a/b.php", "/w/index.php/x/y.php"):
        r = fetch(srv.port, path)
        if path.startswith("/w/"):
            assert r.status == 200 and r.body == b"ran /w/index.php [/x/y.php]\n", (path, r)
        else:
            assert r.status == 404 and b"payload" not in r.body, (path, r)
    r = fetch(srv.port, "/missing.php")
    assert r.status == 404 and b"payload" not in r.body, r
    wait_for(lambda: any("PATH_INFO splits only" in l for l in srv.errlog), 5,
             "the refusal logged: %r" % srv.errlog)


def test_a_closed_directory_runs_nothing_and_serves_nothing(gatling, fpm):
    """gatling.8: a closed directory (mode 700) is 403, for its scripts as
    for its files (before: its .php ran)."""
    srv = start(gatling, r"F/unix:%s:\.php$" % fpm)
    for path in ("/closed/run.php", "/closed/run.php/x", "/closed/f.txt"):
        r = fetch(srv.port, path)
        assert r.status == 403 and b"ran" not in r.body, (path, r)


def test_a_closed_directory_is_no_way_to_the_front_controller(gatling, fpm):
    """With a front controller, a path below a closed directory, there or
    not, is the files' 403 (gatling.8), not the front's (before: ran)."""
    srv = start(gatling, r"front=/w/index.php;F/unix:%s:\.php$" % fpm)
    r = fetch(srv.port, "/somewhere/else")
    assert r.status == 200 and r.body == b"ran /w/index.php []\n", r
    for path in ("/closed/missing", "/closed/", "/closed/sub/x"):
        r = fetch(srv.port, path)
        assert r.status == 403 and b"ran" not in r.body, (path, r)


def test_check_names_a_front_no_rule_runs(build, tmp_path):
    """A .proxy's front naming a file no FastCGI or SCGI rule runs (a page,
    not a script) leaves the site without a front controller: --check says
    so and fails (before: silent)."""
    root = tmp_path / "root"
    root.mkdir()
    sock = str(tmp_path / "none.sock")
    for front, bad in (("/index.html", True), ("/index.php", False)):
        (root / ".proxy").write_text("front %s\n" % front)
        p = subprocess.run([build.binary, "--check", "-p", "0", "--no-chroot",
                            "-P", r"F/unix:%s:\.php$" % sock], cwd=str(root),
                           capture_output=True, text=True, timeout=30)
        said = [l for l in p.stderr.splitlines() if "no FastCGI or SCGI rule" in l]
        assert (p.returncode == 2) == bad and bool(said) == bad, (front, p.stderr)
        if bad:
            assert ".proxy:1: front /index.html" in said[0], said
