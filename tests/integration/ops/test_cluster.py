"""--cluster (issue 57): gatling nodes that share TLS ticket keys and cache
purges through a real etcd (Debian's etcd-server 3.4, started here on ports
of its own, reached over its v3 JSON gateway as gatling does).  Shown with
the real binary: a TLS session saved on node 1 resumes on node 2 (and not on
a node outside the cluster), also after the cluster's master rotated; a
PURGE on one node empties the other's cache within a second; a node started
while etcd is down serves at once and joins once etcd answers; a tickets key
that gatling did not write is refused with a clear error and not used; bad
options are refused.  The cluster's trust (issue 63): every value is sealed
with the suite's secret= (seal/put_sealed here do as a node does); a forged
ticket secret, challenge, certificate (also sealed: self-signed, another
name, dated 2090) is refused with a line naming its key, and so is what a
fake etcd (FakeEtcd: the v3 JSON gateway's shape) answers; plain http to
another host needs insecure; a PURGE made while a side process is down
arrives once it is started again.  Skipped, saying so, where etcd or
openssl is absent."""
import atexit
import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import Mode, fetch, https_port, wait_for
from harness.waits import free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MKCERT = os.path.join(ROOT, "dist", "mkcert.sh")
ETCD = shutil.which("etcd")

pytestmark = [
    pytest.mark.skipif(not ETCD, reason="needs etcd (Debian's etcd-server: tests/setup.sh)"),
    pytest.mark.skipif(not shutil.which("openssl") or not shutil.which("curl"),
                       reason="needs openssl and curl"),
]


def _secret():
    """The suite's cluster secret (secret=FILE): 0600 in a directory of its
    own, removed at exit."""
    d = tempfile.mkdtemp(prefix="gatling-secret-")
    path = os.path.join(d, "secret")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("6f1c0d2e8a9b4c3d5e7f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5\n")
    atexit.register(shutil.rmtree, d, True)
    return path


SECRET = _secret()


def seal(key, value, secret=SECRET):
    """value (str or bytes) as gatling puts it at key: AES-256-GCM under
    SHA-256 of the secret file, the key as associated data."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    k = hashlib.sha256(open(secret, "rb").read()).digest()
    nonce = os.urandom(12)
    value = value.encode() if isinstance(value, str) else value
    return b"gatling-sealed-1 " + nonce + AESGCM(k).encrypt(nonce, value, key.encode())


def unseal(key, blob, secret=SECRET):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    k = hashlib.sha256(open(secret, "rb").read()).digest()
    assert blob.startswith(b"gatling-sealed-1 "), blob[:40]
    return AESGCM(k).decrypt(blob[17:29], blob[29:], key.encode()).decode()


def with_secret(url):
    """--cluster's list with the suite's secret=."""
    return url + ",secret=" + SECRET


class Etcd:
    """One etcd member on loopback ports of its own (with cluster, its
    peers' "mN=URL,..."); stopped at the end.  host: a network lab's host
    (bench/benchkit/netlab.py) where it runs and is asked, on the host's
    address and etcd's ports."""

    def __init__(self, base, port=None, name="m1", peer=None, cluster=None, host=None):
        self.base = base
        self.name = name
        self.host = host
        self.addr = host.addrs[0] if host else "127.0.0.1"
        self.port = port or (2379 if host else free_port())
        self.peer = peer or (2380 if host else free_port())
        self.cluster = cluster
        self.url = "http://%s:%d" % (self.addr, self.port)
        self.proc = None

    def inside(self):
        return self.host.inside() if self.host else contextlib.nullcontext()

    def start(self, wait=True):
        # its data in memory where there is /dev/shm: etcd fsyncs every write, and a
        # loaded disk must not decide whether a purge arrives within a second
        # (kept across a stop and a start: the member comes back with its data)
        if getattr(self, "shm", None):
            d = self.shm
        elif os.access("/dev/shm", os.W_OK):
            self.shm = d = tempfile.mkdtemp(prefix="gatling-etcd-", dir="/dev/shm")
        else:
            d = os.path.join(self.base, "etcd-" + self.name)
        u = "http://%s:%d" % (self.addr, self.peer)
        self.log = open(os.path.join(self.base, "etcd-%s.log" % self.name), "ab")
        with self.inside():
            self.proc = subprocess.Popen(
                [ETCD, "--data-dir", d, "--name", self.name, "--listen-client-urls", self.url,
                 "--advertise-client-urls", self.url, "--listen-peer-urls", u,
                 "--initial-advertise-peer-urls", u,
                 "--initial-cluster", self.cluster or "%s=%s" % (self.name, u)],
                stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            # an etcd that died (a port another process took between free_port and its
            # bind) is said at once with its log; a live one gets 60 s: at a load of 30
            # one took more than 20 s to answer its first request (make check-all)
            def answering():
                if self.proc.poll() is not None:
                    self.log.flush()
                    with open(self.log.name, "rb") as f:
                        tail = f.read()[-1500:].decode(errors="replace")
                    raise AssertionError("etcd on %s exited (%s):\n%s"
                                         % (self.url, self.proc.returncode, tail))
                return self.call("/v3/kv/range", {"key": b64("x")}) is not None
            wait_for(answering, timeout=60, what="etcd answering on %s" % self.url)
        return self

    def call(self, path, req):
        try:
            with self.inside():
                r = urllib.request.urlopen(urllib.request.Request(
                    self.url + path, data=json.dumps(req).encode(), method="POST"), timeout=3)
                return json.loads(r.read())
        except OSError:
            return None

    def get_raw(self, key):
        r = self.call("/v3/kv/range", {"key": b64(key)})
        kvs = (r or {}).get("kvs", [])
        return base64.b64decode(kvs[0].get("value", "")) if kvs else None

    def get(self, key):
        """key's value, opened with the suite's secret (as gatling sealed it)."""
        v = self.get_raw(key)
        return None if v is None else unseal(key, v)

    def put(self, key, value):
        """value at key as is: not sealed, so a node takes it for forged."""
        assert self.call("/v3/kv/put", {"key": b64(key), "value": b64(value)}) is not None

    def put_sealed(self, key, value, secret=SECRET):
        """value at key as a node with secret puts it."""
        v = base64.b64encode(seal(key, value, secret)).decode()
        assert self.call("/v3/kv/put", {"key": b64(key), "value": v}) is not None

    def stop(self, keep=False):
        """Stopped; its data removed unless keep (to start it again)."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.proc:
            self.log.close()
        if getattr(self, "shm", None) and not keep:
            shutil.rmtree(self.shm, ignore_errors=True)
            self.shm = None


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


@pytest.fixture
def etcd(tmp_path):
    e = Etcd(str(tmp_path)).start()
    yield e
    e.stop()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pki"))
    subprocess.run(["sh", MKCERT, d], check=True, capture_output=True, timeout=60)
    return d + "/certs"


def node(gatling, certs, etcd_url, name, *more, tree=None, env=None):
    args = ("-T", "10", "-C", certs, "-e", "0", "--cluster", "etcd=" + with_secret(etcd_url),
            "--cluster-name", name) + more
    return gatling(tree or {"f.txt": "hello\n"}, args=args, env=env, check_fds=False)


def generation(srv, at_least=1):
    """Wait until the node's side process has the cluster's ticket keys."""
    def have():
        gens = [int(l.split("generation ")[1].split()[0]) for l in srv.errlog
                if "ticket keys: generation" in l]
        return gens and max(gens) >= at_least
    wait_for(have, timeout=15, what="ticket keys of generation %d: %s" % (at_least, srv.errlog))


def s_client(port, sess_out=None, sess_in=None, version="-tls1_3", addr="127.0.0.1",
             name="localhost"):
    """A handshake; with sess_out, stdin stays open until the ticket came."""
    cmd = ["openssl", "s_client", "-connect", "%s:%d" % (addr, port), "-servername",
           name, version]
    cmd += ["-sess_out", sess_out] if sess_out else []
    cmd += ["-sess_in", sess_in] if sess_in else []
    if sess_out and os.path.exists(sess_out):
        os.unlink(sess_out)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    end = time.monotonic() + 10
    while sess_out and not os.path.exists(sess_out) and p.poll() is None \
            and time.monotonic() < end:
        time.sleep(0.02)
    out, _ = p.communicate(b"", timeout=15)
    return out.decode(errors="replace")


def reused(out):
    assert "New, TLS" in out or "Reused, TLS" in out, out
    return "Reused, TLS" in out


@pytest.mark.parametrize("version", ["-tls1_3", "-tls1_2"])
def test_session_resumes_on_another_node(gatling, etcd, certs, tmp_path, version):
    """A session from node 1 resumes on node 2 (the same cluster's ticket
    keys; node 2 with two -W workers, which read the shared page both), not
    on a node with the same certificate outside the cluster."""
    n1 = node(gatling, certs, etcd.url, "c1")
    n2 = node(gatling, certs, etcd.url, "c1", "-W", "2")
    alone = gatling({"f.txt": "x\n"}, args=("-T", "10", "-C", certs, "-e", "0"))
    generation(n1), generation(n2)
    sess = str(tmp_path / "sess")
    assert not reused(s_client(https_port(n1), sess_out=sess, version=version))
    for _ in range(4):  # the kernel spreads these over both workers
        assert reused(s_client(https_port(n2), sess_in=sess, version=version))
    assert reused(s_client(https_port(n1), sess_in=sess, version=version))
    assert not reused(s_client(https_port(alone), sess_in=sess, version=version))
    made = [l for l in n1.errlog + n2.errlog if "made here" in l]
    assert len(made) == 1, "one node made the keys: %s" % made
    assert etcd.get("/gatling/c1/tickets").startswith("gatling-tickets-1 1 ")


def test_rotation_keeps_the_previous_key(gatling, etcd, certs, tmp_path):
    """GATLING_TEST_CLUSTER_ROTATE=4: the master rotates every 4 s, once per
    cluster; a session made before a rotation still resumes on the other node
    (the previous master decrypts), and one made after it too."""
    env = {"GATLING_TEST_CLUSTER_ROTATE": "4"}
    n1 = node(gatling, certs, etcd.url, "rot", env=env)
    n2 = node(gatling, certs, etcd.url, "rot", env=env)
    generation(n1), generation(n2)
    sess = str(tmp_path / "sess")
    s_client(https_port(n1), sess_out=sess)
    v1 = etcd.get("/gatling/rot/tickets").split()[1]
    generation(n2, int(v1) + 1)
    assert reused(s_client(https_port(n2), sess_in=sess)), "the previous master decrypts"
    s_client(https_port(n2), sess_out=sess)
    generation(n1, int(v1) + 1)
    assert reused(s_client(https_port(n1), sess_in=sess))
    gens = etcd.get("/gatling/rot/tickets").split()[1]
    made = [l for l in n1.errlog + n2.errlog if "made here" in l]
    assert len(made) == int(gens), "one node per rotation: %s, %s" % (gens, made)


CGI = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nrequest %s\\n' $$\n"


def http(port, path, method="GET", addr="127.0.0.1"):
    # one Host for both nodes, as behind a balancer (the cache's key holds it)
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "-X", method, "-D", "-",
                        "-H", "Host: site.test",
                        "http://%s:%d%s" % (addr, port, path)], capture_output=True, timeout=20)
    out = r.stdout.decode(errors="replace")
    head, _, body = out.partition("\r\n\r\n")
    cs = [l.split(":", 1)[1].strip() for l in head.split("\r\n")
          if l.lower().startswith("cache-status:")]
    return (cs[0] if cs else ""), body


def test_purge_reaches_every_node(gatling, etcd, certs):
    """A page cached on both nodes; a PURGE on node 1 (from loopback: the
    cache's own rule) is a miss on node 2 within a second.  A PURGE that the
    cache refuses goes nowhere."""
    tree = {".cache": "ttl 60\n", "p.cgi": Mode(CGI, 0o755)}
    args = ("-S", "-w", "\\.cgi$")
    n1 = node(gatling, certs, etcd.url, "pg", *args, tree=tree)
    n2 = node(gatling, certs, etcd.url, "pg", *args, tree=tree)
    for n in (n1, n2):
        assert http(n.plain_port or n.port, "/p.cgi")[0] == "gatling; fwd=miss; stored"
        assert http(n.plain_port or n.port, "/p.cgi")[0] == "gatling; hit"
    generation(n1), generation(n2)  # both side processes talk to etcd by now
    p1, p2 = n1.plain_port or n1.port, n2.plain_port or n2.port
    t0 = time.monotonic()
    assert http(p1, "/p.cgi", "PURGE")[1] == "purged 1\n"
    wait_for(lambda: http(p2, "/p.cgi")[0] != "gatling; hit", timeout=1.0, step=0.05,
             what="node 2's entry purged within a second")
    took = time.monotonic() - t0
    assert http(p2, "/p.cgi")[0] == "gatling; hit", "stored again"
    assert took < 1.0, took
    print("PURGE on node 1 to a miss on node 2: %.2f s" % took)


def metrics(srv):
    r = subprocess.run(["curl", "-sS", "--max-time", "10",
                        "http://127.0.0.1:%d/metrics" % (srv.plain_port or srv.port)],
                       capture_output=True, timeout=20)
    return {l.split()[0]: int(l.split()[1]) for l in r.stdout.decode().splitlines()
            if l.startswith("gatling_cluster_")}


def test_etcd_down_at_start(gatling, certs, tmp_path):
    """etcd not there at start: the node serves HTTPS at once, says it
    tries again (its /metrics: never synced, no generation), and shares the
    cluster's keys once etcd answers (/metrics: synced now, generation 1)."""
    e = Etcd(str(tmp_path))
    n1 = node(gatling, certs, e.url, "late", "-S")
    t0 = time.monotonic()
    assert "New, TLS" in s_client(https_port(n1))
    assert time.monotonic() - t0 < 5, "a handshake does not wait on etcd"
    wait_for(lambda: any("tries again" in l for l in n1.errlog), timeout=10,
             what="the side process saying etcd is down")
    m = metrics(n1)
    assert m == {"gatling_cluster_last_sync_seconds": 0, "gatling_cluster_ticket_generation": 0}
    e.start()
    try:
        n2 = node(gatling, certs, e.url, "late")
        generation(n1), generation(n2)
        wait_for(lambda: any("answers again" in l for l in n1.errlog), timeout=10,
                 what="etcd back")
        sess = str(tmp_path / "sess")
        s_client(https_port(n2), sess_out=sess)
        assert reused(s_client(https_port(n1), sess_in=sess))
        m = metrics(n1)
        assert m["gatling_cluster_ticket_generation"] == 1, m
        assert abs(m["gatling_cluster_last_sync_seconds"] - time.time()) < 10, m
    finally:
        e.stop()


def test_hostile_tickets_key(gatling, etcd, certs, tmp_path):
    """A tickets key gatling did not write (a short master, junk; sealed
    with the cluster's secret): a clear error names the key, and its bytes
    are never used as a master."""
    etcd.put_sealed("/gatling/bad/tickets", "gatling-tickets-1 1 1700000000 abcd -")
    n1 = node(gatling, certs, etcd.url, "bad")
    n2 = node(gatling, certs, etcd.url, "bad")
    for n in (n1, n2):
        wait_for(lambda: any("holds no ticket keys gatling wrote" in l for l in n.errlog),
                 timeout=15, what="the error about the bad key")
    sess = str(tmp_path / "sess")
    s_client(https_port(n1), sess_out=sess)
    assert not reused(s_client(https_port(n2), sess_in=sess)), "each node keeps its own"
    assert etcd.get("/gatling/bad/tickets").endswith("abcd -"), "not overwritten"


@pytest.mark.parametrize("args,why", [
    (("--cluster", "http://127.0.0.1:2379"), "not etcd=URL"),
    (("--cluster", "etcd=ftp://x"), "not etcd=URL"),
    (("--cluster-name", "a/b", "--cluster", "etcd=http://127.0.0.1:1"), "--cluster-name a/b"),
    (("--cluster-name", "x"), "without --cluster"),
])
def test_bad_options(build, args, why):
    r = subprocess.run([build.binary, "-p", "0"] + list(args), capture_output=True, timeout=20)
    assert r.returncode == 2 and why in r.stderr.decode(), r


@pytest.mark.parametrize("items,why", [
    (",user=gatling", "user= and password-file= go together"),
    (",password-file=/nonexistent/pw", "/nonexistent/pw: No such file"),
    (",user=gatling,password-file=/dev/null", "/dev/null: not a regular file"),
])
def test_bad_auth_options(build, items, why):
    """user= and password-file= are checked at start: a clear error, no
    server (and never a password on the command line: there is no
    password=)."""
    r = subprocess.run([build.binary, "-p", "0", "--cluster",
                        "etcd=" + with_secret("http://127.0.0.1:1") + items],
                       capture_output=True, timeout=20)
    assert r.returncode != 0 and why in r.stderr.decode(), r


def cert_value(chain, key, serial="0a1b"):
    body = chain + key
    return "gatling-cert-1 %s %d %d\n" % (serial, len(chain), len(key)) + body


def follower(gatling, etcd, tmp_path, name, certs):
    """A node with --acme for localhost (its CA unreachable; --acme-ca-root
    the suite's PKI, which the cluster's certificates must chain to) in
    cluster name, whose lock another node's key holds: (server, -C,
    --acme-dir)."""
    c, st = str(tmp_path / "c"), str(tmp_path / "st")
    os.makedirs(c)
    srv = gatling({"f.txt": "hello\n"}, check_fds=False, args=(
        "-T", "10", "-S", "-C", c, "-e", "0", "--acme", "a@b.test", "--acme-ca",
        "https://127.0.0.1:1/dir", "--acme-ca-root", ca_of(certs), "--acme-dir", st,
        "--acme-names", "localhost", "--cluster", "etcd=" + with_secret(etcd.url),
        "--cluster-name", name))
    return srv, c, st


def ca_of(certs):
    """The suite PKI's root (dist/mkcert.sh's ca.pem beside certs/)."""
    return os.path.join(os.path.dirname(certs), "ca.pem")


def test_certificates_from_the_cluster(gatling, etcd, certs, tmp_path):
    """--acme with --cluster on a node that does not hold the cluster's ACME
    lock (another node's key holds it): hostile values under acme/ are said
    and never installed or served (a key that is not the certificate's, a
    name with a '/', a challenge outside its directory); the holder's
    certificate is installed into -C and served, its challenge answered."""
    pem = open(os.path.join(certs, "server.pem")).read()
    chain = pem[:pem.index("-----END CERTIFICATE-----") + 26]
    key = pem[pem.index("-----BEGIN", len(chain)):]
    other = subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                            "ec_paramgen_curve:P-256"], capture_output=True, check=True,
                           timeout=20).stdout.decode()
    serial = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=chain.encode(),
                            capture_output=True, check=True, timeout=20).stdout.decode()
    serial = serial.strip().split("=")[1].lower()
    etcd.put_sealed("/gatling/ci/acme/lock/localhost", "another-node")
    etcd.put_sealed("/gatling/ci/acme/cert/localhost", cert_value(chain, other, serial))
    etcd.put_sealed("/gatling/ci/acme/cert/../evil", cert_value(chain, key, serial))
    etcd.put_sealed("/gatling/ci/acme/chal/other/http-01/../../status", "orders 99\n")
    etcd.put_sealed("/gatling/ci/acme/chal/other/http-01/tok123", "tok123.thumb")
    srv, c, st = follower(gatling, etcd, tmp_path, "ci", certs)
    for what in ("cert/localhost: not a whole certificate", "cert/../evil: not a certificate",
                 "chal/other/http-01/../../status: not a challenge"):
        wait_for(lambda: any(what in l for l in srv.errlog), timeout=15,
                 what="%r said: %s" % (what, srv.errlog[-8:]))
    assert os.listdir(c) == [], "nothing installed"
    assert not os.path.exists(os.path.join(st, "status")) or \
        "99" not in open(os.path.join(st, "status")).read()
    # (the side process writes it each round it finds it missing: the client
    # empties its challenge directories when it starts)
    wait_for(lambda: subprocess.run(
        ["curl", "-sS", "http://127.0.0.1:%d/.well-known/acme-challenge/tok123" % srv.port],
        capture_output=True, timeout=20).stdout == b"tok123.thumb", timeout=5,
        what="the other node's challenge answered")
    assert any("another node of the cluster holds" in l for l in srv.errlog)
    etcd.put_sealed("/gatling/ci/acme/cert/localhost", cert_value(chain, key, serial))
    wait_for(lambda: any("certificate for localhost (serial %s) installed from the cluster"
                         % serial in l for l in srv.errlog), timeout=15,
             what="installed: %s" % srv.errlog[-5:])
    assert os.readlink(os.path.join(c, "localhost")) == ".acme/localhost." + serial
    ca = os.path.join(os.path.dirname(certs), "ca.pem")
    wait_for(lambda: subprocess.run(
        ["curl", "-sS", "--cacert", ca, "--resolve", "localhost:%d:127.0.0.1" % https_port(srv),
         "https://localhost:%d/f.txt" % https_port(srv)], capture_output=True,
        timeout=20).stdout == b"hello\n", timeout=10, what="the installed certificate served")


def test_client_restart_keeps_the_other_nodes_challenges(gatling, etcd, certs, tmp_path):
    """/server-status lists the ACME locks and whether this node holds them.
    The ACME client empties its challenge directories when it starts (a
    killed client's challenges are not served), but not the files the side
    process took from the other nodes: another node's HTTP-01 challenge is
    answered without a gap while this node's client is SIGKILLed and started
    again by its keeper (it used to be a 404 until the side process's next
    round, up to a second: a validation routed here then failed)."""
    etcd.put_sealed("/gatling/kc/acme/lock/localhost", "another-node")
    etcd.put_sealed("/gatling/kc/acme/chal/other/http-01/tokkc", "tokkc.thumb")
    srv, _, st = follower(gatling, etcd, tmp_path, "kc", certs)
    url = "http://127.0.0.1:%d/.well-known/acme-challenge/tokkc" % srv.port

    def answer():
        with contextlib.suppress(OSError):
            r = fetch(srv.port, "/.well-known/acme-challenge/tokkc", timeout=5)
            return r.status, r.body
        return None, b""
    wait_for(lambda: answer() == (200, b"tokkc.thumb"), timeout=10,
             what="the other node's challenge answered at " + url)
    # /server-status says which names' locks this node holds: none (another node's key)
    locks = json.loads(fetch(srv.port, "/server-status?json", timeout=5).body)
    assert locks.get("cluster_acme_locks") == [{"name": "localhost", "held": 0}], locks
    page = fetch(srv.port, "/server-status", timeout=5).body.decode()
    assert "<h2>Cluster: ACME locks</h2>" in page and "<td>localhost</td><td>no</td>" in page

    def client():
        for keeper in children(srv.pid, "acme-keeper"):
            kids = children(keeper, "acme-client")
            return kids[0] if len(kids) == 1 else None
        return None
    first = wait_for(client, timeout=15, what="the ACME client under its keeper")
    os.kill(first, signal.SIGKILL)
    seen, again, end = [], None, time.monotonic() + 8
    while time.monotonic() < end:
        seen.append(answer())
        if again is None and client() not in (None, first):
            again, end = client(), min(end, time.monotonic() + 1.5)
        time.sleep(0.02)
    assert again, "the keeper never started the client again: %s" % srv.errlog[-5:]
    bad = [a for a in seen if a != (200, b"tokkc.thumb")]
    assert not bad, "%d of %d answers were not the challenge: %s" % (len(bad), len(seen), bad[:3])
    assert oct(os.stat(os.path.join(st, "challenges", "http-01", "tokkc")).st_mode & 0o7777) == \
        "0o444"


def issued(certs, days_ago, host="localhost", self_signed=False, start=None, issuer=None):
    """A P-256 key and a certificate for host issued days_ago days ago (or
    from the datetime start), valid 30 days, by the suite PKI's CA (or by
    itself, or by a CA of the common name issuer that nobody trusts): (chain
    PEM, key PEM, serial as gatling writes it)."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, host)])
    pki = os.path.dirname(certs)
    ca = x509.load_pem_x509_certificate(open(pki + "/ca.pem", "rb").read())
    ca_key = serialization.load_pem_private_key(open(pki + "/ca.key", "rb").read(), None)
    by = ca.subject
    if issuer:  # a CA's name and a key of its own: enough to lack its root
        by = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, issuer)])
        ca_key = ec.generate_private_key(ec.SECP256R1())
    start = start or \
        datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=days_ago)
    cert = x509.CertificateBuilder().subject_name(name).issuer_name(
        name if self_signed else by).public_key(
        k.public_key()).serial_number(x509.random_serial_number()).not_valid_before(
        start).not_valid_after(start + datetime.timedelta(days=30)).add_extension(
        x509.SubjectAlternativeName([x509.DNSName(host)]), False).sign(
        k if self_signed else ca_key, hashes.SHA256())
    chain = cert.public_bytes(serialization.Encoding.PEM).decode()
    key = k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).decode()
    der = cert.serial_number.to_bytes((cert.serial_number.bit_length() + 7) // 8, "big")
    return chain, key, der.hex()


def served_serial(srv):
    out = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % https_port(srv),
                          "-servername", "localhost"], input=b"", capture_output=True,
                         timeout=20).stdout
    r = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=out, capture_output=True,
                       timeout=20)
    return r.stdout.decode().strip().split("=")[-1].lower()


def test_half_written_certificate_never_installed(gatling, etcd, certs, tmp_path):
    """A node that installed the cluster's certificate for localhost (its
    lock held by another node: it orders nothing) is shown a newer one
    written half in etcd -- the key missing, the PEM cut short, the value
    cut after its head, a key that is not the certificate's, a serial that
    is not its own: each is said once, naming the key, and none installed;
    -C keeps the old certificate and HTTPS serves it.  The whole value is
    installed then (so the checks are what kept the others out)."""
    old_chain, old_key, old_serial = issued(certs, 10)
    chain, key, serial = issued(certs, 0)
    _, other_key, _ = issued(certs, 0)
    etcd.put_sealed("/gatling/half/acme/lock/localhost", "another-node")
    etcd.put_sealed("/gatling/half/acme/cert/localhost",
                    cert_value(old_chain, old_key, old_serial))
    srv, c, _ = follower(gatling, etcd, tmp_path, "half", certs)
    wait_for(lambda: any("(serial %s) installed" % old_serial in l for l in srv.errlog),
             timeout=15, what="the old certificate installed: %s" % srv.errlog[-5:])
    wait_for(lambda: served_serial(srv) == old_serial, timeout=10, what="the old one served")
    whole = cert_value(chain, key, serial)
    cut = chain[:len(chain) // 2]
    halves = [
        "gatling-cert-1 %s %d 0\n%s" % (serial, len(chain), chain),  # no key
        "gatling-cert-1 %s %d %d\n%s%s" % (serial, len(cut), len(key), cut, key),  # PEM cut
        whole[:len(whole) // 3],  # the value cut: its lengths are more than it holds
        cert_value(chain, other_key, serial),  # a key that is not the certificate's
        cert_value(chain, key, old_serial),  # a serial that is not the certificate's
    ]
    for i, v in enumerate(halves):
        etcd.put_sealed("/gatling/half/acme/cert/localhost", v)
        wait_for(lambda: len([l for l in srv.errlog if "cert/localhost: not a whole certificate"
                              in l]) == i + 1, timeout=10,
                 what="value %d said: %s" % (i, srv.errlog[-4:]))
    time.sleep(2.5)  # two more rounds: said once each, nothing installed
    said = [l for l in srv.errlog if "cert/localhost: not a whole certificate" in l]
    assert len(said) == len(halves), said
    assert all("%s/localhost kept" % c in l for l in said), said
    assert os.readlink(os.path.join(c, "localhost")) == ".acme/localhost." + old_serial
    assert served_serial(srv) == old_serial
    etcd.put_sealed("/gatling/half/acme/cert/localhost", whole)
    wait_for(lambda: served_serial(srv) == serial, timeout=15,
             what="the whole new certificate installed and served: %s" % srv.errlog[-4:])


def test_etcd_with_auth(gatling, certs, tmp_path):
    """etcd with its auth on: user gatling, whose role may read and write
    /gatling/ only.  A node given user= and password-file= (read at start,
    kept in memory; no secret on the command line) logs in, syncs and shares
    its ticket keys with a second such node; a node with a wrong password,
    and one with none, are refused, say so naming the user, and serve all
    the same; etcd restarted (its tokens gone), the node logs in again."""
    e = Etcd(str(tmp_path)).start()
    env = dict(os.environ, ETCDCTL_API="3")
    try:
        for cmd in (["user", "add", "root:rootpw"], ["role", "add", "gatling"],
                    ["role", "grant-permission", "gatling", "--prefix=true", "readwrite",
                     "/gatling/"],
                    ["user", "add", "gatling:s3cret pass"], ["user", "grant-role", "gatling",
                                                             "gatling"],
                    ["auth", "enable"]):
            subprocess.run(["etcdctl", "--endpoints", e.url] + cmd, check=True,
                           capture_output=True, timeout=30, env=env)
        assert e.call("/v3/kv/range", {"key": b64("x")}) is None, "auth is on"
        good, bad = str(tmp_path / "pw"), str(tmp_path / "badpw")
        with open(good, "w") as f:
            f.write("s3cret pass\n")
        with open(bad, "w") as f:
            f.write("wrong\n")
        for pw in (good, bad):  # secrets: no one else reads them (gatling.8, SECURITY)
            os.chmod(pw, 0o600)
        url = e.url + ",user=gatling,password-file="
        n1 = node(gatling, certs, url + good, "auth", "-S")
        n2 = node(gatling, certs, url + good, "auth")
        wrong = node(gatling, certs, url + bad, "auth")
        none = node(gatling, certs, e.url, "auth")
        generation(n1), generation(n2)
        for n, why in ((wrong, "authentication failed"), (none, "user name is empty")):
            wait_for(lambda: any("tries again" in l and why in l for l in n.errlog), timeout=15,
                     what="%r said: %s" % (why, n.errlog[-3:]))
            assert "New, TLS" in s_client(https_port(n))
        assert any("(user gatling)" in l for l in wrong.errlog), wrong.errlog[-3:]
        assert not any("s3cret" in l or "wrong" in l for l in wrong.errlog + n1.errlog)
        sess = str(tmp_path / "sess")
        s_client(https_port(n1), sess_out=sess)
        assert reused(s_client(https_port(n2), sess_in=sess))
        e.stop(keep=True)
        wait_for(lambda: any("tries again" in l for l in n1.errlog), timeout=10,
                 what="n1 seeing etcd gone")
        e.start(wait=False)
        t = time.time()
        wait_for(lambda: metrics(n1)["gatling_cluster_last_sync_seconds"] > t, timeout=30,
                 what="n1 syncing after etcd's restart (logged in again): %s" % n1.errlog[-3:])
    finally:
        e.stop()


def etcd_members(base, n=3, hosts=None):
    """n etcd members of one cluster, started and answering; with hosts (a
    network lab's), one on each."""
    ms = [Etcd(base, name="m%d" % (i + 1), host=hosts[i] if hosts else None) for i in range(n)]
    spec = ",".join("%s=http://%s:%d" % (m.name, m.addr, m.peer) for m in ms)
    for m in ms:
        m.cluster = spec
    try:
        for m in ms:
            m.start(wait=False)
        for m in ms:
            wait_for(lambda: m.call("/v3/kv/range", {"key": b64("x")}) is not None, timeout=30,
                     what="etcd member %s" % m.name)
    except BaseException:
        for m in ms:
            m.stop()
        raise
    return ms


def test_etcd_leader_killed(gatling, certs, tmp_path):
    """Three etcd members; the nodes name the leader first.  The leader is
    SIGKILLed: the other two elect another, and a PURGE on node 1 still
    empties node 2 (their side processes go on to the next URL)."""
    ms = etcd_members(str(tmp_path))
    try:
        lead = ms[0].call("/v3/maintenance/status", {})["leader"]
        leader = [m for m in ms if m.call("/v3/maintenance/status", {})["header"]["member_id"]
                  == lead][0]
        urls = ",".join(m.url for m in [leader] + [m for m in ms if m is not leader])
        tree = {".cache": "ttl 60\n", "p.cgi": Mode(CGI, 0o755)}
        n1 = node(gatling, certs, urls, "lead", "-S", "-w", "\\.cgi$", tree=tree)
        n2 = node(gatling, certs, urls, "lead", "-S", "-w", "\\.cgi$", tree=tree)
        generation(n1), generation(n2)
        for n in (n1, n2):
            http(n.port, "/p.cgi")
            assert http(n.port, "/p.cgi")[0] == "gatling; hit"
        leader.proc.kill()
        leader.proc.wait(10)
        t0 = time.monotonic()
        assert http(n1.port, "/p.cgi", "PURGE")[1] == "purged 1\n"
        wait_for(lambda: http(n2.port, "/p.cgi")[0] != "gatling; hit", timeout=10, step=0.1,
                 what="node 2 purged with the leader gone")
        print("purge across nodes with the leader killed: %.2f s" % (time.monotonic() - t0))
    finally:
        for m in ms:
            m.stop()


def children(pid, comm):
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        if p.isdigit() and name == comm and int(st[st.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(p))
    return out


def test_side_process_killed(gatling, etcd, certs):
    """The side process SIGKILLed: its keeper starts another a second later,
    which syncs again (/metrics' last sync moves on); the node served all
    along."""
    n1 = node(gatling, certs, etcd.url, "kill", "-S")
    generation(n1)
    keeper = wait_for(lambda: children(n1.pid, "cluster-keeper"), timeout=5, what="the keeper")[0]
    side = wait_for(lambda: children(keeper, "gatling-cluster"), timeout=5, what="the side")[0]
    os.kill(side, 9)
    wait_for(lambda: any("the side process was killed" in l for l in n1.errlog), timeout=10,
             what="the keeper saying so: %s" % n1.errlog[-5:])
    again = wait_for(lambda: [p for p in children(keeper, "gatling-cluster") if p != side],
                     timeout=10, what="a new side process")
    assert again
    t = time.time()
    wait_for(lambda: metrics(n1)["gatling_cluster_last_sync_seconds"] > t, timeout=10,
             what="a sync after the restart")
    assert "New, TLS" in s_client(https_port(n1))


def test_etcd_over_tls_with_a_client_certificate(gatling, certs, tmp_path):
    """etcd on https with --client-cert-auth: a node given ca=, cert= and
    key= (read before -u, kept in memory) syncs; one without cert= is
    refused by etcd and says so, serving all the same."""
    pki = os.path.dirname(certs)
    d = str(tmp_path)
    run = lambda *a: subprocess.run(list(a), check=True, capture_output=True, timeout=30)
    # etcd's own certificate must allow clientAuth too: with --client-cert-auth its JSON
    # gateway reaches its gRPC server with it
    for who, eku, san in (("srv", "serverAuth,clientAuth", "IP:127.0.0.1"),
                          ("cli", "clientAuth", "DNS:gatling")):
        run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-subj", "/CN=" + who, "-keyout", "%s/%s.key" % (d, who), "-out",
            "%s/%s.csr" % (d, who))
        with open(d + "/ext", "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\nextendedKeyUsage=%s\n"
                    "subjectAltName=%s\n" % (eku, san))
        run("openssl", "x509", "-req", "-in", "%s/%s.csr" % (d, who), "-CA", pki + "/ca.pem",
            "-CAkey", pki + "/ca.key", "-CAcreateserial", "-CAserial", d + "/srl", "-days", "2",
            "-extfile", d + "/ext", "-out", "%s/%s.crt" % (d, who))
    port, peer = free_port(), free_port()
    url = "https://127.0.0.1:%d" % port
    log = open(d + "/etcd.log", "ab")
    p = subprocess.Popen(
        [ETCD, "--data-dir", tempfile.mkdtemp(dir=d), "--name", "t1", "--listen-client-urls", url,
         "--advertise-client-urls", url, "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
         "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
         "--initial-cluster", "t1=http://127.0.0.1:%d" % peer, "--cert-file", d + "/srv.crt",
         "--key-file", d + "/srv.key", "--trusted-ca-file", pki + "/ca.pem",
         "--client-cert-auth"], stdout=log, stderr=subprocess.STDOUT)
    try:
        tls = "etcd=%s,ca=%s/ca.pem" % (url, pki)
        good = node(gatling, certs, tls[5:] + ",cert=%s/cli.crt,key=%s/cli.key" % (d, d), "tls")
        bad = node(gatling, certs, tls[5:], "tls")
        generation(good)
        wait_for(lambda: any("tries again" in l for l in bad.errlog), timeout=15,
                 what="the node without a client certificate refused: %s" % bad.errlog[-3:])
        assert "New, TLS" in s_client(https_port(bad))
    finally:
        p.terminate()
        p.wait(10)
        log.close()


def test_certificate_from_the_cluster_at_start_does_not_end_the_node(gatling, etcd, certs,
                                                                      tmp_path):
    """The side process installs the cluster's certificate at its first
    round and signals SIGUSR1, which may come while the server still loads
    -C (here 2,000 certificates: a start that takes a while) and before the
    loop's handlers: the signal is kept, not fatal (its default action ended
    the server, with nothing said), and the certificate served.  Five starts."""
    chain, key, serial = issued(certs, 0)
    pem = open(os.path.join(certs, "server.pem")).read()
    for run in range(5):
        name = "early%d" % run
        etcd.put_sealed("/gatling/%s/acme/lock/localhost" % name, "another-node")
        etcd.put_sealed("/gatling/%s/acme/cert/localhost" % name, cert_value(chain, key, serial))
        c, st = str(tmp_path / name / "c"), str(tmp_path / name / "st")
        os.makedirs(c)
        for i in range(2000):
            with open(os.path.join(c, "h%d.test" % i), "w") as f:
                f.write(pem)
        srv = gatling({"f.txt": "hello\n"}, check_fds=False, args=(
            "-T", "10", "-S", "-C", c, "-e", "0", "--acme", "a@b.test", "--acme-ca",
            "https://127.0.0.1:1/dir", "--acme-ca-root", ca_of(certs), "--acme-dir", st,
            "--acme-names", "localhost", "--cluster", "etcd=" + with_secret(etcd.url),
            "--cluster-name", name))
        wait_for(lambda: served_serial(srv) == serial, timeout=15,
                 what="start %d: the cluster's certificate served: %s" % (run, srv.errlog[-4:]))
        assert srv.alive(), "start %d: the server ended" % run


# --------------------------------------------------------------------------
# The cluster's trust (issue 63, item 3): https to etcd, sealed values, the
# cluster's certificates checked as a CA's; and item 6, no purge lost when the
# side process is started again.

def global_address():
    """An IPv4 address of this host that is not loopback, or None."""
    r = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                       capture_output=True, text=True, timeout=10)
    for line in r.stdout.splitlines():
        return line.split()[3].split("/")[0]
    return None


def test_plain_http_to_another_host(build, gatling, certs, tmp_path):
    """http:// to a host other than this one is refused at start (exit 2,
    saying https:// or insecure), as is a list without secret=; with the
    item insecure the node starts and warns (stderr) naming the URL, and a
    real etcd on this host's non-loopback address is used (the node syncs).
    Loopback http:// (127.0.0.0/8, [::1], localhost; every other test here)
    is taken without a word."""
    for url, why in (("http://198.51.100.1:2379", "plain http to a host other than this one"),
                     ("http://etcd.example:2379,https://127.0.0.1:1",
                      "http://etcd.example:2379: plain http"),
                     ("http://[2001:db8::1]:2379", "plain http"),
                     ("http://127.0.0.1.example:2379", "plain http"),
                     ("http://127.0.0.1:1@etcd.example:2379", "plain http")):
        r = subprocess.run([build.binary, "-p", "0", "--cluster", "etcd=" + with_secret(url)],
                           capture_output=True, timeout=20)
        assert r.returncode == 2 and why in r.stderr.decode(), (url, r)
        assert "https://, or add ',insecure'" in r.stderr.decode()
    r = subprocess.run([build.binary, "-p", "0", "--cluster", "etcd=http://127.0.0.1:1"],
                       capture_output=True, timeout=20)
    assert r.returncode == 2 and "no secret=FILE" in r.stderr.decode(), r
    # loopback in each of its spellings is taken; --check reads secret= too
    loop = "http://[::1]:1,http://localhost:2,http://127.1.2.3:3"
    r = subprocess.run([build.binary, "--check", "-p", "0", "--cluster",
                        "etcd=" + with_secret(loop)], capture_output=True, timeout=20)
    assert r.returncode == 0, r
    r = subprocess.run([build.binary, "--check", "-p", "0", "--cluster",
                        "etcd=%s,secret=%s" % (loop, tmp_path / "none")], capture_output=True,
                       timeout=20)
    assert r.returncode == 2 and "none: No such file" in r.stderr.decode(), r
    warned = node(gatling, certs, "http://198.51.100.1:2379,insecure", "ins")
    assert any("WARNING: insecure: http://198.51.100.1:2379 is plain http" in l
               for l in warned.errlog), warned.errlog
    quiet = node(gatling, certs, "http://127.0.0.1:1", "ins")
    assert not any("WARNING" in l for l in quiet.errlog), quiet.errlog
    addr = global_address()
    if not addr:
        return
    e = Etcd(str(tmp_path))
    e.addr, e.url = addr, "http://%s:%d" % (addr, e.port)
    e.start()
    try:
        n = node(gatling, certs, e.url + ",insecure", "ins")
        generation(n)
        assert any("WARNING: insecure: %s" % e.url in l for l in n.errlog)
    finally:
        e.stop()


@pytest.mark.parametrize("mode,owner,text,why", [
    (0o644, None, "x" * 64, "group or others may read or write it (mode 0644)"),
    (0o640, None, "x" * 64, "group or others may read or write it (mode 0640)"),
    (0o600, "nobody", "x" * 64, "neither root nor the user gatling runs as"),
    (0o600, None, "short\n", "shorter than 16 bytes"),
    (None, None, None, "No such file"),
])
def test_secret_file_checked(build, tmp_path, mode, owner, text, why):
    """secret=FILE is a secret file (site/privfs.h's PFS_SECRET): refused at
    start, naming it, unless a regular file of this user (or root) that no
    group or other may read, of at least 16 bytes."""
    path = str(tmp_path / "secret")
    if text is not None:
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
    if owner:
        if os.geteuid() != 0:
            pytest.skip("chown needs root")
        import pwd
        os.chown(path, pwd.getpwnam(owner).pw_uid, -1)
    r = subprocess.run([build.binary, "-p", "0", "--cluster",
                        "etcd=http://127.0.0.1:1,secret=" + path], capture_output=True, timeout=20)
    err = r.stderr.decode()
    assert r.returncode != 0 and "secret=%s: " % path in err and why in err, r


def not_sealed(srv, key):
    return any("etcd key %s: not sealed with this cluster's secret" % key in l
               for l in srv.errlog)


def test_forged_ticket_secret(gatling, etcd, certs, tmp_path):
    """A tickets value gatling would have written (generation 7, a master
    the writer knows) but not sealed with the cluster's secret, or sealed
    with another one: refused with a line naming the key, never used (no
    "generation 7", /metrics' generation stays 0), and left as it is."""
    other = str(tmp_path / "other-secret")
    with open(os.open(other, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("another cluster's secret, 32 bytes or more\n")
    forged = "gatling-tickets-1 7 %d %s -" % (time.time(), "ab" * 32)
    for name, put in (("fk1", etcd.put), ("fk2", lambda k, v: etcd.put_sealed(k, v, other))):
        put("/gatling/%s/tickets" % name, forged)
        n = node(gatling, certs, etcd.url, name, "-S")
        wait_for(lambda: not_sealed(n, "/gatling/%s/tickets" % name), timeout=15,
                 what="the forged tickets refused: %s" % n.errlog[-3:])
        time.sleep(2.5)  # a round that would have read it again
        assert not any("generation 7" in l for l in n.errlog), n.errlog
        assert metrics(n)["gatling_cluster_ticket_generation"] == 0
        assert etcd.get_raw("/gatling/%s/tickets" % name) != b""


def test_forged_challenge(gatling, etcd, certs, tmp_path):
    """A challenge under another node's acme/chal/ not sealed with the
    cluster's secret is said and never served (a certificate for the site
    to whoever can write etcd); a sealed one beside it is served."""
    etcd.put_sealed("/gatling/fc/acme/lock/localhost", "another-node")
    etcd.put("/gatling/fc/acme/chal/other/http-01/tokf", "tokf.thumb")
    etcd.put_sealed("/gatling/fc/acme/chal/other/http-01/tokg", "tokg.thumb")
    srv, _, st = follower(gatling, etcd, tmp_path, "fc", certs)
    wait_for(lambda: fetch(srv.port, "/.well-known/acme-challenge/tokg", timeout=5).body ==
             b"tokg.thumb", timeout=10, what="the sealed challenge served")
    wait_for(lambda: not_sealed(srv, "/gatling/fc/acme/chal/other/http-01/tokf"), timeout=10,
             what="the forged challenge said: %s" % srv.errlog[-3:])
    assert fetch(srv.port, "/.well-known/acme-challenge/tokf", timeout=5).status == 404
    assert not os.path.exists(os.path.join(st, "challenges", "http-01", "tokf"))



def test_forged_lock(gatling, etcd, certs, tmp_path):
    """A name's ACME lock not sealed with the cluster's secret (no lease: it
    would hold the name for good, and every node would wait) is said and
    removed, and the node that wants the name takes the lock."""
    etcd.put("/gatling/fl/acme/lock/localhost", "another-node")
    srv, _, _ = follower(gatling, etcd, tmp_path, "fl", certs)
    wait_for(lambda: any("etcd key /gatling/fl/acme/lock/localhost: not sealed" in l and
                         "removed" in l for l in srv.errlog), timeout=15,
             what="the forged lock said: %s" % srv.errlog[-3:])
    wait_for(lambda: any("holds the cluster's ACME lock for localhost" in l
                         for l in srv.errlog), timeout=15,
             what="the lock taken: %s" % srv.errlog[-3:])
    assert etcd.get("/gatling/fl/acme/lock/localhost") != "another-node"

def test_forged_certificates(gatling, etcd, certs, tmp_path):
    """A node that installed the cluster's certificate for localhost is
    shown newer ones, sealed (the secret leaked, or a node went bad) but not
    what a CA gatling trusts would issue -- self-signed, for another name,
    dated 2090 (the newest notBefore used to win for good) -- and a good one
    not sealed: each is said once with why, none installed, the old one
    served; the unsealed one is replaced in etcd by the node's own, sealed.
    A good sealed one is installed then."""
    import datetime
    old_chain, old_key, old_serial = issued(certs, 10)
    etcd.put_sealed("/gatling/fcert/acme/lock/localhost", "another-node")
    etcd.put_sealed("/gatling/fcert/acme/cert/localhost",
                    cert_value(old_chain, old_key, old_serial))
    srv, c, _ = follower(gatling, etcd, tmp_path, "fcert", certs)
    wait_for(lambda: served_serial(srv) == old_serial, timeout=15,
             what="the cluster's certificate served: %s" % srv.errlog[-4:])
    key = "/gatling/fcert/acme/cert/localhost"
    y2090 = datetime.datetime(2090, 1, 1, tzinfo=datetime.timezone.utc)
    forged = [(issued(certs, 0, self_signed=True), True, "self-signed certificate"),
              (issued(certs, 0, host="other.test"), True, "it does not name localhost"),
              (issued(certs, 0, start=y2090), True, "certificate is not yet valid"),
              # the CA's issuing root not among the roots (issue 79 item 8.8): named
              (issued(certs, 0, issuer="Another Root"), True,
               "its chain's issuing root /CN=Another Root is not in " + ca_of(certs)),
              (issued(certs, 0), False, "not sealed with this cluster's secret")]
    for i, ((chain, k, serial), sealed, why) in enumerate(forged):
        (etcd.put_sealed if sealed else etcd.put)(key, cert_value(chain, k, serial))
        wait_for(lambda: any("etcd key %s: " % key in l and why in l and "not installed" in l
                             for l in srv.errlog), timeout=10,
                 what="forged value %d (%s) said: %s" % (i, why, srv.errlog[-3:]))
        assert served_serial(srv) == old_serial
    # the unsealed one is replaced by the node's own, sealed (an upgrade heals)
    try:
        wait_for(lambda: (etcd.get_raw(key) or b"").startswith(b"gatling-sealed-1 ") and
                 (" %s " % old_serial) in etcd.get(key).split("\n")[0], timeout=10,
                 what="the forged value replaced by the node's certificate")
    except AssertionError:
        print("\n".join(srv.errlog[-12:]))
        print(etcd.get_raw(key)[:100])
        raise
    time.sleep(2.5)  # more rounds: said once each, nothing installed
    said = [l for l in srv.errlog if "etcd key %s: " % key in l and "not installed" in l]
    assert len(said) == len(forged), said
    assert os.readlink(os.path.join(c, "localhost")) == ".acme/localhost." + old_serial
    assert served_serial(srv) == old_serial
    chain, k, serial = issued(certs, 0)
    etcd.put_sealed(key, cert_value(chain, k, serial))
    wait_for(lambda: served_serial(srv) == serial, timeout=15,
             what="the good sealed certificate installed: %s" % srv.errlog[-4:])


def test_purge_after_side_process_restart(gatling, etcd, certs):
    """Node 2's side process SIGKILLed, a PURGE on node 1 0.1 s later
    (before the keeper starts another): node 2's entry is purged all the
    same, three times in a row (the new side process resumes from the
    revision the last one applied, kept in the shared page; it used to
    start from etcd's revision of then and skip the purge for good)."""
    tree = {".cache": "ttl 60\n", "p.cgi": Mode(CGI, 0o755)}
    args = ("-S", "-w", "\\.cgi$")
    n1 = node(gatling, certs, etcd.url, "rs", *args, tree=tree)
    n2 = node(gatling, certs, etcd.url, "rs", *args, tree=tree)
    generation(n1), generation(n2)
    p1, p2 = n1.plain_port or n1.port, n2.plain_port or n2.port
    keeper = wait_for(lambda: children(n2.pid, "cluster-keeper"), timeout=5,
                      what="the keeper")[0]
    for run in range(3):
        for p in (p1, p2):
            wait_for(lambda: http(p, "/p.cgi")[0] == "gatling; hit", timeout=10,
                     what="run %d: the page cached on port %d" % (run, p))
        side = wait_for(lambda: children(keeper, "gatling-cluster"), timeout=10,
                        what="run %d: the side process" % run)[0]
        t = time.time()
        wait_for(lambda: metrics(n2)["gatling_cluster_last_sync_seconds"] > t, timeout=10,
                 what="run %d: the side process syncing" % run)
        os.kill(side, signal.SIGKILL)
        time.sleep(0.1)
        assert http(p1, "/p.cgi", "PURGE")[1] == "purged 1\n"
        wait_for(lambda: http(p2, "/p.cgi")[0] != "gatling; hit", timeout=10, step=0.1,
                 what="run %d: node 2's entry purged after its side process's restart" % run)


class FakeEtcd:
    """A hostile etcd (or whoever answers on a plain http path): a small
    server speaking the v3 JSON gateway's shape, on addr, whose range of
    any key that ends in a name of forged answers forged[name], unsealed or
    sealed as given; compare-and-puts fail, leases are granted.  Its
    requests are counted by path."""

    def __init__(self, addr, forged):
        import http.server
        import threading
        fake = self
        self.forged, self.seen = forged, {}

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                fake.seen[self.path] = fake.seen.get(self.path, 0) + 1
                body = {"header": {"revision": "9"}}
                if self.path == "/v3/kv/range":
                    key = base64.b64decode(req.get("key", "")).decode(errors="replace")
                    for name, value in fake.forged.items():
                        if key.endswith(name):
                            body["kvs"] = [{"key": req["key"], "mod_revision": "9",
                                            "value": base64.b64encode(value).decode()}]
                elif self.path == "/v3/kv/txn":
                    body["succeeded"] = False
                elif self.path == "/v3/lease/grant":
                    body.update(ID="77", TTL="10")
                out = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = http.server.ThreadingHTTPServer((addr, 0), H)
        self.url = "http://%s:%d" % (addr, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_hostile_etcd_on_plain_http(gatling, certs):
    """A fake etcd on this host's non-loopback address, reached over plain
    http with insecure (a WARNING at start): it answers the tickets key with
    a well-formed value of its own (generation 7) -- once unsealed, once
    sealed for another key (moved) -- and the node refuses it with a line
    naming the key and keeps its own master (generation 0 in /metrics)."""
    addr = global_address() or pytest.skip("no non-loopback address on this host")
    forged = "gatling-tickets-1 7 %d %s -" % (time.time(), "cd" * 32)
    for name, value in (("fe1", forged.encode()), ("fe2", seal("/gatling/fe2/other", forged))):
        fake = FakeEtcd(addr, {"/tickets": value})
        try:
            n = node(gatling, certs, fake.url + ",insecure", name, "-S")
            assert any("WARNING: insecure: %s is plain http" % fake.url in l for l in n.errlog)
            wait_for(lambda: not_sealed(n, "/gatling/%s/tickets" % name), timeout=15,
                     what="the fake etcd's tickets refused: %s" % n.errlog[-3:])
            assert fake.seen.get("/v3/kv/range"), fake.seen
            assert not any("generation 7" in l for l in n.errlog), n.errlog
            assert metrics(n)["gatling_cluster_ticket_generation"] == 0
        finally:
            fake.stop()


def test_early_data_bound_to_the_issuing_node(gatling, etcd, certs, tmp_path):
    """--early-data (issue 80): the nodes share ticket keys, so a session
    from node 1 resumes on node 2, but its early data is node 1's alone
    (node 2's replay table never saw what node 1 accepted): refused there,
    counted refused, the request answered after the handshake."""
    n1 = node(gatling, certs, etcd.url, "c1", "--early-data", "64", "-S")
    n2 = node(gatling, certs, etcd.url, "c1", "--early-data", "64", "-S")
    generation(n1), generation(n2)
    sess = str(tmp_path / "sess")
    assert not reused(s_client(https_port(n1), sess_out=sess))
    req = tmp_path / "req"
    req.write_bytes(b"GET /f.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")

    def early(srv, again=b""):
        cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % https_port(srv),
               "-servername", "localhost", "-tls1_3", "-sess_in", sess, "-early_data", str(req)]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        p.stdin.write(again)
        p.stdin.flush()
        time.sleep(1)  # stdin open: s_client reads the answer before it leaves
        out, _ = p.communicate(b"", timeout=15)
        return out.decode(errors="replace")

    def refused(srv):
        r = subprocess.run(["curl", "-sS", "--max-time", "10",
                            "http://127.0.0.1:%d/metrics" % (srv.plain_port or srv.port)],
                           capture_output=True, timeout=20)
        return [l for l in r.stdout.decode().splitlines()
                if l.startswith("gatling_early_data_total")]
    time.sleep(11.5)  # a new replay table refuses for its first 11 s
    out = early(n1)
    assert "Early data was accepted" in out and "hello" in out, out
    out = early(n2, again=req.read_bytes())  # refused: the request goes after the handshake
    assert "Reused, TLSv1.3" in out and "Early data was rejected" in out, out
    assert "hello" in out  # sent again after the handshake
    assert 'gatling_early_data_total{outcome="refused"} 1' in refused(n2)
    assert 'gatling_early_data_total{outcome="accepted"} 1' in refused(n1)
