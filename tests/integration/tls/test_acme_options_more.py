"""--acme's option forms test_acme_serve.py, ops/test_cli.py and
test_acme_ondemand.py leave out (issue 67's coverage of acme_setup.c):
--acme-on-demand's URL forms (https:// with a host, http:// to 127.x,
[::1] or localhost alone, nothing that only begins so), --acme-on-demand-
rate's forms, --acme-eab's key forms and @FILE (an empty file, one
others may read), and the start's line naming the CAs tried in turn.
Runs in the plain HTTP pass."""
import os
import subprocess

import pytest

from conftest import free_port, http_only, running_server, wait_for
from conftest import test_pki as suite_pki  # (not collected as a test by this name)

pytestmark = http_only
EMAIL = "ops@gatling.test"


def check(build, tmp_path, *more):
    p = subprocess.run([build.binary, "-p", "0", "-e", "0", "--acme", EMAIL, "--acme-dir",
                        str(tmp_path / "acme"), "-C", str(tmp_path), "--check"] + list(more),
                       capture_output=True, text=True, timeout=30, cwd=str(tmp_path))
    return p.returncode, p.stderr


@pytest.mark.parametrize("url, good", [
    ("https://ask.example/q", True), ("http://localhost", True),
    ("http://localhost:8080/ask", True), ("http://[::1]/ask", True),
    ("http://127.0.0.2:81/ask", True), ("http://localhost.example/ask", False),
    ("http://[::1]x/ask", False), ("https:///ask", False), ("https://", False),
    ("http://10.0.0.1/ask", False)])
def test_ask_url_forms(build, tmp_path, url, good):
    rc, err = check(build, tmp_path, "--acme-on-demand", url)
    said = "--acme-on-demand %s: not an https:// URL, or http:// to 127.0.0.1" % url
    assert (said not in err) == good, err
    assert good or rc == 2, (rc, err)


@pytest.mark.parametrize("rate", ["60", "60,", ",5", "100001,1", "10,11", "10,0", "10,5x",
                                  "x,1", "0,1"])
def test_bad_rates(build, tmp_path, rate):
    rc, err = check(build, tmp_path, "--acme-on-demand", "http://127.0.0.1:9/a",
                    "--acme-on-demand-rate", rate)
    assert rc == 2 and "--acme-on-demand-rate %s: not HOUR,ADDR" % rate in err, err


def test_good_rate(build, tmp_path):
    rc, err = check(build, tmp_path, "--acme-on-demand", "http://127.0.0.1:9/a",
                    "--acme-on-demand-rate", "100000,100000")
    assert "not HOUR,ADDR" not in err, err


@pytest.mark.parametrize("key, good", [("zWNDZM6eQGHWpSRTPal5eI==", True),
                                       ("zWNDZM6eQGHWpSRTPal5eI=", True),
                                       ("zWNDZM6eQGHWpSRTPal5eI=x", False),
                                       ("zWNDZM6eQGHWpSRTPal5e+/", False)])
def test_eab_key_forms(build, tmp_path, key, good):
    """base64url (gatling.8), its padding tolerated; plain base64's + and /
    refused."""
    rc, err = check(build, tmp_path, "--acme-eab", "kid-1:" + key)
    assert ("not KID:HMACKEY" not in err) == good, err


@pytest.mark.parametrize("content, mode, says", [
    ("", 0o600, "--acme-eab kid:@"),       # empty: no key in it
    ("zWNDZM6eQGHWpSRTPal5eI\n", 0o644, "--acme-eab @"),  # others may read the secret
])
def test_eab_file_refused(build, tmp_path, content, mode, says):
    f = tmp_path / "eab.key"
    f.write_text(content)
    os.chmod(str(f), mode)
    rc, err = check(build, tmp_path, "--acme-eab", "kid:@" + str(f))
    assert rc == 2 and says in err, err


def test_eab_file_read(build, tmp_path):
    f = tmp_path / "eab.key"
    f.write_text("zWNDZM6eQGHWpSRTPal5eI\r\n")
    os.chmod(str(f), 0o600)
    rc, err = check(build, tmp_path, "--acme-eab", "kid:@" + str(f))
    assert "--acme-eab" not in err, err


@pytest.mark.parametrize("ncas, names, said", [
    (2, True, "from {0} (then {1}), kept in"),
    (3, True, "from {0} (then {1}, ...), kept in"),
    (2, False, "certificates on demand (asked of http://127.0.0.1:9/a) from {0} (then {1}), "
               "kept in"),
    (3, False, "from {0} (then {1}, ...), kept in"),
])
def test_start_line_names_the_cas(build, tmp_path, ncas, names, said):
    """The start says the CAs in the order they are tried."""
    cas = ["https://127.0.0.1:%d/dir" % free_port() for _ in range(ncas)]
    root = tmp_path / "www"
    os.makedirs(str(root))
    os.makedirs(str(tmp_path / "certs"))
    args = ["-p", "0", "-e", str(free_port()), "-C", str(tmp_path / "certs"), "-S", "--acme",
            EMAIL, "--acme-ca-root", suite_pki() + "/ca.pem", "--acme-dir",
            str(tmp_path / "acme")]
    for ca in cas:
        args += ["--acme-ca", ca]
    args += ["--acme-names", "a.example.org"] if names else \
        ["--acme-on-demand", "http://127.0.0.1:9/a"]
    with running_server(build, str(root), args, check_fds=False) as srv:
        want = said.format(*cas)
        wait_for(lambda: any(want in l for l in srv.errlog), 15, "%r in %r" % (want, srv.errlog))
