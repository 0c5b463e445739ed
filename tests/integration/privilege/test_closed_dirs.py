"""A closed directory (mode 700, root's) below a server that serves as
nobody (-u nobody) is 403 for whatever is asked below it, as gatling.8
promises (issue 92, item 8): before, the .htaccess lookup could not search
it and every request there was 500 (a file, the directory, a name not
there, one behind a gatling .htaccess)."""
import os

from conftest import fetch, make_docroot
from privtools import needs_root, open_dir

pytestmark = needs_root


def test_closed_directory_is_403_not_500(gatling, tmp_path):
    root = open_dir(tmp_path, "www")
    make_docroot(root, {"open.txt": b"open\n", "closed": {"f.txt": b"closed\n"},
                        "closed2": {".htaccess": b"Realm\n", "g.txt": b"x\n"}})
    for d in ("closed", "closed2"):
        os.chmod(os.path.join(root, d), 0o700)
    srv = gatling(docroot=root, args=("-T", "10", "-u", "nobody"))
    r = fetch(srv.port, "/open.txt")
    assert r.status == 200 and r.body == b"open\n", r
    for path in ("/closed/f.txt", "/closed/", "/closed/missing", "/closed2/g.txt"):
        r = fetch(srv.port, path)
        assert r.status == 403 and b"closed" not in r.body, (path, r)
