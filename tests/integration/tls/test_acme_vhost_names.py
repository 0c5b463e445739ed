"""--acme without --acme-names: the names are the document root's virtual
host directories (issue 67's coverage of acme_setup.c's vhost_names and
acme_launch).  No CA is needed: what is checked is the start's line naming
the names, or its refusal.  The CA named is a closed port.  Proven: each
host once, lowercased, whatever ports its directories name ("example.org",
"Example.ORG:8080"); directories that name no host ("default", "localhost",
an address, a one-label name, a port that is no number) left out; over 100
such directories, the first 100 kept and the rest said; a root that names
no host, and -H (no virtual hosts), refuse the start saying what to give.
Runs in the plain HTTP pass."""
import os
import re
import subprocess

import pytest

from conftest import free_port, http_only, running_server, wait_for
from conftest import test_pki as suite_pki  # (not collected as a test by this name)

pytestmark = http_only


def args(tmp_path, *more):
    return ["-p", "0", "-e", str(free_port()), "-C", str(tmp_path / "certs"), "-S",
            "--acme", "ops@gatling.test", "--acme-ca",
            "https://127.0.0.1:%d/dir" % free_port(), "--acme-ca-root",
            suite_pki() + "/ca.pem", "--acme-dir", str(tmp_path / "acme")] + list(more)


def root_with(tmp_path, dirs):
    root = tmp_path / "www"
    for d in dirs:
        os.makedirs(str(root / d))
    (root / "index.html").write_text("hi\n")
    os.makedirs(str(tmp_path / "certs"), exist_ok=True)
    return str(root)


def started_line(build, tmp_path, dirs):
    root = root_with(tmp_path, dirs)
    with running_server(build, root, args(tmp_path), check_fds=False) as srv:
        wait_for(lambda: any("--acme: certificates for" in l for l in srv.errlog), 15,
                 "the names said: %r" % srv.errlog)
        return [l for l in srv.errlog if "--acme: " in l]


def test_host_directories_are_the_names(build, tmp_path):
    lines = started_line(build, tmp_path, [
        "example.org", "Example.ORG:8080", "www.example.org:80", "default", "localhost:80",
        "192.0.2.1:80", "[::1]:8000", "intranet", "odd.test:http", ".hidden.test"])
    said = [l for l in lines if "certificates for" in l][0]
    assert "certificates for 2 names (example.org, ...)" in said, lines


def test_over_100_host_directories(build, tmp_path):
    lines = started_line(build, tmp_path, ["h%03d.example.org" % i for i in range(103)])
    assert any(re.search(r"more than 100 host directories in \S+: the first 100 are kept "
                         r"\(or give --acme-names\)", l) for l in lines), lines
    assert any("certificates for 100 names (h" in l for l in lines), lines


@pytest.mark.parametrize("dirs, extra, says", [
    (["default", "localhost:80"], [], "no directory of the document root names a host "
                                      "(example.org, example.org:80), or give --acme-names"),
    (["example.org"], ["-H"], "-H serves no virtual hosts, or give --acme-names"),
])
def test_no_name_refuses_the_start(build, tmp_path, dirs, extra, says):
    root = root_with(tmp_path, dirs)
    p = subprocess.run([build.binary] + args(tmp_path, *extra), cwd=root, capture_output=True,
                       text=True, timeout=30)
    assert p.returncode != 0 and "--acme: no name to get a certificate for: " + says \
        in p.stderr, (p.returncode, p.stderr)
