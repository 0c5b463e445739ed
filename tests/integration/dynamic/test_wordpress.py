"""WordPress from Debian's package behind gatling's front controller (issue
77, part 1): the permalinks every WordPress blog uses (/%postname%/) need
"the file if it exists, else index.php" (nginx's try_files $uri $uri/
/index.php?$args), which a site's .proxy now says ("front /index.php").

Everything real: Debian's wordpress (a copy of /usr/share/wordpress as the
document root, so that gatling serves its stylesheets and scripts as files),
php-fpm with php-mysql, and a MariaDB server of the test's own (a data
directory in a temporary one, a unix socket, no network).  Debian's
wp-config.php reads /etc/wordpress/config-HOST.php: the test writes one for a
host name of its own and removes it after.  WordPress is installed by its
own form (wp-admin/install.php), its permalinks set to /%postname%/ in its
options table; then a post is served at its permalink, wp-login.php's form
logs in (cookies, the redirect to wp-admin), wp-admin answers the logged-in
user, and a page's assets under wp-includes/ come from gatling's files.

Runs in `make check-all` only (tests/run-check's ALL_ONLY: a database
server and WordPress's install, half a minute).
"""
import os
import re
import shutil
import subprocess
import urllib.parse
import uuid

import pytest

import appservers
from conftest import fetch, wait_for

WP = "/usr/share/wordpress"
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
pytestmark = pytest.mark.skipif(
    not (os.path.isdir(WP) and os.path.exists(MARIADBD) and shutil.which("mariadb-install-db")
         and (shutil.which("php-fpm8.2") or shutil.which("php-fpm"))
         and os.path.exists("/etc/php/8.2/mods-available/mysqli.ini")),
    reason="needs wordpress, mariadb-server, php-mysql and php-fpm (sh tests/setup.sh bench)")

TITLE = "Front controllers, served"
SLUG = "front-controllers-served"
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory):
    """A MariaDB server of the test's own: its socket's path."""
    d = str(tmp_path_factory.mktemp("mariadb"))
    data, sock = os.path.join(d, "data"), os.path.join(d, "mysql.sock")
    user = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + data,
                    "--auth-root-authentication-method=normal", "--skip-test-db"] + user,
                   check=True, capture_output=True, timeout=120)
    proc = subprocess.Popen([MARIADBD, "--no-defaults", "--datadir=" + data, "--socket=" + sock,
                             "--skip-networking", "--pid-file=" + os.path.join(d, "pid"),
                             "--log-error=" + os.path.join(d, "error.log")] + user,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: sql(sock, "SELECT 1").strip() == "1", 60, "mariadbd's socket")
        sql(sock, "CREATE DATABASE wordpress")
        yield sock
    finally:
        appservers.stop(proc)


def sql(sock, query):
    """query through the mariadb client: its output ("" when it failed)."""
    p = subprocess.run(["mariadb", "--no-defaults", "-S", sock, "-u", "root", "-N", "-B",
                        "-e", query], capture_output=True, text=True, timeout=30)
    return p.stdout if p.returncode == 0 else ""


@pytest.fixture(scope="module")
def fpm(tmp_path_factory):
    with appservers.php_fpm_running(tmp_path_factory.mktemp("fpm"), pool="pm = static\npm.max_children = 4\n") as sock:
        yield sock


@pytest.fixture(scope="module")
def site(tmp_path_factory, mariadb):
    """The document root (a copy of Debian's WordPress) and the host name
    whose /etc/wordpress/config-HOST.php the test wrote."""
    if not os.access("/etc/wordpress", os.W_OK):
        pytest.skip("/etc/wordpress is not writable: Debian's wp-config.php reads it")
    root = os.path.join(str(tmp_path_factory.mktemp("wp")), "root")
    shutil.copytree(WP, root, symlinks=True)
    # Debian's .htaccess (a link to /etc/wordpress/htaccess, Apache's
    # rewrite rules, all commented out) is no password file of gatling's:
    # a .htaccess that is not one fails closed (500 below it; gatling.8,
    # ACCESS CONTROL), so a WordPress site served by gatling has none
    os.unlink(os.path.join(root, ".htaccess"))
    with open(os.path.join(root, ".proxy"), "w") as f:
        f.write("front /index.php\n")
    host = "gatling-%s.test" % uuid.uuid4().hex[:12]
    conf = "/etc/wordpress/config-%s.php" % host
    with open(conf, "w") as f:
        f.write("<?php\n"
                "define('DB_NAME', 'wordpress');\ndefine('DB_USER', 'root');\n"
                "define('DB_PASSWORD', '');\ndefine('DB_HOST', 'localhost:%s');\n"
                "define('ABSPATH', '%s/');\ndefine('WP_CONTENT_DIR', '%s/wp-content');\n"
                "define('DISABLE_WP_CRON', true);\ndefine('WP_HTTP_BLOCK_EXTERNAL', true);\n"
                "define('AUTOMATIC_UPDATER_DISABLED', true);\n" % (mariadb, root, root))
    try:
        yield root, host
    finally:
        os.unlink(conf)


@pytest.fixture(scope="module")
def wordpress(build, site, fpm, mariadb):
    """gatling on the copy, front /index.php in its .proxy; WordPress
    installed by its form and its permalinks /%postname%/."""
    from conftest import running_server
    root, host = site
    args = ("-T", "30", "-Q", "60", "-P", r"F/unix:%s:\.php$" % fpm)
    with running_server(build, root, args, None, False) as srv:
        authority = "%s:%d" % (host, srv.port)
        r = fetch(srv.port, "/wp-admin/install.php?step=1", host=authority)
        assert r.status == 200 and b"weblog_title" in r.body, r
        form = urllib.parse.urlencode({
            "weblog_title": "gatling's blog", "user_name": "admin", "admin_password": PASSWORD,
            "admin_password2": PASSWORD, "pw_weak": "1", "admin_email": "admin@example.test",
            "blog_public": "0", "Submit": "Install WordPress", "language": ""}).encode()
        r = fetch(srv.port, "/wp-admin/install.php?step=2", method="POST", body=form,
                  host=authority, timeout=60, headers=[
                      ("Content-Type", "application/x-www-form-urlencoded"),
                      ("Content-Length", str(len(form)))])
        assert r.status == 200 and b"Success!" in r.body, (r, r.body[-2000:])
        sql(mariadb, "UPDATE wordpress.wp_options SET option_value='/%postname%/' "
                     "WHERE option_name='permalink_structure'")
        sql(mariadb, "DELETE FROM wordpress.wp_options WHERE option_name='rewrite_rules'")
        sql(mariadb, "INSERT INTO wordpress.wp_posts (post_author, post_date, post_date_gmt, "
                     "post_content, post_title, post_excerpt, post_status, post_name, "
                     "to_ping, pinged, post_modified, post_modified_gmt, "
                     "post_content_filtered, post_type) VALUES (1, NOW(), UTC_TIMESTAMP(), "
                     "'<p>Served through index.php.</p>', '%s', '', 'publish', '%s', '', '', "
                     "NOW(), UTC_TIMESTAMP(), '', 'post')" % (TITLE, SLUG))
        srv.authority = authority
        yield srv


def get(srv, target, **kw):
    return fetch(srv.port, target, host=srv.authority, timeout=30, **kw)


def test_a_post_at_its_permalink(wordpress):
    """/front-controllers-served/ names no file: index.php runs with it as
    REQUEST_URI, and WordPress answers the post (200, its title); so does
    the default /hello-world/, and an unknown permalink is WordPress's 404."""
    r = get(wordpress, "/%s/" % SLUG)
    assert r.status == 200 and TITLE.encode() in r.body, r
    r = get(wordpress, "/hello-world/")
    assert r.status == 200 and b"Hello world!" in r.body, r
    r = get(wordpress, "/no-such-post-%d/" % os.getpid())
    assert r.status == 404 and b"wp-" in r.body, r  # WordPress's page, not gatling's
    r = get(wordpress, "/")
    assert r.status == 200 and TITLE.encode() in r.body, r


def test_assets_are_files(wordpress):
    """The stylesheets and scripts a page links to below wp-includes/ (and
    the theme's) are gatling's files: 200, their bytes, ranges offered;
    no PHP source is ever sent."""
    r = get(wordpress, "/%s/" % SLUG)
    assets = set(re.findall(rb"""(?:src|href)=['"]https?://[^/'"]+(/wp-(?:includes|content)/"""
                            rb"""[^'"?]+\.(?:css|js))""", r.body))
    assert any(a.startswith(b"/wp-includes/") for a in assets), r.body[:3000]
    root = wordpress.docroot
    for a in sorted(assets)[:12]:
        path = a.decode()
        f = get(wordpress, path)
        assert f.status == 200 and f.header("Accept-Ranges") == "bytes", (path, f)
        with open(os.path.join(root, path.lstrip("/")), "rb") as src:
            assert f.body == src.read(), path
        assert f.header("Content-Type").split(";")[0] in ("text/css", "text/javascript",
                                                          "application/javascript"), (path, f)
    for php in ("/wp-config.php", "/wp-login.php", "/index.php"):
        assert b"<?php" not in get(wordpress, php).body, php


def test_login_and_wp_admin(wordpress):
    """wp-login.php's form posted logs in: its cookies and the redirect to
    wp-admin/; wp-admin/ (its own index.php, a directory's) answers the
    logged-in user with the dashboard, and without the cookies sends to the
    login page."""
    r = get(wordpress, "/wp-admin/")
    assert r.status == 302 and "wp-login.php" in r.header("Location", ""), r
    base = "http://%s" % wordpress.authority
    form = urllib.parse.urlencode({"log": "admin", "pwd": PASSWORD, "wp-submit": "Log In",
                                   "redirect_to": base + "/wp-admin/", "testcookie": "1"}).encode()
    r = get(wordpress, "/wp-login.php", method="POST", body=form, headers=[
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Content-Length", str(len(form))),
        ("Cookie", "wordpress_test_cookie=WP%20Cookie%20check")])
    assert r.status == 302 and r.header("Location") == base + "/wp-admin/", r
    cookies = [c.split(";")[0] for c in r.header_all("Set-Cookie")]
    assert any(c.startswith("wordpress_logged_in_") for c in cookies), cookies
    r = get(wordpress, "/wp-admin/", headers=[("Cookie", "; ".join(cookies))])
    assert r.status == 200 and b"Dashboard" in r.body and b"wp-admin-bar" in r.body, r
    r = get(wordpress, "/wp-admin/edit.php", headers=[("Cookie", "; ".join(cookies))])
    assert r.status == 200 and TITLE.encode() in r.body, r


def test_front_page_micro_cached(wordpress):
    """With a .cache (ttl 2), the front page's anonymous answer is stored:
    the next request is a hit (Cache-Status), and one that carries a login
    cookie is not (the cache's rule for cookies: none listed in .cache)."""
    root = wordpress.docroot
    with open(os.path.join(root, ".cache"), "w") as f:
        f.write("ttl 2\n")
    try:
        wait_for(lambda: "hit" in (get(wordpress, "/%s/" % SLUG).header("Cache-Status") or ""),
                 15, "a hit for the permalink")
        r = get(wordpress, "/%s/" % SLUG)
        assert r.status == 200 and TITLE.encode() in r.body, r
        r = get(wordpress, "/%s/" % SLUG, headers=[("Cookie", "wordpress_logged_in_x=y")])
        assert r.status == 200 and "hit" not in (r.header("Cache-Status") or ""), r
    finally:
        os.unlink(os.path.join(root, ".cache"))
