"""Mutual TLS's files that are not what they should be, beyond
test_mtls.py's (issue 67's coverage of tls/tls_client.c): a client-ca.pem
that is a directory, a FIFO (never waited on) or over a megabyte, and a
--tls-client-ca or --tls-client-crl over a megabyte: the start (--check)
stops naming the file and why."""
import os
import shutil
import subprocess

import pytest

from conftest import client_pki, http_only
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it

pytestmark = [http_only, pytest.mark.skipif(not shutil.which("openssl"),
                                            reason="needs openssl")]


def check(build, cwd, *args):
    r = subprocess.run([build.binary, "-p", "0", "-e", "0", "--check"] + list(args),
                       capture_output=True, timeout=20, cwd=str(cwd))
    return r.returncode, r.stderr.decode()


@pytest.fixture
def certs(tmp_path):
    """A copy of the suite's certificate directory, with a site mtls.test of
    the server's certificate."""
    d = tmp_path / "certs"
    shutil.copytree(os.path.join(pki_dir(), "certs"), str(d))
    os.makedirs(str(d / "mtls.test"))
    pem = (d / "server.pem").read_text()  # the leaf and its key, split as a site's files
    key = pem.index("-----BEGIN PRIVATE KEY-----") if "PRIVATE KEY-----" in pem else 0
    end = pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")
    (d / "mtls.test" / "fullchain.pem").write_text(pem[:end] if key else pem)
    (d / "mtls.test" / "privkey.pem").write_text(pem[end:] if key else pem)
    os.chmod(str(d / "mtls.test" / "privkey.pem"), 0o600)
    return d


@pytest.mark.parametrize("kind, says", [
    ("dir", "mtls.test/client-ca.pem: Invalid argument"),
    ("fifo", "mtls.test/client-ca.pem: Invalid argument"),
    ("big", "mtls.test/client-ca.pem: File too large"),
])
def test_client_ca_file_not_a_file(build, tmp_path, certs, kind, says):
    f = str(certs / "mtls.test" / "client-ca.pem")
    if kind == "dir":
        os.mkdir(f)
    elif kind == "fifo":
        os.mkfifo(f)
    else:
        with open(f, "wb") as fh:
            fh.write(b"#" * (1 << 20) + b"#\n")
    rc, err = check(build, tmp_path, "-C", str(certs))
    assert rc != 0 and says in err, (rc, err)


@pytest.mark.parametrize("opt", ["--tls-client-ca", "--tls-client-crl"])
def test_client_option_file_too_large(build, tmp_path, certs, opt):
    big = tmp_path / "big.pem"
    big.write_bytes(b"#" * (1 << 20) + b"#\n")
    ca = os.path.join(client_pki(pki_dir()), "ca.pem")
    args = ["--tls-client-ca", str(big)] if opt == "--tls-client-ca" else \
        ["--tls-client-ca", ca, "--tls-client-crl", str(big)]
    rc, err = check(build, tmp_path, "-C", str(certs), *args)
    assert rc != 0 and "%s %s: File too large" % (opt, big) in err, (rc, err)
