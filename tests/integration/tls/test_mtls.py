"""Mutual TLS per certificate (issue 66, item 2): a -C certificate's client-ca,
client-crl and client-verify files (and --tls-client-*), with curl --cert and
openssl s_client as the clients, over HTTP/1.1 and HTTP/2, and aioquic over
HTTP/3 (no Alt-Svc advertised there): required, optional and absent
certificates, expired, revoked (CRL) and from another CA; what a CGI script, a proxied backend and the JSON access log
are told (SSL_CLIENT_*, X-SSL-Client-*, the client's forged ones removed); no
session resumed across contexts; the cache never shares a client's answer."""
import json
import os
import signal
import shutil
import subprocess

import pytest

from conftest import (H3Client, Mode, Symlink, client_pki, https_port, import_h2, make_docroot,
                      running_server, skip_without_h3, wait_for)
from appservers import listener, read_head, serve
from test_tls import MKCERT, leaf, run, s_client, status

pytestmark = pytest.mark.skipif(not shutil.which("openssl") or not shutil.which("curl"),
                                reason="needs openssl and curl")

ENV_SH = ("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
          "env | grep 'SSL_CLIENT_' | sort\necho end\n")
REFUSED_NONE = "No required SSL certificate was sent"
REFUSED_BAD = "The SSL certificate error"
WHO = ("alice", "expired", "revoked", "stranger", None)


@pytest.fixture(scope="module")
def mpki(tmp_path_factory):
    """The server CA and certs/ (dist/mkcert.sh: server.pem for localhost, no
    client certificates asked), mtls.test/ (required, with the CRL) and
    opt.test/ (optional, no CRL), and the client PKI (client_pki)."""
    d = str(tmp_path_factory.mktemp("mpki"))
    run(["sh", MKCERT, d])
    cl = client_pki(d)
    certs = d + "/certs"
    for name in ("mtls.test", "opt.test"):
        os.makedirs(certs + "/" + name)
        leaf(d, certs + "/%s/fullchain.pem" % name, certs + "/%s/privkey.pem" % name, name,
             [name])
        shutil.copy(cl + "/ca.pem", certs + "/%s/client-ca.pem" % name)
    shutil.copy(cl + "/crl.pem", certs + "/mtls.test/client-crl.pem")
    with open(certs + "/opt.test/client-verify", "w") as f:
        f.write("optional depth=2\n")
    return d


def tree():
    return {"f.txt": "hello\n", ".proxy": "", "cgi": {"env.sh": Mode(ENV_SH, 0o755)}}


def args(mpki, *more):
    return ("-T", "10", "-C", mpki + "/certs", "-e", "0", "-S", "-w", r"\.sh$",
            "--log-format", "json") + tuple(more)


def curl(mpki, port, name, who, path="/cgi/env.sh", proto="--http1.1", *extra):
    """curl with who's certificate (None: none): (status, body, http_version)."""
    cert = ["--cert", mpki + "/client/%s.pem" % who] if who else []
    r = subprocess.run(["curl", "-sS", proto, "--max-time", "10", "--cacert", mpki + "/ca.pem",
                        "--resolve", "%s:%d:127.0.0.1" % (name, port), "-D", "-",
                        "-w", "\n%{http_code} %{http_version}"] + cert + list(extra) +
                       ["https://%s:%d%s" % (name, port, path)],
                       capture_output=True, timeout=20)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode(errors="replace")
    body, code = out.rsplit("\n", 1)
    return int(code.split()[0]), body, code.split()[1]


def env_of(body):
    return dict(l.split("=", 1) for l in body.splitlines() if l.startswith("SSL_CLIENT_"))


def fingerprint(pem):
    r = run(["openssl", "x509", "-in", pem, "-noout", "-fingerprint", "-sha256"])
    return r.stdout.decode().strip().split("=", 1)[1].replace(":", "").lower()


def json_lines(srv, n):
    return [json.loads(l) for l in srv.wait_log(n)[-n:]]


@pytest.mark.parametrize("proto", ["--http1.1", "--http2"])
def test_required_site(gatling, mpki, proto):
    """mtls.test requires a certificate from the client CA: alice's passes and
    the CGI sees who she is (Apache's names); none, an expired one, a revoked
    one (the CRL) and one from another CA get nginx's 400 pages, over the
    HTTP/1.1 and HTTP/2 the handshake completed for; the JSON log says what
    each was."""
    srv = gatling(tree(), args=args(mpki))
    port = https_port(srv)
    got = {w: curl(mpki, port, "mtls.test", w, proto=proto) for w in WHO}
    code, body, ver = got["alice"]
    assert (code, ver) == (200, "2" if proto == "--http2" else "1.1"), got["alice"]
    env = env_of(body)
    assert env == {"SSL_CLIENT_VERIFY": "SUCCESS",
                   "SSL_CLIENT_S_DN": "CN=alice,O=gatling tests",
                   "SSL_CLIENT_I_DN": "CN=client CA,O=gatling tests",
                   "SSL_CLIENT_M_SERIAL": "1000",
                   "SSL_CLIENT_FINGERPRINT": fingerprint(mpki + "/client/alice.pem")}, body
    assert got[None][0] == 400 and REFUSED_NONE in got[None][1], got[None]
    for w in ("expired", "revoked", "stranger"):
        assert got[w][0] == 400 and REFUSED_BAD in got[w][1], (w, got[w])
        assert "end" not in got[w][1]  # the script never ran
    lines = json_lines(srv, 5)
    verdicts = [(o["status"], o["client_verify"], o["client_s_dn"]) for o in lines]
    assert verdicts == [
        (200, "SUCCESS", "CN=alice,O=gatling tests"),
        (400, "FAILED:certificate has expired", "CN=expired,O=gatling tests"),
        (400, "FAILED:certificate revoked", "CN=revoked,O=gatling tests"),
        (400, "FAILED:unable to verify the first certificate", "CN=alice,O=gatling tests"),
        (400, "NONE", None)], lines
    assert lines[0]["client_fingerprint"] == env["SSL_CLIENT_FINGERPRINT"]
    assert lines[0]["client_serial"] == "1000"
    assert status(srv)["tls_client_refused"] == 4
    assert "alt-svc" not in got["alice"][1].lower()  # HTTP/3 would carry no certificate


def test_optional_site(gatling, mpki):
    """opt.test (client-verify "optional"): every client is served, and the
    script is told what came: NONE, FAILED:reason, or SUCCESS with the names.
    No CRL there: the revoked certificate verifies."""
    srv = gatling(tree(), args=args(mpki))
    port = https_port(srv)
    env = {w: env_of(curl(mpki, port, "opt.test", w)[1]) for w in WHO}
    assert env[None] == {"SSL_CLIENT_VERIFY": "NONE"}
    assert env["alice"]["SSL_CLIENT_VERIFY"] == "SUCCESS"
    assert env["revoked"]["SSL_CLIENT_VERIFY"] == "SUCCESS"
    assert env["expired"]["SSL_CLIENT_VERIFY"] == "FAILED:certificate has expired"
    assert env["stranger"]["SSL_CLIENT_VERIFY"].startswith("FAILED:")
    assert env["stranger"]["SSL_CLIENT_S_DN"] == "CN=alice,O=gatling tests"
    assert status(srv)["tls_client_refused"] == 0


def test_what_the_handshake_asks(gatling, mpki):
    """openssl s_client: mtls.test's CertificateRequest names the client CA and a
    TLS 1.3 client sends its certificate in the handshake (no post-handshake
    auth offered, none needed); localhost's asks for none, and its script sees
    no SSL_CLIENT_* even for a client that has a certificate."""
    srv = gatling(tree(), args=args(mpki))
    port = https_port(srv)
    req = b"GET /cgi/env.sh HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
    for v in ("-tls1_3", "-tls1_2"):
        out = s_client(port, v, "-servername", "mtls.test", "-CAfile", mpki + "/ca.pem",
                       "-cert", mpki + "/client/alice.pem", "-ign_eof",
                       stdin=req % b"mtls.test")
        assert "Acceptable client certificate CA names" in out, out
        assert "CN = client CA" in out and "HTTP/1.1 200 OK" in out, out
        assert "SSL_CLIENT_S_DN=CN=alice,O=gatling tests" in out, out
        out = s_client(port, v, "-servername", "localhost", "-CAfile", mpki + "/ca.pem",
                       "-cert", mpki + "/client/alice.pem", "-ign_eof",
                       stdin=req % b"localhost")
        assert "No client certificate CA names sent" in out, out
        assert "HTTP/1.1 200 OK" in out and "SSL_CLIENT_" not in out, out


def test_no_session_crosses_contexts(gatling, mpki, tmp_path):
    """A session made where no certificate was asked (localhost), or where the
    trust differs (opt.test), is not resumed on mtls.test (each context that
    asks has a session ID context of its own, taken from SNI before the
    session is looked up); resumed where it was made, the identity stays."""
    srv = gatling(tree(), args=args(mpki))
    port = https_port(srv)
    ca = ("-CAfile", mpki + "/ca.pem")
    alice = ("-cert", mpki + "/client/alice.pem")
    for v in ("-tls1_3", "-tls1_2"):
        plain, opt = str(tmp_path / ("plain" + v)), str(tmp_path / ("opt" + v))
        s_client(port, v, "-servername", "localhost", *ca, ticket=plain)
        s_client(port, v, "-servername", "opt.test", *ca, *alice, ticket=opt)
        for sess, name, want in ((plain, "localhost", "Reused"), (plain, "mtls.test", "New"),
                                 (opt, "mtls.test", "New"), (opt, "opt.test", "Reused")):
            out = s_client(port, v, "-servername", name, *ca, "-sess_in", sess, "-ign_eof",
                           stdin=b"GET /cgi/env.sh HTTP/1.1\r\nHost: " + name.encode() +
                           b"\r\nConnection: close\r\n\r\n")
            assert out.count(want + ", TLSv1.") == 1, (v, name, want, out)
            if name == "opt.test":  # resumed: still alice
                assert "SSL_CLIENT_S_DN=CN=alice,O=gatling tests" in out, out
            if name == "mtls.test":  # a full handshake without a certificate: refused
                assert "400 Bad Request" in out and REFUSED_NONE in out, out


def h2_head_recorder(heads):
    """An h2c backend (python3-h2) that records each request's fields as
    "name: value" lines and answers 200."""
    from conftest import import_h2
    import_h2()
    import h2.config
    import h2.connection
    import h2.events

    def handle(c):
        with c:
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
            conn.initiate_connection()
            c.sendall(conn.data_to_send())
            while True:
                data = c.recv(65536)
                if not data:
                    return
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        heads.append("\r\n" + "\r\n".join(
                            "%s: %s" % (k.decode(), v.decode()) for k, v in ev.headers) + "\r\n")
                        conn.send_headers(ev.stream_id, [(":status", "200"),
                                                         ("content-length", "3")])
                        conn.send_data(ev.stream_id, b"ok\n", end_stream=True)
                c.sendall(conn.data_to_send())
    return handle


@pytest.mark.parametrize("via", ["h2c", "h1"])
def test_forged_identity_and_forwarding_never_reach_a_backend(gatling, mpki, via):
    """A backend behind -P gets X-SSL-Client-Verify, -S-DN, -I-DN, -Serial and
    -Fingerprint from the server, and never the client's own, on every site.
    Issue 76, 2: the same field policy whatever the backend's protocol.
    Through an h2c/ backend (as through HTTP/1.1), over HTTP/1.1 and HTTP/2
    clients: the client's X-SSL-Client-* (with '_' too), Client-Cert,
    X-Forwarded-Host and a field its Connection names are removed; the
    verified identity and gatling's forwarding fields added (Forwarded's
    element appended to the client's, as gatling.8 says)."""
    heads = []
    if via == "h2c":
        lst = serve(listener(), h2_head_recorder(heads), threaded=True)
        rule = "h2c/127.0.0.1/%d/^/app/" % lst.getsockname()[1]
    else:
        def handle(c):
            with c:
                h = read_head(c)
                if h:
                    heads.append(h.decode(errors="replace").lower())
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                              b"Connection: close\r\n\r\nok\n")
        lst = serve(listener(), handle, threaded=True)
        rule = "127.0.0.1/%d/^/app/" % lst.getsockname()[1]
    try:
        srv = gatling(tree(), args=args(mpki, "-P", rule), check_fds=False)  # pooled h2c
        port = https_port(srv)
        forged = ["-H", "X-SSL-Client-S-DN: CN=root-admin", "-H", "X_SSL_Client_Verify: SUCCESS",
                  "-H", "x-ssl-client-fingerprint: 00", "-H", "Client-Cert: :AAAA:",
                  "-H", "Forwarded: for=10.9.9.9;host=evil", "-H", "X-Forwarded-Host: evil",
                  "-H", "X-Secret: s3", "-H", "Connection: X-Secret"]
        for proto in ("--http1.1", "--http2"):
            assert curl(mpki, port, "mtls.test", "alice", "/app/x", proto, *forged)[0] == 200
            assert curl(mpki, port, "localhost", "alice", "/app/x", proto, *forged)[0] == 200
        wait_for(lambda: len(heads) == 4, 10, "four requests at the backend")
    finally:
        lst.close()
    for i, h in enumerate(heads):
        low = h.lower()
        assert "root-admin" not in low and "x_ssl" not in low and "client-cert:" not in low, h
        assert "fingerprint: 00\r" not in low and "x-forwarded-host: evil" not in low, h
        if i < 2:  # HTTP/1.1's Connection names it (curl sends no Connection over HTTP/2)
            assert "s3" not in low and "x-secret" not in low, h
        assert "\r\nx-forwarded-for: 127.0.0.1\r\n" in low, h
        assert "\r\nx-forwarded-proto: https\r\n" in low, h
        # RFC 7239: the client's list kept, the last element ours
        assert '\r\nforwarded: for=10.9.9.9;host=evil, for=127.0.0.1;proto=https;host="' in low, h
        if i % 2 == 0:  # mtls.test: alice, verified
            assert "\r\nx-ssl-client-verify: success\r\n" in low, h
            assert "\r\nx-ssl-client-s-dn: cn=alice,o=gatling tests\r\n" in low, h
            assert "\r\nx-ssl-client-i-dn: cn=client ca,o=gatling tests\r\n" in low, h
            assert "\r\nx-ssl-client-serial: 1000\r\n" in low, h
            assert "\r\nx-ssl-client-fingerprint: %s\r\n" % fingerprint(
                mpki + "/client/alice.pem") in low, h
            assert low.count("x-ssl-client-") == 5, h
        else:  # localhost asks for none: nothing to say, nothing forged passes
            assert "x-ssl-client-" not in low, h


def scgi_params(c, keep):
    """One SCGI request's parameters (the netstring), answered with those whose
    name keep(name) takes, one a line."""
    with c:
        data = b""
        while b":" not in data:
            data += c.recv(4096)
        n, rest = data.split(b":", 1)
        while len(rest) < int(n) + 1:
            rest += c.recv(65536)
        items = rest[:int(n)].split(b"\0")
        out = sorted(b"%s=%s" % kv for kv in zip(items[0::2], items[1::2]) if keep(kv[0]))
        c.sendall(b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"\n".join(out) +
                  b"\nend\n")


def scgi_env(c):
    """Those naming a client certificate."""
    scgi_params(c, lambda k: b"SSL_CLIENT" in k or b"CLIENT_CERT" in k)


def test_scgi_params_and_cgi_without_forgeries(gatling, mpki):
    """SCGI's parameters (FastCGI's are made by the same code) carry
    SSL_CLIENT_*; a client's X-SSL-Client-* and Client-Cert fields reach
    neither a backend's parameters nor a CGI script as HTTP_*."""
    lst = serve(listener(), scgi_env, threaded=True)
    forged = ("-H", "X-SSL-Client-S-DN: CN=mallory", "-H", "Client-Cert: :AAAA:")
    try:
        srv = gatling(tree(), args=args(mpki, "-P", "S/127.0.0.1/%d/^/scgi/" %
                                        lst.getsockname()[1]))
        port = https_port(srv)
        code, body, _ = curl(mpki, port, "mtls.test", "alice", "/scgi/x", "--http2", *forged)
    finally:
        lst.close()
    assert code == 200 and "mallory" not in body and "CLIENT_CERT" not in body, body
    assert "SSL_CLIENT_S_DN=CN=alice,O=gatling tests\n" in body, body
    assert "SSL_CLIENT_VERIFY=SUCCESS\n" in body, body
    assert "SSL_CLIENT_FINGERPRINT=%s\n" % fingerprint(mpki + "/client/alice.pem") in body
    code, body, _ = curl(mpki, port, "mtls.test", "alice", "/cgi/env.sh", "--http1.1", "-H",
                         "X-SSL-Client-Verify: FAILED:forged")
    assert code == 200 and "forged" not in body and "SSL_CLIENT_VERIFY=SUCCESS" in body, body


def scgi_http_vars(c):
    """The HTTP_* parameters."""
    scgi_params(c, lambda k: k.startswith(b"HTTP_"))


HTTP_SH = ("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
           "env | grep '^HTTP_' | sort\necho end\n")


@pytest.mark.parametrize("via", ["scgi", "cgi"])
def test_forwarding_fields_as_every_backend_gets_them(gatling, mpki, via):
    """Issue 76, 2 (one backend request): CGI's and SCGI's HTTP_* variables (FastCGI's
    are made by the same code) follow the HTTP backends' field policy: the client's
    X-Forwarded-Host, a field its Connection names and its X-SSL-Client-* are not
    passed; X_FORWARDED_FOR ends with the client's true address, X_FORWARDED_HOST and
    _PROTO are the server's, FORWARDED has the server's element appended.  (They passed
    as sent: an application trusting its proxy's X-Forwarded-* took the client's word.)"""
    lst = serve(listener(), scgi_http_vars, threaded=True)
    t = tree()
    t["cgi"]["http.sh"] = Mode(HTTP_SH, 0o755)
    forged = ("-H", "X-Forwarded-Host: evil", "-H", "X-Forwarded-Proto: gopher",
              "-H", "X-Forwarded-For: 6.6.6.6", "-H", "Forwarded: for=10.9.9.9;host=evil",
              "-H", "X-SSL-Client-S-DN: CN=mallory", "-H", "X-Secret: s3",
              "-H", "Connection: X-Secret", "-H", "X-Kept: yes")
    try:
        srv = gatling(t, args=args(mpki, "-P", "S/127.0.0.1/%d/^/scgi/" %
                                   lst.getsockname()[1]))
        port = https_port(srv)
        path = "/scgi/x" if via == "scgi" else "/cgi/http.sh"
        code, body, _ = curl(mpki, port, "mtls.test", "alice", path, "--http1.1", *forged)
    finally:
        lst.close()
    assert code == 200 and body.rstrip().endswith("end"), body
    env = dict(l.split("=", 1) for l in body.splitlines() if l.startswith("HTTP_"))
    host = "mtls.test:%d" % port
    assert env.get("HTTP_X_KEPT") == "yes", env  # an ordinary field passes
    assert "HTTP_X_SECRET" not in env and "HTTP_X_SSL_CLIENT_S_DN" not in env, env
    assert env["HTTP_X_FORWARDED_HOST"] == host and env["HTTP_X_FORWARDED_PROTO"] == "https", env
    assert env["HTTP_X_FORWARDED_FOR"] == "6.6.6.6, 127.0.0.1", env
    assert env["HTTP_FORWARDED"] == 'for=10.9.9.9;host=evil, for=127.0.0.1;proto=https;' \
        'host="%s"' % host, env
    assert "mallory" not in body and "=evil\n" not in body + "\n", body


def test_cache_never_shares_an_identity(gatling, mpki):
    """.cache in front of a backend whose answers are cacheable: on opt.test
    the anonymous requests share one stored answer, but a request with a
    certificate goes to the backend every time (an identity, as
    Authorization), so alice never gets bob's answer nor the anonymous one."""
    hits = []

    def handle(c):
        with c:
            h = read_head(c)
            if h:
                who = [l.split(":", 1)[1].strip() for l in h.decode().split("\r\n")
                       if l.lower().startswith("x-ssl-client-s-dn:")]
                hits.append(who[0] if who else "-")
                body = ("for %s\n" % (who[0] if who else "nobody")).encode()
                c.sendall(b"HTTP/1.1 200 OK\r\nCache-Control: public, max-age=60\r\n"
                          b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                          % (len(body), body))

    lst = serve(listener(), handle, threaded=True)
    try:
        t = tree()
        t[".cache"] = ""  # HTTP's rules: the backend's public, max-age=60
        srv = gatling(t, args=args(mpki, "-P", "127.0.0.1/%d/^/app/" % lst.getsockname()[1]))
        port = https_port(srv)
        seq = [None, None, "alice", "bob", "alice", None]
        bodies = [curl(mpki, port, "opt.test", w, "/app/x")[1] for w in seq]
    finally:
        lst.close()
    ends = [b.rsplit("\r\n\r\n", 1)[-1] for b in bodies]
    assert ends == ["for nobody\n", "for nobody\n", "for CN=alice,O=gatling tests\n",
                    "for CN=bob,O=gatling tests\n", "for CN=alice,O=gatling tests\n",
                    "for nobody\n"], bodies
    assert hits == ["-", "CN=alice,O=gatling tests", "CN=bob,O=gatling tests",
                    "CN=alice,O=gatling tests"], hits


def test_default_ca_option_and_reload(gatling, mpki, tmp_path):
    """--tls-client-ca (and -crl) for the certificates without their own files
    (server.pem's localhost here): required by default; a CRL beside a
    certificate is read again with it, so a newly revoked client is refused
    after SIGUSR1 (the certificates' reload)."""
    cl = mpki + "/client"
    srv = gatling(tree(), args=args(mpki, "--tls-client-ca", cl + "/ca.pem"))
    port = https_port(srv)
    assert curl(mpki, port, "localhost", None)[0] == 400
    assert curl(mpki, port, "localhost", "alice")[0] == 200
    assert curl(mpki, port, "mtls.test", "bob")[0] == 200
    # revoke bob in a copy of the CA's database, into mtls.test's client-crl.pem
    work = str(tmp_path / "ca")
    shutil.copytree(cl, work)
    cnf = open(work + "/ca.cnf").read().replace(cl, work)
    open(work + "/ca.cnf", "w").write(cnf)
    run(["openssl", "ca", "-config", work + "/ca.cnf", "-revoke", work + "/bob.crt"])
    crl = mpki + "/certs/mtls.test/client-crl.pem"
    saved = open(crl).read()
    try:
        run(["openssl", "ca", "-config", work + "/ca.cnf", "-gencrl", "-out", crl])
        srv.send_signal(signal.SIGUSR1)
        wait_for(lambda: curl(mpki, port, "mtls.test", "bob")[0] == 400, 10,
                 "bob refused after the reload")
    finally:
        open(crl, "w").write(saved)
    assert curl(mpki, port, "mtls.test", "alice")[0] == 200


@pytest.mark.parametrize("files, option, says", [
    ({"client-ca.pem": "CA", "client-verify": "sometimes\n"}, (),
     "mtls.test/client-verify: not \"required\" or \"optional\""),
    ({"client-ca.pem": "CA", "client-verify": "optional depth=99\n"}, (),
     "mtls.test/client-verify: not"),
    ({"client-ca.pem": "not a certificate\n"}, (), "mtls.test/client-ca.pem: no CA certificate"),
    ({"client-ca.pem": "CA", "client-crl.pem": "nothing\n"}, (),
     "mtls.test/client-ca.pem: no CRL"),
    ({"client-crl.pem": "x"}, (), "mtls.test/client-crl.pem: needs a client-ca file beside it"),
    ({"client-verify": "optional\n"}, (), "mtls.test/client-verify: needs a client-ca file"),
    ({}, ("--tls-client-crl", "/etc/hostname"),
     "--tls-client-crl /etc/hostname: without --tls-client-ca"),
    ({}, ("--tls-client-ca", "/nonexistent/ca.pem"), "/nonexistent/ca.pem: No such file"),
    ({}, ("--tls-client-ca", "/etc/hostname"), "--tls-client-ca /etc/hostname: no CA"),
    ({}, ("--tls-client-verify", "maybe"), "not required or optional"),
])
def test_bad_settings_refuse_the_start(build, mpki, tmp_path, files, option, says):
    """A client-ca, client-crl or client-verify file (or option) that is not
    what it should be stops the start (and --check), naming it and why."""
    certs = str(tmp_path / "certs")
    shutil.copytree(mpki + "/certs", certs)
    for f in ("client-ca.pem", "client-crl.pem", "client-verify"):
        os.unlink(certs + "/mtls.test/" + f) if os.path.exists(certs + "/mtls.test/" + f) \
            else None
    for f, text in files.items():
        with open(certs + "/mtls.test/" + f, "w") as fh:
            fh.write(open(mpki + "/client/ca.pem").read() if text == "CA" else text)
    r = subprocess.run([build.binary, "-p", "0", "-e", "0", "-C", certs, "--check"] +
                       list(option), capture_output=True, timeout=20, cwd=str(tmp_path))
    assert r.returncode != 0 and says in r.stderr.decode(), r


def test_http3_client_certificates(build, mpki, tmp_path):
    """QUIC's TLS (GnuTLS) asks for a certificate where the server name's
    certificate does, and the chain is verified by the same rules (CAs, CRL,
    depth) as over TCP: alice passes, none, a revoked one and one of another
    CA get the 400 pages; an optional site says NONE; a site that asks for
    nothing asks for nothing (aioquic as the client)."""
    skip_without_h3(build.binary)
    root = str(tmp_path / "www")
    make_docroot(root, tree())
    ca = open(mpki + "/ca.pem").read()
    with running_server(build, root, args(mpki)) as srv:
        port = https_port(srv)
        got = {}
        for name, who in (("mtls.test", "alice"), ("mtls.test", None), ("mtls.test", "revoked"),
                          ("mtls.test", "stranger"), ("opt.test", None), ("opt.test", "bob"),
                          ("localhost", "alice")):
            cert = mpki + "/client/%s.pem" % who if who else None
            c = H3Client(port, sni=name, cadata=ca, cert=cert)
            try:
                got[name, who] = c.request("/cgi/env.sh", host=name)
            finally:
                c.close()
        lines = json_lines(srv, 7)
    r = got["mtls.test", "alice"]
    assert r.status == 200, r
    assert b"SSL_CLIENT_S_DN=CN=alice,O=gatling tests\n" in r.body, r.body
    assert b"SSL_CLIENT_VERIFY=SUCCESS\n" in r.body, r.body
    assert ("SSL_CLIENT_FINGERPRINT=%s\n" % fingerprint(mpki + "/client/alice.pem")).encode() \
        in r.body, r.body
    assert got["mtls.test", None].status == 400 and REFUSED_NONE.encode() in \
        got["mtls.test", None].body
    for who in ("revoked", "stranger"):
        assert got["mtls.test", who].status == 400, got["mtls.test", who]
        assert REFUSED_BAD.encode() in got["mtls.test", who].body
    assert b"SSL_CLIENT_VERIFY=NONE" in got["opt.test", None].body
    assert b"SSL_CLIENT_S_DN=CN=bob,O=gatling tests" in got["opt.test", "bob"].body
    assert b"SSL_CLIENT_" not in got["localhost", "alice"].body
    assert [(o["protocol"], o["client_verify"]) for o in lines] == [
        ("h3", "SUCCESS"), ("h3", "NONE"), ("h3", "FAILED:certificate revoked"),
        ("h3", lines[3]["client_verify"]), ("h3", "NONE"), ("h3", "SUCCESS"), ("h3", None)], lines
    assert lines[3]["client_verify"].startswith("FAILED:"), lines


def test_no_alt_svc_where_certificates_are_asked(gatling, mpki):
    """HTTPS responses of a site that asks for client certificates advertise no
    HTTP/3 (browsers differ in offering one over QUIC); the others do."""
    srv = gatling(tree(), args=args(mpki))
    port = https_port(srv)
    assert curl(mpki, port, "localhost", None, "/f.txt")[1].lower().count("alt-svc") == 1
    assert "alt-svc" not in curl(mpki, port, "opt.test", None, "/f.txt")[1].lower()
    assert "alt-svc" not in curl(mpki, port, "mtls.test", "alice", "/f.txt")[1].lower()


def tls_sock(mpki, port, sni, who=None, alpn=None):
    """A TLS connection to gatling with SNI sni and who's certificate."""
    import socket
    import ssl
    ctx = ssl.create_default_context(cafile=mpki + "/ca.pem")
    if who:
        ctx.load_cert_chain(mpki + "/client/%s.pem" % who)
    if alpn:
        ctx.set_alpn_protocols([alpn])
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(s, server_hostname=sni)


def h1_exchange(s, target, host, close=False):
    """One HTTP/1.1 request on s: the status and the body (to the end of
    its Content-Length, or with close to the connection's end)."""
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (
        target.encode(), host.encode(), b"Connection: close\r\n" if close else b""))
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(65536)
        assert d, got
        got += d
    head, rest = got.split(b"\r\n\r\n", 1)
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
              if l.lower().startswith(b"content-length:")]
    while (length and len(rest) < length[0]) or close:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    return int(head.split()[1]), rest


@pytest.mark.parametrize("sni, who", [("localhost", None), ("opt.test", "alice")],
                         ids=["no-certificate", "another-sites-context"])
def test_absolute_form_target_never_reaches_an_mtls_site(gatling, mpki, sni, who):
    """Issue 76, 1: a connection set up for another site (no certificate, or
    alice's for opt.test) that names mtls.test in an absolute-form target
    with a Host of its own site gets 421 (the target's authority is the
    request's, RFC 9112 3.2.2), on a fresh connection and after a request
    its site answered; neither the CGI nor a file of mtls.test is served."""
    srv = gatling(tree(), args=args(mpki))
    port = https_port(srv)
    for reuse in (False, True):
        with tls_sock(mpki, port, sni, who) as s:
            if reuse:
                code, _ = h1_exchange(s, "/f.txt", "%s:%d" % (sni, port))
                assert code == 200
            for path in ("/cgi/env.sh", "/f.txt"):
                code, body = h1_exchange(s, "https://mtls.test:%d%s" % (port, path),
                                         "%s:%d" % (sni, port))
                assert code == 421 and b"SSL_CLIENT" not in body and b"hello" not in body, \
                    (code, body)
    # the absolute form for its own site is served, Host notwithstanding
    with tls_sock(mpki, port, "mtls.test", "alice") as s:
        code, body = h1_exchange(s, "https://mtls.test:%d/cgi/env.sh" % port, "elsewhere",
                                 close=True)
        assert code == 200 and b"SSL_CLIENT_VERIFY=SUCCESS" in body, body


def test_absolute_path_over_http2_is_malformed(gatling, mpki):
    """Issue 76, 1 over HTTP/2: a :path that is a URI naming mtls.test, from
    a connection without a certificate, is a malformed request (RFC 9113
    8.3.1), never served; the connection goes on."""
    from conftest import import_h2
    import_h2()
    import h2.config
    import h2.connection
    import h2.events
    srv = gatling(tree(), args=args(mpki))
    port = https_port(srv)
    with tls_sock(mpki, port, "localhost", None, "h2") as s:
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                 validate_outbound_headers=False))
        c.initiate_connection()
        bad = c.get_next_available_stream_id()
        c.send_headers(bad, [(":method", "GET"), (":scheme", "https"),
                             (":authority", "localhost:%d" % port),
                             (":path", "https://mtls.test:%d/cgi/env.sh" % port)], end_stream=True)
        good = bad + 2
        c.send_headers(good, [(":method", "GET"), (":scheme", "https"),
                              (":authority", "localhost:%d" % port), (":path", "/f.txt")],
                       end_stream=True)
        s.sendall(c.data_to_send())
        got, ended, body = {}, set(), b""
        while not {bad, good} <= ended:
            d = s.recv(65536)
            assert d, (got, ended)
            for ev in c.receive_data(d):
                if isinstance(ev, h2.events.ResponseReceived):
                    got[ev.stream_id] = dict(ev.headers)[b":status"]
                elif isinstance(ev, h2.events.DataReceived):
                    body += ev.data if ev.stream_id == bad else b""
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    ended.add(ev.stream_id)
            s.sendall(c.data_to_send())
    assert got.get(bad) in (None, b"400") and b"SSL_CLIENT" not in body, (got, body)
    assert got[good] == b"200", got


def h2_gets(s, port, hosts):
    """GET /f.txt on one HTTP/2 connection s, once per :authority of hosts in
    turn: [(status, body)]."""
    import_h2()
    import h2.config
    import h2.connection
    import h2.events
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    out = []
    for host in hosts:
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":path", "/f.txt"),
                             (":authority", "%s:%d" % (host, port))], end_stream=True)
        s.sendall(c.data_to_send())
        status, body, done = None, b"", False
        while not done:
            d = s.recv(65536)
            assert d, out
            for ev in c.receive_data(d):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    status = int(dict(ev.headers)[b":status"])
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    body += ev.data
                    c.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    done = True
            s.sendall(c.data_to_send())
        out.append((status, body))
    return out


@pytest.mark.parametrize("proto", ["--http1.1", "--http2"])
def test_second_name_of_an_mtls_site(gatling, mpki, proto):
    """Issue 92, 2: alias.test -> mtls.test (a symbolic link, gatling.8's
    way to give a site a second name), mtls.test requiring client
    certificates and no certificate naming alias.test: the demand follows the
    directory served, not the name.  Without a certificate, by SNI alias.test
    or localhost, over HTTP/1.1 and HTTP/2 (also on the connection that just
    got 421 for mtls.test), and by SNI mtls.test: 421, never mtls.test's
    files; alice's certificate by mtls.test's name is served.
    The root's other names are not mtls.test's and are served as before."""
    t = {"mtls.test": {"f.txt": "secret\n"}, "alias.test": Symlink("mtls.test"),
         "other.test": {"f.txt": "other\n"}, "f.txt": "public\n"}
    srv = gatling(t, args=args(mpki))
    port = https_port(srv)
    code, body, _ = curl(mpki, port, "alias.test", None, "/f.txt", proto, "-k")
    assert code == 421 and "secret" not in body, (code, body)
    code, body, _ = curl(mpki, port, "alias.test", "alice", "/f.txt", proto, "-k")
    assert code == 421 and "secret" not in body, (code, body)
    code, body, _ = curl(mpki, port, "mtls.test", "alice", "/f.txt", proto)
    assert code == 200 and body.endswith("secret\n"), (code, body)
    code, body, _ = curl(mpki, port, "other.test", None, "/f.txt", proto, "-k")
    assert code == 200 and body.endswith("other\n"), (code, body)
    if proto == "--http1.1":
        with tls_sock(mpki, port, "localhost") as s:
            assert h1_exchange(s, "/f.txt", "mtls.test:%d" % port)[0] == 421
            code, body = h1_exchange(s, "/f.txt", "Alias.Test.:%d" % port)
            assert code == 421 and b"secret" not in body, (code, body)
        with tls_sock(mpki, port, "mtls.test") as s:
            code, body = h1_exchange(s, "/f.txt", "alias.test:%d" % port, close=True)
            assert code == 421 and b"secret" not in body, (code, body)
    else:
        with tls_sock(mpki, port, "localhost", alpn="h2") as s:
            got = h2_gets(s, port, ["mtls.test", "alias.test", "localhost"])
        assert [g[0] for g in got] == [421, 421, 200] and got[2][1] == b"public\n", got
        with tls_sock(mpki, port, "mtls.test", alpn="h2") as s:
            got = h2_gets(s, port, ["alias.test"])
        assert got[0][0] == 421 and b"secret" not in got[0][1], got


def test_check_names_a_second_name_of_an_mtls_site(build, mpki, tmp_path):
    """Issue 92, 2: --check says which root entry is another name of a site
    whose certificate asks for client certificates (and not the site's own
    port directory, nor an unrelated site)."""
    root = tmp_path / "www"
    make_docroot(str(root), {"mtls.test": {"f.txt": "secret\n"}, "mtls.test:8443":
                             Symlink("mtls.test"), "alias.test": Symlink("mtls.test"),
                             "other.test": {"f.txt": "other\n"}})
    r = subprocess.run([build.binary, "-p", "0", "-e", "0", "-C", mpki + "/certs", "-c",
                        str(root), "--check"], capture_output=True, timeout=20)
    err = r.stderr.decode()
    lines = [l for l in err.splitlines() if "another name of" in l]
    assert len(lines) == 1 and lines[0].startswith(
        "gatling: warning: HTTPS: alias.test is another name of mtls.test's site directory"), err


def test_second_name_of_an_mtls_site_over_http3(build, mpki, tmp_path):
    """Issue 92, 2 over HTTP/3: alias.test -> mtls.test, no certificate:
    421 (by SNI localhost: aioquic checks the server's name), never
    mtls.test's files; localhost's own files are served."""
    skip_without_h3(build.binary)
    root = str(tmp_path / "www")
    make_docroot(root, {"mtls.test": {"f.txt": "secret\n"}, "alias.test": Symlink("mtls.test"),
                        "f.txt": "public\n"})
    ca = open(mpki + "/ca.pem").read()
    with running_server(build, root, args(mpki)) as srv:
        port = https_port(srv)
        got = []
        for sni, host in (("localhost", "alias.test"), ("localhost", "Alias.Test."),
                          ("localhost", "localhost")):
            c = H3Client(port, sni=sni, cadata=ca)
            try:
                got.append(c.request("/f.txt", host="%s:%d" % (host, port)))
            finally:
                c.close()
    assert [r.status for r in got] == [421, 421, 200], got
    assert not any(b"secret" in r.body for r in got) and got[2].body == b"public\n", got
