"""Apache's .htaccess files (issue 92, item 8): Debian's WordPress and
DokuWiki put one at the top of the site (rewrites; a <Files> section
denying README and the like) and in DokuWiki's data and conf directories
(Require all denied).  Before, each was a malformed gatling .htaccess and
every file below answered 500; now what they deny is 403 and the rest of
what Apache would do is left to Apache: the site's files are served.  The
files are written here as those packages ship them."""
import os
import subprocess

from conftest import fetch

WORDPRESS = """\
# BEGIN WordPress
# The directives (lines) between "BEGIN WordPress" and "END WordPress" are
# dynamically generated, and should only be modified via WordPress filters.
<IfModule mod_rewrite.c>
RewriteEngine On
RewriteRule .* - [E=HTTP_AUTHORIZATION:%{HTTP:Authorization}]
RewriteBase /
RewriteRule ^index\\.php$ - [L]
RewriteCond %{REQUEST_FILENAME} !-f
RewriteCond %{REQUEST_FILENAME} !-d
RewriteRule . /index.php [L]
</IfModule>

# END WordPress
"""
DOKUWIKI = """\
## You should disable Indexes and MultiViews either here or in the
## global config. Symlinks maybe needed for URL rewriting.
#Options -Indexes -MultiViews +FollowSymLinks

## make sure nobody gets the htaccess, README, COPYING or VERSION files
<Files ~ "^([\\._]ht|README$|VERSION$|COPYING$)">
    <IfModule mod_authz_core.c>
        Require all denied
    </IfModule>
    <IfModule !mod_authz_core.c>
        Order allow,deny
        Deny from all
    </IfModule>
</Files>

## Don't allow access to git directories
<IfModule alias_module>
    RedirectMatch 404 /\\.git
</IfModule>

## Uncomment these rules if you want to have nice URLs using
## $conf['userewrite'] = 1 - not needed for rewrite mode 2
#RewriteEngine on
#RewriteRule ^_media/(.*)              lib/exe/fetch.php?media=$1  [QSA,L]
"""
DENY_ALL = """\
## no access to the data directory
<IfModule mod_authz_core.c>
    Require all denied
</IfModule>
<IfModule !mod_authz_core.c>
    Order allow,deny
    Deny from all
</IfModule>
"""
APACHE_AUTH = """\
AuthType Basic
AuthName "Apache's own"
AuthUserFile /etc/apache2/.htpasswd
Require valid-user
"""


def tree():
    return {"wp": {".htaccess": WORDPRESS, "readme.html": b"wp readme\n",
                   "wp-includes": {"x.css": b"css\n"}},
            "doku": {".htaccess": DOKUWIKI, "doku.txt": b"doku\n", "README": b"readme\n",
                     "VERSION": b"2024-02-06\n", "COPYING": b"gpl\n",
                     "data": {".htaccess": DENY_ALL, "pages": {"start.txt": b"secret page\n"}},
                     "conf": {".htaccess": DENY_ALL, "users.auth.php": b"admin:hash\n"}},
            "apache-auth": {".htaccess": APACHE_AUTH, "f.txt": b"behind apache auth\n"}}


def test_debian_apache_htaccess_files_serve_what_they_allow(gatling):
    srv = gatling(tree())
    for path, body in (("/wp/readme.html", b"wp readme\n"), ("/wp/wp-includes/x.css", b"css\n"),
                       ("/doku/doku.txt", b"doku\n")):
        r = fetch(srv.port, path)
        assert r.status == 200 and r.body == body, (path, r)


def test_what_apache_would_deny_is_403(gatling):
    srv = gatling(tree())
    for path in ("/doku/README", "/doku/VERSION", "/doku/COPYING", "/doku/data/pages/start.txt",
                 "/doku/conf/users.auth.php", "/doku/data/", "/doku/data/missing",
                 "/apache-auth/f.txt"):
        r = fetch(srv.port, path)
        assert r.status == 403, (path, r)
        assert b"secret" not in r.body and b"hash" not in r.body and b"apache auth" not in r.body


def test_check_takes_apache_files(build, tmp_path, gatling):
    """--check does not call them malformed (it said 'no realm line' or
    'not user:hash' for each line); it says how gatling reads them."""
    srv = gatling(tree())
    p = subprocess.run([build.binary, "--check", "-p", "0", "--no-chroot"], cwd=srv.docroot,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "malformed" not in p.stderr and "user:hash" not in p.stderr, p.stderr
    said = [l for l in p.stderr.splitlines() if "Apache's" in l]
    assert len(said) == 5 and all("403" in l for l in said), p.stderr
    assert os.path.exists(os.path.join(srv.docroot, "doku", "data", ".htaccess"))
