"""What the start and --check warn of before anything is served (issue 68,
"an admin's first hour"; gatling/process/advise.c): a certificate's name whose site
directory serves another port than HTTPS's (a.example:80: its HTTPS requests
would be served from the document root), the chroot of -c as root and a
backend's unix socket outside it.  Each warning is said by the start and by
--check alike (one call where they meet), and --check still exits 0: the
start serves what --check said it would.
"""
import os
import subprocess

import pytest

from conftest import (ROOT, free_port, http_only, make_docroot, wait_for)
from feature_helpers import no_leak_env  # LeakSanitizer cannot read /proc in a chroot

# the options and the checks are the same over any scheme; the tests speak
# HTTPS themselves
pytestmark = http_only


def check(build, *args, cwd):
    """gatling --check ARGS in cwd: (exit status, stderr's lines), root's
    warning of serving as root (the tests give no -u) left out."""
    p = subprocess.run([build.binary, "--check", "-p", "0"] + list(args), cwd=cwd,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return p.returncode, [l for l in p.stderr.decode(errors="replace").splitlines()
                          if "started as root without -u" not in l]


@pytest.fixture(scope="module")
def names_pki(tmp_path_factory):
    """A throwaway CA and one certificate for a.example and b.example."""
    d = str(tmp_path_factory.mktemp("pki"))
    subprocess.run(["sh", os.path.join(ROOT, "dist", "mkcert.sh"), d, "a.example",
                    "b.example"], check=True, capture_output=True, timeout=60)
    return d


def https_get(port, name, ca):
    """GET https://NAME:PORT/ (NAME resolved to 127.0.0.1, SNI and Host NAME): the body."""
    p = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", ca, "--resolve",
                        "%s:%d:127.0.0.1" % (name, port), "https://%s:%d/" % (name, port)],
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


def port80_warning(name, port):
    return ("gatling: warning: HTTPS: %s has a certificate, but its site directory %s:80 "
            "serves port 80 only: https://%s:%d/ would be served from the document root; "
            "name the directory %s (every port), or link %s:%d to it (gatling.8, VIRTUAL HOSTS)"
            % (name, name, name, port, name, name, port))


def test_https_name_whose_directory_is_port_80_is_warned(gatling, build, names_pki, tmp_path):
    """The README's "a.example:80" directories with certificates for their
    names: an HTTPS request looks for a.example:PORT, then a.example, and gets
    the document root.  The start and --check both say so for each name, with
    what to do; once the directory is named a.example (every port), HTTPS
    serves it and neither says a word."""
    root = str(tmp_path / "www")
    make_docroot(root, {"index.html": "root\n", "a.example:80/index.html": "A\n",
                        "b.example:80/index.html": "B\n"})
    port = free_port()
    args = ("-C", os.path.join(names_pki, "certs"), "-e", str(port))
    rc, err = check(build, *args, cwd=root)
    want = [port80_warning("a.example", port), port80_warning("b.example", port)]
    assert rc == 0 and sorted(l for l in err if "warning" in l) == sorted(
        want + [no_site_warning(["localhost"], "the document root")]), err
    assert err[-1] == "gatling: --check: the configuration is good", err
    srv = gatling(docroot=root, args=("-T", "10") + args)
    wait_for(lambda: all(w in srv.errlog for w in want), 5, "the start's warnings")
    ca = os.path.join(names_pki, "ca.pem")
    assert https_get(port, "a.example", ca) == "root\n"  # what the warning said
    srv.finish()
    os.rename(os.path.join(root, "a.example:80"), os.path.join(root, "a.example"))
    os.symlink("b.example:80", os.path.join(root, "b.example:%d" % port))
    os.mkdir(os.path.join(root, "localhost"))  # mkcert's third name (see below)
    rc, err = check(build, *args, cwd=root)
    assert rc == 0 and not [l for l in err if "warning" in l], err
    srv = gatling(docroot=root, args=("-T", "10") + args)
    assert https_get(port, "a.example", ca) == "A\n"
    assert https_get(port, "b.example", ca) == "B\n"
    assert not [l for l in srv.errlog if "warning" in l and "started as root without -u" not in l
                ], srv.errlog


def no_site_warning(names, where):
    return ("gatling: warning: HTTPS: no site directory in the document root for %s, which a "
            "certificate names: %s served from %s; make a directory of that name, or link it "
            "to one (gatling.8, VIRTUAL HOSTS)"
            % (", ".join(names), "their requests are" if len(names) > 1 else "its requests are",
               where))


def test_certificate_name_without_a_directory_is_said(gatling, build, names_pki, tmp_path):
    """Under virtual hosting (a directory for one of the names), the names a
    certificate gives that have no directory (issue 79 item 8.7: served from
    the root in silence): --check and the start name them and where their
    requests go (the document root, default/, nowhere with -v); a name whose
    directory serves another port only is port80_warning's, a wildcard none's;
    a root with no site directory at all (one site) is not warned."""
    certs = os.path.join(names_pki, "certs")  # localhost, a.example, b.example
    root = str(tmp_path / "www")
    make_docroot(root, {"index.html": "root\n", "a.example/index.html": "A\n"})
    port = free_port()
    args = ("-C", certs, "-e", str(port))
    rc, err = check(build, *args, cwd=root)
    want = no_site_warning(["localhost", "b.example"], "the document root")
    assert rc == 0 and [l for l in err if "warning" in l] == [want], err
    srv = gatling(docroot=root, args=("-T", "10") + args)
    wait_for(lambda: want in srv.errlog, 5, "the start's warning")
    assert https_get(port, "b.example", os.path.join(names_pki, "ca.pem")) == "root\n"
    srv.finish()
    os.mkdir(os.path.join(root, "default"))
    rc, err = check(build, "-v", *args, cwd=root)
    assert [l for l in err if "warning" in l] == [
        no_site_warning(["localhost", "b.example"], "default/")], err
    os.rmdir(os.path.join(root, "default"))
    os.mkdir(os.path.join(root, "localhost"))
    rc, err = check(build, "-v", *args, cwd=root)
    assert [l for l in err if "warning" in l] == [
        no_site_warning(["b.example"], "nowhere (404, -v)")], err
    os.mkdir(os.path.join(root, "b.example:80"))  # the port's warning, not this one
    rc, err = check(build, *args, cwd=root)
    assert [l for l in err if "warning" in l] == [port80_warning("b.example", port)], err
    one = str(tmp_path / "one")
    make_docroot(one, {"index.html": "one site\n"})
    rc, err = check(build, *args, cwd=one)
    assert rc == 0 and not [l for l in err if "warning" in l], err


def test_port_directory_warning_names_where_https_goes(build, names_pki, tmp_path):
    """The warning says where HTTPS would serve the name from: default/ when
    there is one, nowhere (404) with -v, and with -e 0 the port still to
    come; directories that only look like "host:port" (no port, letters in
    it, a file of that name) are not warned of."""
    certs = os.path.join(names_pki, "certs")
    root = str(tmp_path / "odd")
    make_docroot(root, {"a.example:/index.html": "x\n", "a.example:8x/index.html": "x\n",
                        "b.example:80": "a file, not a site\n"})
    rc, err = check(build, "-C", certs, "-e", str(free_port()), cwd=root)
    assert rc == 0 and not [l for l in err if "warning" in l], err
    root = str(tmp_path / "default")
    make_docroot(root, {"a.example:80/index.html": "A\n", "default/index.html": "D\n"})
    port = free_port()
    rc, err = check(build, "-C", certs, "-e", str(port), cwd=root)
    assert rc == 0 and port80_warning("a.example", port).replace(
        "the document root", "default/") in err, err
    root = str(tmp_path / "only")
    make_docroot(root, {"a.example:80/index.html": "A\n"})
    rc, err = check(build, "-v", "-C", certs, "-e", str(port), cwd=root)
    assert rc == 0 and port80_warning("a.example", port).replace(
        "the document root", "nowhere (404, -v)") in err, err
    rc, err = check(build, "-C", certs, "-e", "0", cwd=root)
    assert rc == 0 and any("https://a.example:PORT/ would be served from the document root"
                           in l and "link a.example:PORT to it" in l for l in err), err


def test_name_without_a_certificate_is_not_warned(build, tmp_path):
    """A directory for a name no certificate names (HTTPS would not be
    trusted for it anyway): nothing said."""
    root = str(tmp_path / "www")
    make_docroot(root, {"c.example:80/index.html": "C\n"})
    from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
    rc, err = check(build, "-C", os.path.join(pki_dir(), "certs"), "-e", "0", cwd=root)
    assert rc == 0 and not [l for l in err if "warning" in l], err


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="-c chroots only as root")


@needs_root
def test_chroot_and_a_socket_outside_it_are_said(gatling, build, tmp_path):
    """-c as root chroots: --check and the start say so, and that the binary
    upgrade is then refused; a FastCGI socket and a pool member's socket
    outside the root are named (every request to them would be a 502 while
    --check said the configuration was good), and a CGI script whose #!
    interpreter is outside it; a socket or an interpreter inside it is not."""
    root = str(tmp_path / "www")
    from conftest import Mode
    make_docroot(root, {".proxy": "", "index.html": "x\n", "run/placeholder": "",
                        "a.example/cgi/py.cgi": Mode("#!/usr/bin/python3\nprint()\n", 0o755),
                        "sh.cgi": Mode("#!/bin/sh\necho\n", 0o755), "bin/sh": "",
                        "plain.cgi": "not a program\n"})
    inside = os.path.join(root, "run", "in.sock")
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.bind(inside)
    outside = str(tmp_path / "php-fpm.sock")
    args = ("-c", root, "-P", r"F/unix:%s:\.php$" % outside, "-P", r"F/unix:/run/in.sock:\.phtml$",
            "--pool", "app=unix:/run/pool-b.sock,127.0.0.1/9", "-P", "@app/^/app/",
            "-w", r"^/cgi/.*\.cgi$", "-w", r"^/sh\.cgi$")
    rc, err = check(build, *args, cwd="/")
    s.close()
    note = ("gatling: note: -c %s: started as root, gatling chroots into it: after the start "
            "only paths inside it can be opened, and the binary upgrade (SIGUSR2, --reload, "
            "systemctl reload) is refused; to serve it without a chroot, add --no-chroot "
            "(gatling.8, SECURITY)" % root)
    fpm = ("gatling: warning: -P F/unix:%s:\\.php$: after the chroot into %s, unix:%s is %s%s, "
           "which does not exist: its requests will fail (502) unless the backend's socket is "
           "made there; to reach %s, add --no-chroot (gatling.8, SECURITY)"
           % (outside, root, outside, root, outside, outside))
    assert rc == 0 and note in err and fpm in err, err
    pool = [l for l in err if l.startswith("gatling: warning: --pool app=")]
    assert len(pool) == 1 and "unix:/run/pool-b.sock is %s/run/pool-b.sock" % root in pool[0], err
    assert not [l for l in err if "in.sock" in l], err
    py = ("gatling: warning: -w ^/cgi/.*\\.cgi$: %s/a.example/cgi/py.cgi runs /usr/bin/python3 "
          "(its #! line), which after the chroot into %s is %s/usr/bin/python3 and does not "
          "exist: the script will fail (502) unless its interpreter is there too (gatling.8, CGI)"
          % (root, root, root))
    assert py in err and not [l for l in err if "sh.cgi" in l or "plain.cgi" in l], err
    assert err[-1] == "gatling: --check: the configuration is good", err
    srv = gatling(docroot=root, args=("-T", "10") + args,  # the start says the same
                  env=no_leak_env(build))
    wait_for(lambda: note in srv.errlog and fpm in srv.errlog, 5, "the start's note and warning")


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True,
                   timeout=60)


def test_cluster_acme_root_missing_is_said(build, tmp_path):
    """--cluster with --acme: a certificate of the ACME client's (-C's NAME ->
    .acme/...) whose chain's issuing root --acme-ca-root lacks (a private CA
    whose API root alone is there, as with Pebble) would be refused by every
    other node, which orders its own (issue 79 item 8.8): --check and the
    start name the root; with it in the file, nothing is said."""
    d = str(tmp_path)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    for cn, name in (("Test Issuing Root", "iss"), ("Test API Root", "api")):
        openssl("req", "-x509", *ec, "-days", "30", "-subj", "/CN=" + cn, "-keyout",
                name + ".key", "-out", name + ".pem", cwd=d)
    openssl("req", "-new", *ec, "-subj", "/CN=a.test", "-keyout", "leaf.key", "-out", "leaf.csr",
            cwd=d)
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=DNS:a.test\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "iss.pem", "-CAkey", "iss.key",
            "-CAcreateserial", "-days", "10", "-extfile", "ext", "-out", "leaf.pem", cwd=d)
    version = os.path.join(d, "live", ".acme", "a.test.01")
    os.makedirs(version)
    os.rename(os.path.join(d, "leaf.pem"), os.path.join(version, "fullchain.pem"))
    os.rename(os.path.join(d, "leaf.key"), os.path.join(version, "privkey.pem"))
    os.chmod(os.path.join(version, "privkey.pem"), 0o600)
    os.symlink(".acme/a.test.01", os.path.join(d, "live", "a.test"))
    secret = os.path.join(d, "secret")
    with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("6f1c0d2e8a9b4c3d5e7f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5\n")
    with open(os.path.join(d, "both.pem"), "w") as f:
        f.write(open(os.path.join(d, "api.pem")).read() + open(os.path.join(d, "iss.pem")).read())
    root = os.path.join(d, "www")
    make_docroot(root, {"index.html": "x\n"})

    def args(ca_root):
        return ("-e", "0", "--acme", "a@gatling.test", "--acme-dir", os.path.join(d, "state"),
                "-C", os.path.join(d, "live"), "--acme-ca-root", os.path.join(d, ca_root),
                "--cluster", "etcd=http://127.0.0.1:1,secret=" + secret)
    rc, err = check(build, *args("api.pem"), cwd=root)
    want = ("gatling: warning: --cluster: the ACME certificate of a.test leads to no root of "
            "%s/api.pem: its chain's issuing root /CN=Test Issuing Root is not there, so the "
            "other nodes refuse this CA's certificates from the cluster and each orders its "
            "own; add that root (the CA's chain's, not only its API's) to --acme-ca-root "
            "(gatling.8, CLUSTER)" % d)
    assert rc == 0 and want in err, err
    assert err[-1] == "gatling: --check: the configuration is good", err
    rc, err = check(build, *args("both.pem"), cwd=root)
    assert rc == 0 and not [l for l in err if "warning" in l], err
