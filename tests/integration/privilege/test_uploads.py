"""Issue 52, finding 5: an anonymous FTP upload must not change what the web
serves.  A precompressed sibling (x.gz, x.br, x.zst) is served in x's place
only if x's owner owns it, and an upload of a sibling of an existing file is
refused; the names gatling derives behaviour from (.htaccess, .proxy, .cache,
.dictionary) are refused as dotfiles."""

import ftplib
import gzip
import io
import os
import re
import subprocess

import pytest

from conftest import make_docroot
from privtools import needs_root, open_dir

PAGE = b"<html>the site's own page</html>\n"
EVIL = gzip.compress(b"<html>the uploader's page</html>\n")


def ftp_start(gatling, root, user=True):
    args = ("-T", "10", "-E", "-f", "0,upload") + (("-u", "nobody") if user else ())
    srv = gatling(docroot=root, args=args)
    for line in srv.errlog:
        m = re.search(r"port (\d+) \(ftp\)", line)
        if m:
            srv.ftp = int(m.group(1))
            return srv
    raise AssertionError("no FTP listener:\n%s" % srv.stderr_text())


def ftp_login(srv):
    f = ftplib.FTP()
    f.connect("127.0.0.1", srv.ftp, timeout=10)
    f.login()
    return f


def compressed(srv, path):
    r = subprocess.run(["curl", "-s", "--compressed", "http://127.0.0.1:%d%s" % (srv.port, path)],
                       capture_output=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return r.stdout


def site(tmp_path):
    root = open_dir(tmp_path, "www")
    make_docroot(root, {"pub": {"index.html": PAGE}}, mtime=1_600_000_000)
    os.chmod(os.path.join(root, "pub"), 0o777)
    return root


@needs_root
def test_ftp_upload_of_a_sibling_refused(gatling, tmp_path):
    srv = ftp_start(gatling, site(tmp_path))
    f = ftp_login(srv)
    for suffix in (".gz", ".br", ".zst"):
        with pytest.raises(ftplib.error_perm) as e:
            f.storbinary("STOR /pub/index.html" + suffix, io.BytesIO(EVIL))
        assert str(e.value).startswith("553"), e.value
    f.storbinary("STOR /pub/other.tar.gz", io.BytesIO(EVIL))  # no other.tar: allowed
    f.quit()
    assert compressed(srv, "/pub/index.html") == PAGE


@needs_root
def test_sibling_of_another_owner_not_served(gatling, tmp_path):
    # uploaded before the page existed (or written by anyone else who may
    # write the directory): newer, world-readable, but not the page's owner's
    root = open_dir(tmp_path, "www")
    make_docroot(root, {"pub": {}})
    os.chmod(os.path.join(root, "pub"), 0o777)
    srv = ftp_start(gatling, root)
    f = ftp_login(srv)
    f.storbinary("STOR /pub/index.html.gz", io.BytesIO(EVIL))
    f.quit()
    gz = os.path.join(root, "pub", "index.html.gz")
    assert os.stat(gz).st_uid != 0, "the upload is the -u user's"
    make_docroot(os.path.join(root, "pub"), {"index.html": PAGE}, mtime=1_600_000_000)
    assert compressed(srv, "/pub/index.html") == PAGE
    # the same sibling, the page's owner's: served (precompression still works)
    os.chown(gz, 0, 0)
    os.utime(gz, (1_700_000_000, 1_700_000_000))
    srv2 = gatling(docroot=root, args=("-T", "10", "-E"))
    assert compressed(srv2, "/pub/index.html") == gzip.decompress(EVIL)


@needs_root
@pytest.mark.parametrize("name", [".htaccess", ".proxy", ".cache", ".dictionary"])
def test_behaviour_files_refused(gatling, tmp_path, name):
    srv = ftp_start(gatling, site(tmp_path))
    f = ftp_login(srv)
    with pytest.raises(ftplib.error_perm) as e:
        f.storbinary("STOR /pub/" + name, io.BytesIO(b"x\n"))
    assert str(e.value).startswith("553"), e.value
    f.quit()
    assert not os.path.exists(os.path.join(srv.docroot, "pub", name))
