"""Access control and redirects: .htaccess Basic authentication (the nearest
file governs, subdirectories inherit, malformed files are 500), dotfiles
never served, what is behind a directory others may not search (403, also by
a symlink into it or out of it, and not listed), symlinks out of the document
root (403, or served with -L), -r redirects for missing files, URL symlinks,
and the slash redirect."""
import base64
import os

import pytest

from conftest import url, Client, Symlink, fetch, make_docroot, no_h3_client
from feature_helpers import assert_ok, assert_status, basic_auth, crypt_hash, curl, module_server

REALM = "Members only"
PW = {"alice": "wonderland", "bob": "b0b:with colon", "carol": "carol-pw"}
SECRET = b"TOPSECRET outside the docroot\n"


def htaccess(realm, *users):
    lines = ["# a comment, then the realm", realm, ""]
    lines += ["%s:%s" % (u, crypt_hash(PW[u])) for u in users]
    return ("\n".join(lines) + "\n").encode()


def make_tree():
    return {
        "open.txt": b"public\n",
        "prot": {
            ".htaccess": htaccess(REALM, "alice", "bob"),
            "f.txt": b"protected file\n",
            "index.html": b"<p>protected index</p>\n",
            "sub": {"g.txt": b"protected by the parent\n"},
            "list": {"l.txt": b"l\n"},
            "other": {".htaccess": htaccess("Other realm", "carol"), "h.txt": b"other realm\n"},
        },
        "bad": {".htaccess": {}, "f.txt": b"behind a directory named .htaccess\n"},
        "norealm": {".htaccess": b"# only a comment\n\n", "f.txt": b"x\n"},
        "nocolon": {".htaccess": b"Realm\nalice-without-colon\n", "f.txt": b"x\n"},
        "nobody": {".htaccess": b"Locked\n", "f.txt": b"nobody gets in\n"},
        ".git": {"config": b"[core]\n"},
        "a": {".secret": b"dotfile\n", "visible.txt": b"visible\n"},
        ".well-known": {"acme-challenge": {"tok-1_A": b"tok-1_A.thumbprint", ".hidden": b"no\n"},
                        "security.txt": b"Contact: mailto:a@example.org\n",
                        ".git": {"config": b"[core]\n"}},
        ".well-knowner": {"f.txt": b"not RFC 8615\n"},
        "out.txt": Symlink("../secret.txt"),
        "outdir": Symlink("../outside"),
        "in.txt": Symlink("open.txt"),
        "loop1": Symlink("loop2"), "loop2": Symlink("loop1"),  # a loop
        "self": Symlink("self/x"),                            # a link into itself
        "dangling": Symlink("nowhere.txt"),
        "outback.txt": Symlink("../root/open.txt"),  # leaves the root and comes back
        "updown": Symlink("dir/../dir/./f.txt"),
        "outparent": Symlink("dir/../.."),           # the root's parent
        "go": Symlink("http://other.example/x"),
        "gos": Symlink("https://other.example/path?q=1"),
        "dir": {"f.txt": b"in dir\n"},
        "alias": Symlink("prot"),             # an open name for a protected directory
        "pf.txt": Symlink("prot/f.txt"),      # ... and for a protected file
        "deep": {"pg.txt": Symlink("../prot/sub/g.txt")},
        "prot/pub.txt": Symlink("../open.txt"),  # a public file seen through prot/
        "closed": {  # mode 700 (outside()): 644 files no one else may reach
            "s.txt": b"behind a closed directory\n",
            "sub": {"t.txt": b"deeper behind it\n"},
            "idx": {"index.html": b"<p>closed index</p>\n"},
            "back.txt": Symlink("../open.txt"),  # an open file, by a closed path
            "go": Symlink("http://other.example/closed"),
        },
        "pubdir": {
            "f.txt": b"open\n",
            "into.txt": Symlink("../closed/s.txt"),  # open names for closed things
            "intodir": Symlink("../closed/sub"),
        },
    }


@pytest.fixture(scope="module")
def tree():
    return make_tree()


@pytest.fixture(scope="module")
def server(build, tmp_path_factory, tree):
    def outside(root):
        base = os.path.dirname(root)
        with open(os.path.join(base, "secret.txt"), "wb") as f:
            f.write(SECRET)
        os.makedirs(os.path.join(base, "outside"), exist_ok=True)
        with open(os.path.join(base, "outside", "s.txt"), "wb") as f:
            f.write(SECRET)
        os.chmod(os.path.join(root, "closed"), 0o700)
    # -b 0: these tests fail logins on purpose, many times, from one address;
    # -s: a password check waits for the pool up to POOL_WAIT, not 503 at 10 s
    yield from module_server(build, tmp_path_factory, "access", tree,
                             args=("-T", "10", "-d", "-b", "0", "-s", "%d" % POOL_WAIT),
                             setup=outside)


# A password check runs on the job pool's thread, at SCHED_IDLE (gatling.8,
# -j): on a machine whose CPUs are all busy, as in make check's first phase,
# it waits for an idle moment, seconds where the suite's hang detection
# allows 5 (one of three copies of this module beside two busy loops failed so)
POOL_WAIT = 60


def get(srv, target, *headers, method="GET"):
    return fetch(srv.port, target, method=method, headers=list(headers), timeout=POOL_WAIT)


def assert_401(r, realm=REALM, what=""):
    assert_status(r, 401, what)
    challenge = r.header("WWW-Authenticate") or ""
    assert challenge.startswith('Basic realm="%s"' % realm), "%s: %r" % (what, challenge)
    assert b"protected" not in r.body, r
    assert r.header("Content-Length") == str(len(r.body)), r


# --------------------------------------------------------------------------
# Basic authentication

@pytest.mark.parametrize("target", ["/prot/f.txt", "/prot/", "/prot/sub/g.txt", "/prot/list/",
                                    "/prot/missing.txt"])
def test_no_credentials_401(srv, target):
    assert_401(get(srv, target), what=target)


@pytest.mark.parametrize("target", ["/prot/nope.txt", "/prot/f.txt", "/prot/sub", "/prot/sub/",
                                    "/prot/no/such/dir/x", "/prot/nodir", "/prot/" + "x" * 300])
def test_protection_hides_existence(srv, target):
    """Below a protected directory, a client without credentials learns nothing:
    not whether a file exists (404 vs 401), nor a directory (301 vs 401)."""
    assert_401(get(srv, target), what=target)
    assert_401(get(srv, target, basic_auth("alice", "wrong")), what=target + " wrong password")


def test_protection_answers_with_credentials(srv):
    auth = basic_auth("alice", PW["alice"])
    assert_status(get(srv, "/prot/nope.txt", auth), 404)
    r = get(srv, "/prot/sub", auth)
    assert_status(r, 301)
    assert r.header("Location") == "/prot/sub/", r


@pytest.mark.parametrize("user,pw", [("alice", "wrong"), ("alice", ""), ("mallory", "wonderland"),
                                     ("carol", "carol-pw"), ("Alice", "wonderland"),
                                     ("alice", "wonderland ")])
def test_wrong_credentials_401(srv, user, pw):
    assert_401(get(srv, "/prot/f.txt", basic_auth(user, pw)), what="%s:%s" % (user, pw))


@pytest.mark.parametrize("value", ["Basic", "Basic !!!!", "Bearer abc",
                                   "Basic " + base64.b64encode(b"alice").decode(),
                                   "Basic " + base64.b64encode(b"alice:wonderland").decode()
                                   + " extra",
                                   "Basic " + base64.b64encode(b"alice:wonder\0land").decode(),
                                   "Basic\t" + base64.b64encode(b"alice:wonderland").decode(),
                                   "Basic " + base64.b64encode(b"alice:wonderland").decode()
                                   + "\t=="])
def test_malformed_authorization_401(srv, value):
    assert_401(get(srv, "/prot/f.txt", "Authorization: " + value), what=value)


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_right_credentials_200(srv, user):
    auth = basic_auth(user, PW[user])
    assert_ok(get(srv, "/prot/f.txt", auth), b"protected file\n", user)
    assert_ok(get(srv, "/prot/sub/g.txt", auth), b"protected by the parent\n", "subdirectory")
    assert_ok(get(srv, "/prot/", auth), b"<p>protected index</p>\n", "index")


def test_scheme_case_insensitive(srv):
    tok = base64.b64encode(b"alice:wonderland").decode()
    assert_ok(get(srv, "/prot/f.txt", "Authorization: bAsIc " + tok), b"protected file\n")


def test_blanks_around_the_token(srv):
    # RFC 7235's 1*SP after the scheme; more blanks and tabs around the token too
    tok = base64.b64encode(b"alice:wonderland").decode()
    assert_ok(get(srv, "/prot/f.txt", "Authorization: Basic  \t " + tok + " \t"),
              b"protected file\n")


def test_protected_listing(srv):
    assert_401(get(srv, "/prot/list/"), what="listing")
    r = get(srv, "/prot/list/", basic_auth("alice", PW["alice"]))
    assert_status(r, 200)
    assert b'href="l.txt"' in r.body, r


def test_nearest_htaccess_wins(srv):
    assert_401(get(srv, "/prot/other/h.txt"), "Other realm", "nearest realm")
    assert_401(get(srv, "/prot/other/h.txt", basic_auth("alice", PW["alice"])), "Other realm",
               "the parent's user in the child")
    assert_ok(get(srv, "/prot/other/h.txt", basic_auth("carol", PW["carol"])), b"other realm\n")


def test_realm_without_users_locks_out(srv):
    assert_401(get(srv, "/nobody/f.txt", basic_auth("alice", PW["alice"])), "Locked")


def test_auth_on_keepalive_connection(srv):
    with Client(srv.port, timeout=POOL_WAIT) as c:
        assert_401(c.request("/prot/f.txt"))
        assert_ok(c.request("/prot/f.txt", headers=[basic_auth("bob", PW["bob"])]),
                  b"protected file\n")
        assert_ok(c.request("/open.txt"), b"public\n")
        assert_401(c.request("/prot/f.txt"), what="credentials are per request")


def test_remembered_credentials_are_exact(srv):
    # the server remembers the Authorization value that passed (crypt is slow);
    # only that exact value may skip the check, every other one is checked
    alice = basic_auth("alice", PW["alice"])
    for _ in range(3):
        assert_ok(get(srv, "/prot/f.txt", alice), b"protected file\n", "remembered")
    assert_401(get(srv, "/prot/f.txt", basic_auth("alice", "wrong")), what="after a pass")
    assert_401(get(srv, "/prot/f.txt", basic_auth("alice", PW["alice"] + "x")), what="longer")
    assert_401(get(srv, "/prot/f.txt"), what="no credentials after a pass")
    assert_ok(get(srv, "/prot/f.txt", basic_auth("bob", PW["bob"])), b"protected file\n", "bob")
    assert_ok(get(srv, "/prot/f.txt", alice), b"protected file\n", "alice again")


@no_h3_client("curl (Debian 12's has no HTTP/3); Basic auth is the tests above")
def test_curl_user(srv, tmp_path):
    where = url(srv.port, "/prot/f.txt")
    p = curl(where, "-u", "alice:" + PW["alice"], "-w", "%{http_code}")
    assert p.returncode == 0 and p.stdout == b"protected file\n200", (p.stdout, p.stderr)
    p = curl(where, "-o", "/dev/null", "-w", "%{http_code}")
    assert p.stdout == b"401", p.stdout


@pytest.mark.parametrize("target", ["/bad/f.txt", "/norealm/f.txt", "/nocolon/f.txt"])
def test_malformed_htaccess_500(srv, target):
    # a directory named .htaccess, no realm line, a user line without ':'
    r = get(srv, target, basic_auth("alice", PW["alice"]))
    assert_status(r, 500, target)
    assert b"behind" not in r.body, r


@pytest.mark.parametrize("target,body", [("/alias/f.txt", b"protected file\n"),
                                         ("/pf.txt", b"protected file\n"),
                                         ("/deep/pg.txt", b"protected by the parent\n"),
                                         ("/alias/sub/g.txt", b"protected by the parent\n"),
                                         ("/prot/pub.txt", b"public\n")])
def test_symlink_cannot_bypass_htaccess(srv, target, body):
    # the .htaccess on the URL path and the one on the path the links lead to both apply
    assert_401(get(srv, target), what=target)
    assert_ok(get(srv, target, basic_auth("alice", PW["alice"])), body, target)


# --------------------------------------------------------------------------
# Dotfiles

@pytest.mark.parametrize("target", ["/prot/.htaccess", "/.git/config", "/a/.secret", "/.git/",
                                    "/%2egit/config", "/a/%2Esecret", "/prot/sub/../.htaccess",
                                    "/bad/.htaccess"])
def test_dotfiles_404(srv, target):
    r = get(srv, target, basic_auth("alice", PW["alice"]))
    assert_status(r, 404, target)
    assert b"$6$" not in r.body and b"[core]" not in r.body, r


@pytest.mark.parametrize("target,body", [
    ("/.well-known/acme-challenge/tok-1_A", b"tok-1_A.thumbprint"),
    ("/%2Ewell-known/acme-challenge/tok-1_A", b"tok-1_A.thumbprint"),
    ("//.well-known/./acme-challenge/../acme-challenge/tok-1_A", b"tok-1_A.thumbprint"),
    ("/.well-known/security.txt", b"Contact: mailto:a@example.org\n")])
def test_well_known_served(srv, target, body):
    # RFC 8615: certbot --webroot writes its HTTP-01 token here; the one dot
    # segment served, and only as the first segment
    assert_ok(get(srv, target), body, target)


@pytest.mark.parametrize("target", ["/.well-known/acme-challenge/.hidden", "/.well-known/.git/config",
                                    "/.well-knowner/f.txt", "/a/.well-known/x",
                                    "/.well-known/acme-challenge/missing"])
def test_well_known_dotfiles_still_404(srv, target):
    assert_status(get(srv, target), 404, target)


def test_dotfile_sibling_served(srv):
    assert_ok(get(srv, "/a/visible.txt"), b"visible\n")


# --------------------------------------------------------------------------
# Symlinks

@pytest.mark.parametrize("target", ["/out.txt", "/outdir/s.txt"])
def test_symlink_outside_403(srv, target):
    r = get(srv, target)
    assert_status(r, 403, target)
    assert SECRET not in r.body, r


@pytest.mark.parametrize("target,status", [
    ("/loop1", 403), ("/self", 403), ("/dangling", 404),
    ("/outparent/secret.txt", 403), ("/outparent/", 403),
])
def test_symlink_loops_and_dangling(srv, target, status):
    # a loop gives up after a bounded number of hops (ELOOP: 403), a dangling
    # link is a missing file
    r = get(srv, target)
    assert_status(r, status, target)
    assert SECRET not in r.body, r


def test_symlink_loop_as_directory_fails_closed(srv):
    # below a loop the .htaccess lookup cannot tell a loop from a symlinked
    # .htaccess (both ELOOP under O_NOFOLLOW): it fails closed, 500, never
    # serving; then the connection still works
    with Client(srv.port) as c:
        r = c.request("/loop2/x")
        assert_status(r, 500, "/loop2/x")
        assert_ok(c.request("/open.txt"), b"public\n", "the next request")


@pytest.mark.parametrize("target", ["/outback.txt", "/updown"])
def test_symlink_dot_segments_within_root_served(srv, target):
    # ".." in a target is resolved along the walk: out and back in is inside
    r = get(srv, target)
    assert r.status == 200, r
    assert r.body in (b"public\n", b"in dir\n"), r


def test_symlink_inside_served(srv):
    assert_ok(get(srv, "/in.txt"), b"public\n")


# --------------------------------------------------------------------------
# What is behind a closed directory (issue 35): the tests run as root, which
# the kernel lets in anywhere; gatling answers as an unprivileged server would

@pytest.mark.parametrize("target", ["/closed/s.txt", "/closed/sub/t.txt", "/closed/back.txt",
                                    "/closed/nope.txt", "/closed/no/such/x", "/closed/",
                                    "/closed/idx/", "/closed/idx/index.html", "/closed/go",
                                    "/pubdir/into.txt", "/pubdir/intodir/t.txt",
                                    "/pubdir/intodir/"])
def test_closed_directory_403(srv, target):
    """A 644 file in a 700 directory is 403, however it is named: through the
    closed directory, by a symlink into it, or a symlink inside it to an open
    file; what is missing there (or a URL symlink) is 403 too, so the answer
    tells nothing of what the directory holds."""
    r = get(srv, target)
    assert_status(r, 403, target)
    assert b"behind" not in r.body and b"closed index" not in r.body and b"public" not in r.body


def test_closed_directory_not_listed(srv):
    """Listings leave out the closed directory and symlinks that lead into it;
    the open file beside them is listed and served."""
    for path, shown, hidden in [("/", [b'href="pubdir/"', b'href="open.txt"'], [b"closed"]),
                                ("/pubdir/", [b'href="f.txt"'], [b"into", b"closed"])]:
        r = get(srv, path)
        assert_status(r, 200, path)
        for name in shown:
            assert name in r.body, (path, name, r.body)
        for name in hidden:
            assert name not in r.body, (path, name, r.body)
    assert_ok(get(srv, "/pubdir/f.txt"), b"open\n")


def test_L_follows_symlinks_out(gatling, tmp_path):
    (tmp_path / "secret.txt").write_bytes(SECRET)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "s.txt").write_bytes(SECRET)
    root = str(tmp_path / "root")
    make_docroot(root, {"out.txt": Symlink("../secret.txt"), "outdir": Symlink("../outside"),
                        "f.txt": b"f\n"})
    s = gatling(docroot=root, args=("-T", "10", "-L"))
    assert_ok(fetch(s.port, "/out.txt"), SECRET, "-L, file symlink")
    assert_ok(fetch(s.port, "/outdir/s.txt"), SECRET, "-L, directory symlink")
    assert os.path.islink(os.path.join(root, "out.txt"))


# --------------------------------------------------------------------------
# Redirects

def test_url_symlink_301(srv):
    r = get(srv, "/go")
    assert_status(r, 301)
    assert r.header("Location") == "http://other.example/x", r
    r = get(srv, "/gos")
    assert_status(r, 301)
    assert r.header("Location") == "https://other.example/path?q=1", r


@pytest.mark.parametrize("target,location", [("/dir", "/dir/"), ("/dir?a=1", "/dir/?a=1")])
def test_directory_slash_301(srv, target, location):
    r = get(srv, target)
    assert_status(r, 301, target)
    assert r.header("Location") == location, r


@pytest.mark.parametrize("prefix", ["http://master.example", "http://master.example/"])
def test_r_redirects_missing(gatling, prefix):
    s = gatling({"here.txt": b"here\n", "d": {"x.txt": b"x\n"}},
                args=("-T", "10", "-r", prefix))
    for target, loc in [("/missing.html", "/missing.html"),
                        ("/missing.html?x=1&y=2", "/missing.html?x=1&y=2"),
                        ("/d/gone.txt", "/d/gone.txt"), ("/no/such/dir/", "/no/such/dir/"),
                        ("/sp%20ace.txt", "/sp%20ace.txt")]:
        r = fetch(s.port, target)
        assert_status(r, 302, target)
        assert r.header("Location") == "http://master.example" + loc, r
    assert_ok(fetch(s.port, "/here.txt"), b"here\n", "an existing file is served")
    assert_ok(fetch(s.port, "/d/x.txt"), b"x\n")
