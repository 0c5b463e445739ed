"""The serving side of --acme (issue 44), with no CA: the tests write into
the state directory by hand what the ACME client would (site/acme_chal.h's
layout) and check what the loops make of it.

  - HTTP-01: /.well-known/acme-challenge/TOKEN is answered from
    STATEDIR/challenges/http-01/TOKEN ahead of -X's redirect and of a -P rule
    that takes every path, on any Host: 200 text/plain, exactly the key
    authorization; another token, a listing, a token too long or with a
    slash: 404; a file of the document root at that path is not served.
  - TLS-ALPN-01 (RFC 8737): a ClientHello offering only ALPN acme-tls/1 for
    a name with STATEDIR/challenges/tls-alpn-01/NAME.pem gets that
    certificate (with its acmeIdentifier extension) and ALPN acme-tls/1, and
    the server closes after the handshake; a name without a challenge is
    refused; with no certificate loaded yet (no -C: STATEDIR/live is empty)
    the port answers challenges and refuses every other handshake, hundreds
    of hostile ones included, and stays up.
  - First start: -X does not send a name to HTTPS until a certificate names it.
  - The options: each bad value a message and exit 2; no names, an unusable
    --acme-dir: exit 1 with why.

The client process (gatling/acme/) runs, pointed at a closed local port
(--acme-ca https://127.0.0.1:PORT/dir): it can only back off, and writes its
status file, which /metrics must show as it is.  TLS is set up here (the
module runs in the plain pass only: run-check's HTTPS_SKIP).
"""
import os
import signal
import socket
import ssl
import subprocess
import time

import pytest

from conftest import free_port, https_port, recv_to_eof, test_pki as suite_pki, wait_for

NAME = "gatling.test"
TOKEN = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA"
KEYAUTH = TOKEN + ".9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI"
# 1.3.6.1.5.5.7.1.31, id-pe-acmeIdentifier, as DER
ACME_OID = bytes.fromhex("06082b060105050701 1f".replace(" ", ""))


def closed_ca():
    """A CA URL no one answers at: the client, if any, backs off."""
    return "https://127.0.0.1:%d/dir" % free_port()


def state_dir(tmp_path):
    """STATEDIR, empty: the client makes its layout."""
    d = tmp_path / "acme"
    d.mkdir()
    return str(d)


def challenges(state, http=None, alpn=None):
    """Challenges into STATEDIR, as the client writes them (renamed into
    place): http {token: keyauth}, alpn {name: pem}.  First the client must
    have begun: at start it empties the challenge directories (what a killed
    client left is not served), then makes its first round (here, against a
    closed port: a failure at once) and writes its status file."""
    wait_for(lambda: os.path.exists(os.path.join(state, "challenges", "status")), 20,
             "the client's first round (its status file)")
    for sub, files in (("challenges/http-01", {t: k.encode() for t, k in (http or {}).items()}),
                       ("challenges/tls-alpn-01",
                        {n + ".pem": pem for n, pem in (alpn or {}).items()})):
        for name, data in files.items():
            tmp = os.path.join(state, sub, "." + name)
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, os.path.join(state, sub, name))


def challenge_pem(tmp_path, name=NAME):
    """An RFC 8737 challenge certificate for name, then its key (as the client writes it)."""
    digest = "11" * 32
    key, crt = str(tmp_path / "chal.key"), str(tmp_path / "chal.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt, "-days",
                    "7", "-subj", "/CN=ACME challenge", "-addext", "subjectAltName=DNS:" + name,
                    "-addext", "1.3.6.1.5.5.7.1.31=critical,DER:0420" + digest],
                   check=True, capture_output=True, timeout=30)
    return open(crt, "rb").read() + open(key, "rb").read()


def acme_args(state, *more):
    return ("-T", "10", "--acme", "admin@gatling.test", "--acme-ca", closed_ca(),
            "--acme-dir", state, "--acme-names", NAME) + tuple(more)


def get(port, target, host=NAME, method="GET"):
    """(status, headers dict lower-cased, body) of one HTTP/1.1 request."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                   % (method, target, host)).encode())
        raw = recv_to_eof(s)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict((k.lower(), v.strip()) for k, _, v in (l.partition(":") for l in lines[1:]))
    return int(lines[0].split()[1]), fields, body


def hello(port, name, alpn):
    """A TLS handshake offering alpn for name: (ALPN chosen, the server's
    certificate in DER, what the server sent after an acme-tls/1 handshake
    (None after any other: the server waits for a request there, and reading
    would wait for its head deadline)), or the ssl.SSLError that ended it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        with ctx.wrap_socket(raw, server_hostname=name) as s:
            chosen, der = s.selected_alpn_protocol(), s.getpeercert(binary_form=True)
            after = None
            try:
                if chosen == "acme-tls/1":
                    after = s.recv(100)
            except (ssl.SSLError, OSError) as e:
                after = e
            return chosen, der, after
    except ssl.SSLError as e:
        return e
    finally:
        raw.close()


def pem_der(pem):
    return ssl.PEM_cert_to_DER_cert(pem.decode().split("-----END CERTIFICATE-----")[0]
                                    + "-----END CERTIFICATE-----\n")


def test_http01_ahead_of_redirect_and_proxy(gatling, tmp_path):
    """With a certificate for localhost, -X and a -P rule for every path: the
    challenge is answered on any Host, the rest is refused, and the redirect
    and the proxy still have every other request."""
    state = state_dir(tmp_path)
    pki = suite_pki()
    tree = {".well-known/acme-challenge/webroot": "from the document root\n", "f.txt": "f\n",
            ".proxy": ""}  # -P serves this directory
    srv = gatling(tree, args=acme_args(state, "-C", pki + "/certs", "-e", "0", "-X",
                                       "-P", "127.0.0.1/%d/^/" % free_port()))
    challenges(state, http={TOKEN: KEYAUTH, "other": "someone.else"})
    for host in ("localhost", NAME, "anything.example", "127.0.0.1"):
        status, f, body = get(srv.port, "/.well-known/acme-challenge/" + TOKEN, host=host)
        assert (status, body) == (200, KEYAUTH.encode()), (host, status, body)
        assert f["content-type"] == "text/plain" and f["content-length"] == str(len(KEYAUTH))
    status, _, body = get(srv.port, "/.well-known/acme-challenge/" + TOKEN, method="HEAD")
    assert status == 200 and body == b""
    for target in ("/.well-known/acme-challenge/nothere", "/.well-known/acme-challenge/",
                   "/.well-known/acme-challenge", "/.well-known/acme-challenge/other",
                   "/.well-known/acme-challenge/webroot",  # the docroot's: not with --acme
                   "/.well-known/acme-challenge/a%2Fb", "/.well-known/acme-challenge/..%2e",
                   "/.well-known/acme-challenge/" + "A" * 200,
                   "/.well-known/acme-challenge/" + TOKEN + "/x",
                   "/.well-known/acme-challenge/" + TOKEN[:-1] + "%3f"):
        status, _, body = get(srv.port, target, host="localhost")
        assert status == 404, (target, status)
        assert KEYAUTH.encode() not in body
    status, _, _ = get(srv.port, "/.well-known/acme-challenge/" + "A" * 10240, host="localhost")
    assert status in (404, 414)
    status, f, _ = get(srv.port, "/f.txt", host="localhost")  # a certificate names it
    assert status == 301 and f["location"].startswith("https://localhost:")
    status, f, _ = get(srv.port, "/f.txt", host=NAME)  # none yet: not sent to HTTPS
    assert status == 502 and "location" not in f  # -P had it
    srv.check_alive()


def test_http01_without_acme_is_the_docroot(gatling, tmp_path):
    """No --acme: the document root's acme-challenge/ as before (certbot's webroot)."""
    tree = {".well-known/acme-challenge/webroot": "from the document root\n"}
    srv = gatling(tree)
    status, _, body = get(srv.port, "/.well-known/acme-challenge/webroot")
    assert (status, body) == (200, b"from the document root\n")


def test_tls_alpn01_with_no_certificate(gatling, tmp_path):
    """The first start: no -C, STATEDIR/live empty.  Challenges are answered,
    every other handshake refused (hostile ones by the hundred too), HTTP
    serves, -X does not redirect, and the counters say so."""
    pem = challenge_pem(tmp_path)
    state = state_dir(tmp_path)
    srv = gatling({"f.txt": "f\n"}, args=acme_args(state, "-e", "0", "-X", "-S"))
    challenges(state, http={TOKEN: KEYAUTH}, alpn={NAME: pem})
    port = https_port(srv)
    assert os.path.isdir(os.path.join(state, "live"))
    assert any("ACME's TLS-ALPN-01" in l for l in srv.errlog), srv.errlog
    r = hello(port, NAME, ["acme-tls/1"])
    assert not isinstance(r, Exception), r
    chosen, der, after = r
    assert chosen == "acme-tls/1"
    assert der == pem_der(pem) and ACME_OID in der
    assert after in (b"",) or isinstance(after, Exception)  # closed: no HTTP on it
    for name, alpn in ((NAME.upper(), ["acme-tls/1"]), (NAME + ".", ["acme-tls/1"])):
        r = hello(port, name, alpn)
        assert not isinstance(r, Exception) and r[0] == "acme-tls/1", (name, r)
    refused = [("other.test", ["acme-tls/1"]), (NAME, ["h2", "http/1.1"]), (NAME, None),
               (NAME, ["acme-tls/1", "h2"]), ("status", ["acme-tls/1"])]
    for name, alpn in refused:
        r = hello(port, name, alpn)
        assert isinstance(r, ssl.SSLError), (name, alpn, r)
    t0 = time.monotonic()
    for i in range(300):
        assert isinstance(hello(port, "no%d.test" % i, ["acme-tls/1"]), ssl.SSLError)
    assert time.monotonic() - t0 < 30
    srv.check_alive()
    status, _, body = get(srv.port, "/.well-known/acme-challenge/" + TOKEN)
    assert (status, body) == (200, KEYAUTH.encode())
    status, _, body = get(srv.port, "/f.txt")
    assert (status, body) == (200, b"f\n")  # -X: no certificate, no redirect
    _, _, metrics = get(srv.port, "/metrics", host="127.0.0.1")
    m = dict(l.rsplit(" ", 1) for l in metrics.decode().splitlines()
             if l and not l.startswith("#"))
    assert m["gatling_acme_tls_alpn01_answered_total"] == "3"
    assert int(m["gatling_acme_tls_alpn01_refused_total"]) >= 302
    assert m["gatling_acme_http01_answered_total"] == "1"


def test_tls_alpn01_beside_certificates(gatling, tmp_path):
    """With certificates loaded: acme-tls/1 alone for a name with a challenge
    gets it; everything else gets the certificates as before, never the
    challenge's, and acme-tls/1 is never chosen for it."""
    pem = challenge_pem(tmp_path)
    state = state_dir(tmp_path)
    srv = gatling({"f.txt": "f\n"},
                  args=acme_args(state, "-C", suite_pki() + "/certs", "-e", "0"))
    challenges(state, alpn={NAME: pem})
    port = https_port(srv)
    r = hello(port, NAME, ["acme-tls/1"])
    assert not isinstance(r, Exception) and r[0] == "acme-tls/1" and r[1] == pem_der(pem)
    for name, alpn in ((NAME, ["h2", "http/1.1"]), (NAME, ["acme-tls/1", "http/1.1"]),
                       ("localhost", None)):
        r = hello(port, name, alpn)
        assert not isinstance(r, Exception), (name, alpn, r)
        assert r[0] != "acme-tls/1" and r[1] != pem_der(pem) and ACME_OID not in r[1]
    assert isinstance(hello(port, "localhost", ["acme-tls/1"]), ssl.SSLError)


def test_challenges_under_workers(gatling, tmp_path):
    """-W 2: every worker reads the one state directory."""
    pem = challenge_pem(tmp_path)
    state = state_dir(tmp_path)
    srv = gatling({"f.txt": "f\n"}, args=acme_args(state, "-e", "0", "-W", "2"))
    challenges(state, http={TOKEN: KEYAUTH}, alpn={NAME: pem})
    port = https_port(srv)
    for _ in range(6):
        assert get(srv.port, "/.well-known/acme-challenge/" + TOKEN)[2] == KEYAUTH.encode()
        r = hello(port, NAME, ["acme-tls/1"])
        assert not isinstance(r, Exception) and r[0] == "acme-tls/1"


def run(build, *args, cwd=None):
    p = subprocess.run([build.binary, "-i", "127.0.0.1", "-p", "0", "-e", "0"] + list(args),
                       capture_output=True, text=True, timeout=20, cwd=cwd,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stderr


@pytest.mark.parametrize("args,says", [
    (("--acme", "not-an-address"), "--acme not-an-address: not an email address"),
    (("--acme", "a@gatling.test", "-E"), "-E turns off"),
    (("--acme-ca", "https://ca.test/dir"), "--acme-ca without --acme"),
    (("--acme", "a@gatling.test", "--acme-ca", "http://ca.test/"), "not an https:// URL"),
    (("--acme", "a@gatling.test", "--acme-ca", "https://ca.test/" + "a" * 1100),
     "not an https:// URL"),
    (("--acme", "a@gatling.test", "--acme-names", "ok.test,a..b"),
     "--acme-names a..b: not a host name or IP address"),
    (("--acme", "a@gatling.test", "--acme-names", ",".join("n%d.test" % i for i in range(101))),
     "more than 100 names"),
    (("--acme", "a@gatling.test", "--acme-key", "rsa1024"), "not ec256, rsa2048 or rsa3072"),
    (("--acme", "a@gatling.test", "--acme-challenge", "dns-02"),
     "not http-01, tls-alpn-01 or dns-01"),
    # DNS-01 (test_acme_dns.py issues through it)
    (("--acme", "a@gatling.test", "--acme-names", "*.gatling.test"),
     "--acme-names *.gatling.test: DNS-01 needs --acme-dns-server and --acme-dns-key"),
    (("--acme", "a@gatling.test", "--acme-challenge", "dns-01", "--acme-dns-server", "::1"),
     "--acme-challenge dns-01: DNS-01 needs --acme-dns-server and --acme-dns-key"),
    (("--acme", "a@gatling.test", "--acme-names", "*.test"), "not a host name or IP address"),
    (("--acme", "a@gatling.test", "--acme-names", "a.*.gatling.test"),
     "not a host name or IP address"),
    (("--acme", "a@gatling.test", "--acme-names", "192.0.2.1", "--acme-challenge", "dns-01",
      "--acme-dns-server", "127.0.0.1", "--acme-dns-key", "/dev/null"),
     "an IP address has no DNS-01"),
    (("--acme", "a@gatling.test", "--acme-dns-server", "ns.gatling.test"), "not ADDRESS"),
    (("--acme", "a@gatling.test", "--acme-dns-server", "127.0.0.1:65536"), "not ADDRESS"),
    (("--acme", "a@gatling.test", "--acme-dns-server", "[::1]53"), "not ADDRESS"),
    (("--acme", "a@gatling.test", "--acme-names", "*.gatling.test", "--acme-dns-server",
      "127.0.0.1", "--acme-dns-key", "/nonexistent/key"),
     "--acme-dns-key /nonexistent/key: No such file or directory"),
    (("--acme", "a@gatling.test", "--acme-names", "*.gatling.test", "--acme-dns-server",
      "127.0.0.1", "--acme-dns-key", "/dev/null"), "--acme-dns-key /dev/null: not a regular"),
    (("--acme-dns-server", "127.0.0.1"), "--acme-dns-server without --acme"),
    (("--acme", "a@gatling.test", "--acme-eab", "kid-only"), "not KID:HMACKEY"),
    (("--acme", "a@gatling.test", "--acme-eab", "kid:not base64"), "not KID:HMACKEY"),
    (("--acme", "a@gatling.test", "--acme-eab", "kid:@/proc/none/key"), "or KID:@FILE"),
    (("--acme", "a@gatling.test", "--acme-profile", "a/b"), "not a profile name"),
    (("--acme", "a@gatling.test", "--acme-issuer", "a\x01b"), "not a common name"),
    (("--acme", "a@gatling.test", "--acme-dir", ""), "not a usable file name"),
    (("--acme",), "--acme needs an argument"),
])
def test_bad_options(build, args, says):
    rc, err = run(build, *args)
    assert rc == 2 and says in err, (rc, err)


def test_eab_key_from_a_file(build, tmp_path):
    """Issue 54 (6): --acme-eab KID:@FILE reads the key from FILE, so that it
    shows in no process list: the option is taken (the start goes on to the
    state directory, which fails here)."""
    key = tmp_path / "eab"
    key.write_text("zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W\n")
    key.chmod(0o600)  # a secret: no one else reads it (gatling.8, SECURITY)
    rc, err = run(build, "--acme", "a@gatling.test", "--acme-eab", "kid-1:@%s" % key,
                  "--acme-names", NAME, "--acme-dir", "/proc/none/acme")
    assert rc == 1 and "--acme-dir /proc/none/acme" in err and "eab" not in err, (rc, err)


def test_start_refusals(build, tmp_path):
    """What only the start can tell: no names, a state directory that cannot
    be made, a CA root that is not there; and the names the vhost
    directories give."""
    root = tmp_path / "root"
    for d in ("default", "localhost:8000", "192.0.2.1:80", "www.gatling.test:80",
              "www.gatling.test:443", "b.gatling.test"):
        (root / d).mkdir(parents=True)
    (root / "c.gatling.test").write_text("a file, not a vhost\n")
    state = str(tmp_path / "state")
    rc, err = run(build, "--acme", "a@gatling.test", "--acme-dir", "/proc/none/acme",
                  cwd=str(root))
    assert rc == 1 and "--acme-dir /proc/none/acme" in err and "cannot be made" in err
    rc, err = run(build, "--acme", "a@gatling.test", "--acme-dir", state, "--acme-ca-root",
                  str(tmp_path / "none.pem"), cwd=str(root))
    assert rc == 1 and "--acme-ca-root" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, err = run(build, "--acme", "a@gatling.test", "--acme-dir", state, cwd=str(empty))
    assert rc == 1 and "no name to get a certificate for" in err
    rc, err = run(build, "-H", "--acme", "a@gatling.test", "--acme-dir", state, cwd=str(root))
    assert rc == 1 and "-H" in err
    # the names: a server that starts, told to stop at once
    p = subprocess.Popen([build.binary, "-i", "127.0.0.1", "-p", "0", "-e", "0", "-n",
                          "--acme", "a@gatling.test", "--acme-dir", state,
                          "--acme-ca", closed_ca()], cwd=str(root), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    wait_for(lambda: lines.append(p.stderr.readline()) or "(https)" in lines[-1], 10,
             "the HTTPS listener")
    p.terminate()
    assert p.wait(10) == 0
    said = "".join(lines)
    assert "certificates for 2 names (b.gatling.test, ...)" in said, said
    assert os.path.isdir(os.path.join(state, "live"))
    assert oct(os.stat(os.path.join(state, "live")).st_mode & 0o777) == "0o700"


def metric_lines(port):
    status, _, body = get(port, "/metrics", host="127.0.0.1")
    assert status == 200
    return [l for l in body.decode().splitlines() if l and not l.startswith("#")]


def test_metrics_expiry_and_status(gatling, tmp_path):
    """/metrics: each loaded certificate's expiry (its notAfter), and the
    client's status file's numbers; a malformed status file is no metrics."""
    state = state_dir(tmp_path)
    live = os.path.join(state, "live", NAME)
    os.makedirs(live)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", live + "/privkey.pem",
                    "-out", live + "/fullchain.pem", "-days", "5", "-subj", "/CN=" + NAME],
                   check=True, capture_output=True, timeout=30)
    end = subprocess.run(["openssl", "x509", "-in", live + "/fullchain.pem", "-noout",
                          "-enddate"], check=True, capture_output=True, text=True).stdout
    not_after = int(time.mktime(time.strptime(end.strip().split("=", 1)[1],
                                              "%b %d %H:%M:%S %Y GMT")) - time.timezone)
    srv = gatling({"f.txt": "f\n"}, args=acme_args(state, "-e", "0", "-S"))
    lines = metric_lines(srv.port)
    assert 'gatling_tls_certificate_expiry_seconds{name="%s"} %d' % (NAME, not_after) in lines
    # the client (the CA at a closed port) writes its status after each round
    status_file = os.path.join(state, "challenges", "status")
    wait_for(lambda: os.path.exists(status_file), 20, "the client's status file")

    def numbers():
        """The status file's numbers as /metrics should show them, and /metrics',
        with the file unchanged across the fetch (the client may write anew)."""
        for _ in range(20):
            before = open(status_file).read()
            lines = metric_lines(srv.port)
            if open(status_file).read() == before:
                return before, lines
        raise AssertionError("the status file kept changing")
    text, lines = numbers()
    want = []
    for l in text.splitlines():
        w = l.split()
        if w[0] in ("orders", "failures"):
            want.append("gatling_acme_%s_total %s" % (w[0], w[1]))
        else:
            assert w[0] == "cert" and w[1] == NAME, text
            want.append('gatling_acme_next_renewal_seconds{name="%s"} %s' % (NAME, w[3]))
            want.append('gatling_acme_name_failures{name="%s"} %s' % (NAME, w[4]))
    assert len(want) == 4, text
    for w in want:
        assert w in lines, (w, text, lines)
    status, _, body = get(srv.port, "/server-status?json", host="127.0.0.1")
    assert b'"acme_orders":' in body and b'"tls_certificate_expiry_first":%d' % not_after in body
    with open(os.path.join(state, ".status.bad"), "w") as f:
        f.write("orders 8\nfailures two\n")
    os.rename(os.path.join(state, ".status.bad"), status_file)
    lines = metric_lines(srv.port)
    if open(status_file).read() == "orders 8\nfailures two\n":  # not yet rewritten
        assert not [l for l in lines if l.startswith("gatling_acme_orders")], lines
    assert any(l.startswith("gatling_tls_certificate_expiry_seconds") for l in lines)


def self_signed(directory, name, days=5):
    """NAME/fullchain.pem and privkey.pem, as the client lands them."""
    os.makedirs(directory, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", directory + "/privkey.pem",
                    "-out", directory + "/fullchain.pem", "-days", str(days), "-subj",
                    "/CN=" + name, "-addext", "subjectAltName=DNS:" + name],
                   check=True, capture_output=True, timeout=30)


def https_get(port, sni, host, target="/f.txt"):
    """(status, headers) of one request over HTTPS (any certificate)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=sni) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                       % (target, host)).encode())
            data = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except ssl.SSLError:
                    break
                if not chunk:
                    break
                data += chunk
    lines = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    return int(lines[0].split()[1]), dict((k.lower(), v.strip()) for k, _, v in
                                          (l.partition(":") for l in lines[1:]))


def test_first_certificate_turns_redirect_on(gatling, tmp_path):
    """No certificate at start: HTTP serves the name and -X does not redirect
    it.  Once the client lands one (here by hand) and SIGUSR1 arrives, -X
    sends that name to HTTPS, and -x's Strict-Transport-Security goes with
    it; a name no certificate names is still served over HTTP, and gets no
    HSTS over HTTPS."""
    state = state_dir(tmp_path)
    srv = gatling({"f.txt": "f\n"}, args=acme_args(state, "-e", "0", "-X", "-x", "600"))
    port = https_port(srv)
    assert get(srv.port, "/f.txt")[0] == 200
    self_signed(os.path.join(state, "live", NAME), NAME)
    srv.send_signal(signal.SIGUSR1)
    wait_for(lambda: any("HTTPS answers now" in l for l in srv.errlog), 10, "the certificate")
    status, f, _ = get(srv.port, "/f.txt")
    assert status == 301 and f["location"] == "https://%s:%d/f.txt" % (NAME, port)
    status, f, _ = get(srv.port, "/f.txt", host="other.test")
    assert status == 200 and "location" not in f
    status, f = https_get(port, NAME, NAME)
    assert status == 200 and f.get("strict-transport-security") == "max-age=600"
    status, f = https_get(port, NAME, "other.test")
    assert status == 200 and "strict-transport-security" not in f


@pytest.mark.skipif(os.geteuid() != 0, reason="-u needs root")
def test_state_checked_as_the_user(build):
    """As root with -u: the state directory and the CA root are checked as
    the user the client runs as (a directory only root may cross: exit 1)."""
    import shutil
    import tempfile
    base = tempfile.mkdtemp(prefix="gatling-acme-")  # pytest's own is root's alone
    try:
        os.chmod(base, 0o755)
        closed = os.path.join(base, "closed")
        os.mkdir(closed, 0o700)
        rc, err = run(build, "-u", "nobody", "--acme", "a@gatling.test", "--acme-names", NAME,
                      "--acme-dir", closed + "/state")
        assert rc == 1 and "cannot be made or written by -u's user" in err, err
        with open(closed + "/ca.pem", "w") as f:
            f.write("not read\n")
        rc, err = run(build, "-u", "nobody", "--acme", "a@gatling.test", "--acme-names", NAME,
                      "--acme-dir", base + "/state", "--acme-ca-root", closed + "/ca.pem")
        assert rc == 1 and "--acme-ca-root" in err and "-u's user" in err, err
        # the start stopped at the CA root: gatling made STATE, but hands it
        # over only once the checks passed (issue 63); an empty STATE of
        # root's is gatling's, handed over by the next start that goes on
        assert os.stat(base + "/state").st_uid == 0
    finally:
        shutil.rmtree(base)
