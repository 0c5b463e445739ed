"""Directory indexes and listings: index.html before the -I name; with -d a
directory without an index gets an HTML5 listing (escaped names, working
percent-encoded links, hidden dotfiles and private files, Apache's sort
keys); without -d (or with -D) it is 403.  A directory of 10,000 files is
listed quickly."""
import html
import os
import re
import time
import urllib.parse
from datetime import datetime, timezone

import pytest

from conftest import BENCH, Mode, Symlink, fetch, figure, serial
from feature_helpers import assert_ok, assert_status, module_server, norm_ctype

T0 = 1500000000
NAMES = {  # file name -> content, in /list/
    "a&b<c>.txt": b"amp lt gt\n",
    "sp ace.txt": b"with a space\n",
    "100%.txt": b"one hundred percent\n",
    "q?x.txt": b"question mark\n",
    "quote\"s'.txt": b"quotes\n",
    "\u00e9t\u00e9.txt".encode(): b"utf-8 name\n",
    "z.txt": b"z" * 5000,
    "colon:x.txt": b"colon\n",
}
BAD_UTF8 = b"bad\xff.txt"  # not UTF-8: shown as U+FFFD, but still linked to itself
HIDDEN = [".hidden", ".hiddendir", "private.txt", "privdir", "dangling"]
BIG_N = 10000

TREE = {
    "list": dict({k if isinstance(k, str) else k.decode(): v for k, v in NAMES.items()}, **{
        "sub": {"s.txt": b"in sub\n"},
        ".hidden": b"dotfile\n",
        ".hiddendir": {"x.txt": b"x\n"},
        "private.txt": Mode(b"private\n", 0o600),
        "privdir": {"p.txt": b"p\n"},
        "link.txt": Symlink("z.txt"),
        "dangling": Symlink("nowhere"),
    }),
    "withindex": {"index.html": b"<p>index.html</p>\n", "home.htm": b"<p>home</p>\n"},
    "idx2": {"home.htm": b"<p>second index</p>\n", "x.txt": b"x\n"},
    "sort": {"a.txt": b"a" * 300, "b.txt": b"b" * 100, "c.txt": b"c" * 200, "d": {}},
    "big": {},
    "x&y <z>": {"f.txt": b"f\n"},
    "odd": {},
    "sizes": {},
}
# file name bytes in /odd/ -> the name the page shows: valid UTF-8 as it is,
# what is not UTF-8, or a control or noncharacter, as U+FFFD
ODD = {
    b"euro\xe2\x82\xac": "euro\u20ac",             # 3 bytes
    b"smile\xf0\x9f\x98\x80": "smile\U0001f600",  # 4 bytes
    b"overlong\xc0\xaf": "overlong\ufffd\ufffd",    # "/" in 2 bytes
    b"surrogate\xed\xa0\x80": "surrogate\ufffd\ufffd\ufffd",
    b"cut\xe2\x82": "cut\ufffd\ufffd",             # a sequence cut short
    b"cont\x80x": "cont\ufffdx",                     # a lone continuation byte
    b"big\xf4\x90\x80\x80": "big\ufffd\ufffd\ufffd\ufffd",  # above U+10FFFF
    b"four\xf0\x9fx": "four\ufffd\ufffdx",          # broken inside a 4-byte one
    b"ctl\x01x": "ctl\ufffdx",                       # a C0 control
    b"tab\tx": "tab\tx",                             # tab is allowed
    b"c1\xc2\x85x": "c1\ufffdx",                    # a C1 control (NEL)
    b"del\x7fx": "del\ufffdx",
    b"nonchar\xef\xb7\x90": "nonchar\ufffd",        # U+FDD0
    b"fffe\xef\xbf\xbe": "fffe\ufffd",             # U+FFFE
}
# size -> the human size shown (1024-based, one decimal under 10)
SIZES = {1023: "1023", 1024: "1.0K", 10239: "10K", 1048575: "1.0M", 1048576: "1.0M",
         1572864: "1.5M", 5 << 30: "5.0G", 1 << 40: "1.0T"}
SORT_MTIME = {"a.txt": T0 + 20, "b.txt": T0 + 30, "c.txt": T0 + 10, "d": T0 + 40}


def setup_tree(root):
    for name in ODD:
        with open(os.path.join(root.encode(), b"odd", name), "wb") as f:
            f.write(b"odd name\n")
    for size in SIZES:  # sparse: no disk used
        with open(os.path.join(root, "sizes", "s%d" % size), "wb") as f:
            f.truncate(size)
    with open(os.path.join(root, "list", os.fsdecode(BAD_UTF8)), "wb") as f:
        f.write(b"bad utf-8 name\n")
    os.chmod(os.path.join(root, "list", "privdir"), 0o700)
    for name, t in SORT_MTIME.items():
        os.utime(os.path.join(root, "sort", name), (t, t))
    big = os.path.join(root, "big")
    for i in range(BIG_N):
        os.close(os.open(os.path.join(big, "file%05d.txt" % i), os.O_CREAT | os.O_WRONLY, 0o644))


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    # tmpfs: 10,000 files are made in ~0.1 s there, and never left behind
    yield from module_server(build, tmp_path_factory, "listing", TREE,
                             args=("-T", "10", "-d", "-I", "home.htm"), setup=setup_tree,
                             tmpfs=True)


ROW = re.compile(r'<tr><td><a href="([^"]*)">([^<]*)</a></td><td>([^<]*)</td>'
                 r'<td(?: title="(\d+)")?>([^<]*)</td></tr>')


def listing(srv, path, query=""):
    r = fetch(srv.port, path + query)
    assert_status(r, 200, "listing of " + path)
    assert norm_ctype(r.header("Content-Type")) == "text/html;charset=utf-8", r
    assert r.header("Content-Length") == str(len(r.body)), r
    text = r.body.decode("utf-8")  # the page is valid UTF-8 whatever the names
    assert text.startswith("<!DOCTYPE html>"), text[:80]
    shown = html.escape(urllib.parse.unquote(path), quote=False)
    assert "<title>Index of %s</title>" % shown in text, text[:400]
    return text, ROW.findall(text)


def names_of(rows):
    return [html.unescape(r[1]) for r in rows if r[0] != "../"]


def expected_names():
    out = [k if isinstance(k, str) else k.decode() for k in NAMES]
    out += ["sub/", "link.txt", "bad\ufffd.txt"]
    return out


# --------------------------------------------------------------------------
# The page

def test_listing_html5(srv):
    text, rows = listing(srv, "/list/")
    assert text.rstrip().endswith("</html>"), text[-80:]
    assert '<html lang="en">' in text and '<meta charset="utf-8">' in text
    assert "<h1>Index of /list/</h1>" in text
    assert rows[0][:2] == ("../", "../"), "first row is not ../: %r" % (rows[:1],)


def test_listing_entries(srv):
    _, rows = listing(srv, "/list/")
    assert sorted(names_of(rows)) == sorted(expected_names()), names_of(rows)


def test_listing_escapes_names(srv):
    text, rows = listing(srv, "/list/")
    hrefs = {html.unescape(r[1]): r[0] for r in rows}
    assert hrefs["a&b<c>.txt"] == "a%26b%3Cc%3E.txt", hrefs
    assert hrefs["sp ace.txt"] == "sp%20ace.txt", hrefs
    assert hrefs["100%.txt"] == "100%25.txt", hrefs
    assert hrefs["q?x.txt"] == "q%3Fx.txt", hrefs
    assert hrefs["colon:x.txt"] == "colon%3Ax.txt", hrefs  # not a scheme
    assert hrefs["\u00e9t\u00e9.txt"] == "%C3%A9t%C3%A9.txt", hrefs
    assert hrefs["bad\ufffd.txt"] == "bad%FF.txt", hrefs
    assert hrefs["sub/"] == "sub/", hrefs
    # names are HTML-escaped in the text: no raw markup from a file name
    assert "a&amp;b&lt;c&gt;.txt" in text
    assert "<c>" not in text and 'quote"s' not in text
    for h, _, _, _, _ in rows:
        assert re.fullmatch(r"[A-Za-z0-9%._~!$()*+,;=@/-]*", h.replace("../", "")), h


def test_listing_odd_utf8_names(srv):
    _, rows = listing(srv, "/odd/")
    got = {html.unescape(r[1]): r[0] for r in rows if r[0] != "../"}
    assert sorted(got) == sorted(ODD.values()), sorted(got)
    for name, shown in ODD.items():
        href = got[shown]  # the link is the name's bytes, percent-encoded
        assert urllib.parse.unquote_to_bytes(href) == name, (name, href)
        r = fetch(srv.port, "/odd/" + href)
        assert_ok(r, b"odd name\n", "the link of %r" % name)


def test_listing_human_sizes(srv):
    _, rows = listing(srv, "/sizes/")
    by = {html.unescape(r[1]): r for r in rows}
    for size, shown in SIZES.items():
        assert by["s%d" % size][3:] == (str(size), shown), by["s%d" % size]


def test_listing_hides_dotfiles_and_private(srv):
    text, rows = listing(srv, "/list/")
    for name in HIDDEN:
        assert name not in text, "%s is listed:\n%s" % (name, text)


def test_listing_sizes_and_dates(srv):
    _, rows = listing(srv, "/list/")
    by = {html.unescape(r[1]): r for r in rows}
    st = os.stat(os.path.join(srv.docroot, "list", "z.txt"))
    _, _, date, title, size = by["z.txt"]
    assert title == "5000" and size == "4.9K", by["z.txt"]
    assert date == datetime.fromtimestamp(st.st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M")
    assert by["sp ace.txt"][3:] == ("13", "13"), by["sp ace.txt"]
    assert by["sub/"][3:] == ("", "-"), by["sub/"]
    assert by["link.txt"][3:] == ("5000", "4.9K"), "a symlink shows its target: %r" % (
        by["link.txt"],)


def test_listing_links_work(srv):
    _, rows = listing(srv, "/list/")
    contents = {(k if isinstance(k, str) else k.decode()): v for k, v in NAMES.items()}
    contents.update({"link.txt": NAMES["z.txt"], "bad\ufffd.txt": b"bad utf-8 name\n"})
    for href, text, _, _, _ in rows:
        url = urllib.parse.urljoin("/list/", href)
        r = fetch(srv.port, url)
        name = html.unescape(text)
        if name.endswith("/"):
            assert_status(r, 200, "%s -> %s" % (href, url))
            assert b"<!DOCTYPE html>" in r.body, r
        else:
            assert_ok(r, contents[name], "link %r -> %s" % (href, url))


def test_root_listing_has_no_parent_row(srv):
    text, rows = listing(srv, "/")
    assert all(r[0] != "../" for r in rows), rows
    assert set(names_of(rows)) == {"list/", "withindex/", "idx2/", "sort/", "big/",
                                   "x&y <z>/", "odd/", "sizes/"}, rows


def test_title_escaped(srv):
    text, rows = listing(srv, "/x%26y%20%3Cz%3E/")
    assert "<title>Index of /x&amp;y &lt;z&gt;/</title>" in text, text[:400]
    assert "<h1>Index of /x&amp;y &lt;z&gt;/</h1>" in text
    assert names_of(rows) == ["f.txt"], rows


def test_hidden_entries_not_served(srv):
    assert_status(fetch(srv.port, "/list/.hidden"), 404)
    assert_status(fetch(srv.port, "/list/.hiddendir/"), 404)
    assert_status(fetch(srv.port, "/list/private.txt"), 403)


def test_head_listing(srv):
    full = fetch(srv.port, "/list/")
    r = fetch(srv.port, "/list/", method="HEAD")
    assert_status(r, 200)
    assert r.body == b"" and r.header("Content-Length") == full.header("Content-Length"), r


# --------------------------------------------------------------------------
# Sorting

@pytest.mark.parametrize("query,want", [
    ("", ["a.txt", "b.txt", "c.txt", "d/"]),
    ("?N=A", ["a.txt", "b.txt", "c.txt", "d/"]),
    ("?N=D", ["d/", "c.txt", "b.txt", "a.txt"]),
    ("?S=A", ["d/", "b.txt", "c.txt", "a.txt"]),
    ("?S=D", ["a.txt", "c.txt", "b.txt", "d/"]),
    ("?M=A", ["c.txt", "a.txt", "b.txt", "d/"]),
    ("?M=D", ["d/", "b.txt", "a.txt", "c.txt"]),
    ("?C=x&M=D", ["d/", "b.txt", "a.txt", "c.txt"]),
    ("?X=Y", ["a.txt", "b.txt", "c.txt", "d/"]),
    ("?N=X;S=D", ["a.txt", "c.txt", "b.txt", "d/"]),   # N=X is no key: S=D is
    ("?NN=A&M=D", ["d/", "b.txt", "a.txt", "c.txt"]),
    ("?N-D;M=A", ["c.txt", "a.txt", "b.txt", "d/"]),
    ("?n=d", ["a.txt", "b.txt", "c.txt", "d/"]),       # keys are upper case
])
def test_sort_keys(srv, query, want):
    _, rows = listing(srv, "/sort/", query)
    assert names_of(rows) == want, "%s: %r" % (query, names_of(rows))
    assert rows[0][0] == "../", "../ stays first with %s" % query


@pytest.mark.parametrize("query,links", [
    ("", ["?N=D", "?M=A", "?S=A"]),
    ("?N=D", ["?N=A", "?M=A", "?S=A"]),
    ("?M=A", ["?N=A", "?M=D", "?S=A"]),
    ("?S=D", ["?N=A", "?M=A", "?S=A"]),
])
def test_sort_header_links(srv, query, links):
    text, _ = listing(srv, "/sort/", query)
    got = re.findall(r'<th><a href="([^"]*)">', text)
    assert got == links, "%s: column links %r" % (query, got)


# --------------------------------------------------------------------------
# Index files

def test_index_html_first(srv):
    assert_ok(fetch(srv.port, "/withindex/"), b"<p>index.html</p>\n")


def test_second_index_name(srv):
    r = fetch(srv.port, "/idx2/")
    assert_ok(r, b"<p>second index</p>\n", "-I home.htm")
    assert norm_ctype(r.header("Content-Type")) == "text/html;charset=utf-8", r


@pytest.mark.parametrize("flags", [(), ("-D",), ("-d", "-D")], ids=["default", "D", "d-then-D"])
def test_no_listing_403(gatling, flags):
    s = gatling({"noindex": {"x.txt": b"x\n"}, "idx": {"index.html": b"i\n"}},
                args=("-T", "10") + flags)
    r = fetch(s.port, "/noindex/")
    assert_status(r, 403, "listing off")
    assert b"x.txt" not in r.body, r
    assert_ok(fetch(s.port, "/idx/"), b"i\n")
    assert_ok(fetch(s.port, "/noindex/x.txt"), b"x\n")


def test_without_I_no_second_index(gatling):
    s = gatling({"idx2": {"home.htm": b"h\n"}}, args=("-T", "10", "-d"))
    _, rows = listing(s, "/idx2/")
    assert names_of(rows) == ["home.htm"], rows


# --------------------------------------------------------------------------
# A big directory

@serial
def test_10000_files_fast(srv):
    fetch(srv.port, "/list/")  # warm up the connection path
    t0 = time.monotonic()
    r = fetch(srv.port, "/big/", timeout=10)
    dt = time.monotonic() - t0
    assert_status(r, 200)
    rows = ROW.findall(r.body.decode())
    assert len(rows) == BIG_N + 1, "%d rows for %d files" % (len(rows), BIG_N)
    assert rows[1][0] == "file00000.txt" and rows[-1][0] == "file%05d.txt" % (BIG_N - 1)
    figure("a listing of %d files" % BIG_N, dt, "s", hi=1.0, kind=BENCH)
