"""Pebble, pebble-challtestsrv and a fault-injecting proxy in front of Pebble:
what the ACME tests share (test_acme.py: certbot through gatling;
test_acme_https.py: gatling's own client, issue 44) and bench/compare-acme.

Python's standard library only (bench/ imports it too, without pytest).

  - Knot (Debian's knot, knotd) is the authoritative DNS server of DNS-01's
    tests (test_acme_dns.py): one zone on a loopback port, updates allowed
    to one TSIG key; Pebble(dnsserver=knot.addr) then resolves through it
    (no pebble-challtestsrv).

  - pebble-challtestsrv is Pebble's DNS: it answers every A query with
    127.0.0.1 (only its DNS server runs), so Pebble's validation of any name
    reaches the HTTP port (httpPort) or HTTPS port (tlsPort) given here.  In
    a network lab (ops/test_cluster_lab.py) both run on a lab host, and the
    answer is another host's address (a balancer's).
  - Pebble's own HTTPS certificate comes from the suite's throwaway CA
    (dist/mkcert.sh: localhost, 127.0.0.1, certs/server.pem holding the key
    too), which the client trusts (gatling --acme-ca-root PKI/ca.pem).
  - Pebble's chaos stays as Pebble ships it unless asked: 5% of good nonces
    rejected (PEBBLE_WFE_NONCEREJECT), authorizations reused half the time
    (PEBBLE_AUTHZREUSE), a random 0-15 s validation delay unless nosleep
    (PEBBLE_VA_NOSLEEP=1).
  - Its log (all its runs, appended) is where orders and accounts are
    counted: "Added order" per order made, "Issued certificate" per
    certificate, "There are now N accounts" per account made, "ARI: order
    ... is a replacement of" per order that named (`replaces`) a
    certificate it replaces.
"""
import base64
import contextlib
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
import urllib.request

from harness import waits
from harness.waits import wait_for

PEBBLE_VERSION = "v2.10.1"
CHAOS_ENV = ("PEBBLE_VA_NOSLEEP", "PEBBLE_WFE_NONCEREJECT", "PEBBLE_AUTHZREUSE",
             "PEBBLE_VA_ALWAYS_VALID", "PEBBLE_CHALLTESTSRV_HTTP01")


def go_tool(name):
    """A Go command from PATH, $GOBIN, ~/go/bin or `go env GOPATH`/bin (where
    tests/setup.sh's go install puts it); None."""
    found = shutil.which(name)
    dirs = [os.environ.get("GOBIN", ""), os.path.expanduser("~/go/bin")]
    for d in dirs if not found else []:
        if d and os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    if not found and shutil.which("go"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True,
                                    timeout=20).stdout.strip()
            for d in gopath.split(os.pathsep):
                if d and os.access(os.path.join(d, "bin", name), os.X_OK):
                    return os.path.join(d, "bin", name)
    return found


PEBBLE = go_tool("pebble")
CHALLTESTSRV = go_tool("pebble-challtestsrv")
INSTALL_HINT = ("`go install github.com/letsencrypt/pebble/v2/cmd/pebble@%s` (and "
                "cmd/pebble-challtestsrv); tests/setup.sh does it" % PEBBLE_VERSION)


def missing():
    """The names of the Pebble programs not installed here."""
    return [n for n, p in (("pebble", PEBBLE), ("pebble-challtestsrv", CHALLTESTSRV)) if not p]


def free_port():
    """A loopback TCP port with its UDP twin free too (gatling's HTTP/3), below
    the ephemeral range, free now: for a program that binds it itself."""
    return waits.free_port(udp=True)


def tail(path, n=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError as e:
        return "(%s)" % e


def stop_process(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextlib.contextmanager
def process(cmd, log, env=None):
    """cmd running with its output in log; stopped (killed after 5 s) at the end."""
    with open(log, "wb") as out:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, env=env)
    try:
        yield p
    finally:
        stop_process(p)


def listening(port, proc, log, timeout=10, addr="127.0.0.1"):
    def up():
        assert proc.poll() is None, "%s exited: %s" % (proc.args[0], tail(log))
        with contextlib.suppress(OSError):
            socket.create_connection((addr, port), timeout=1).close()
            return True
        return False
    wait_for(up, timeout, "%s listening on port %d" % (os.path.basename(proc.args[0]), port))


class Pebble:
    """pebble-challtestsrv (DNS only, every name 127.0.0.1) and Pebble, whose
    validations go to http_port (HTTP-01) and tls_port (TLS-ALPN-01).  The
    ports are chosen at once, so directory is known before start(); stop()
    and start() again keep them (Pebble's state, its root included, is new
    at each start).  profiles: {name: validity seconds} beside "default"
    (90 days unless given).  chaos: Pebble's defaults (see the module);
    nosleep: PEBBLE_VA_NOSLEEP=1, no random validation delay.  dnsserver:
    "ADDR:PORT" Pebble resolves through (a Knot, for DNS-01) instead of
    pebble-challtestsrv, which then does not run.  host: a network lab's
    host (bench/benchkit/netlab.py) where both run, Pebble on the host's
    address (pki's leaf must name it: dist/mkcert.sh PKI ADDRESS), and every
    name resolving to target, its address of the servers to validate (a
    balancer's)."""

    def __init__(self, tmp, pki, http_port, tls_port, profiles=None, chaos=True,
                 nosleep=True, retry_after=1, dnsserver=None, host=None, target="127.0.0.1"):
        self.tmp, self.pki = tmp, pki
        # "127.0.0.1:PORT": Pebble resolves there (a Knot), and no challtestsrv runs
        self.dnsserver = dnsserver
        self.host, self.target = host, target
        self.addr = host.addrs[0] if host else "127.0.0.1"
        self.dns, self.cmgmt, self.acme, self.mgmt = (free_port() for _ in range(4))
        self.directory = "https://%s:%d/dir" % (self.addr, self.acme)
        self.conf = os.path.join(tmp, "pebble.json")
        profs = {"default": 7776000}
        profs.update(profiles or {})
        with open(self.conf, "w") as f:
            json.dump({"pebble": {
                "listenAddress": "%s:%d" % (self.addr, self.acme),
                "managementListenAddress": "%s:%d" % (self.addr, self.mgmt),
                "certificate": pki + "/certs/server.pem",  # Go takes the key from it too
                "privateKey": pki + "/certs/server.pem",
                "httpPort": http_port,
                "tlsPort": tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": False,
                "retryAfter": {"authz": retry_after, "order": retry_after},
                "profiles": {n: {"description": n, "validityPeriod": v}
                             for n, v in profs.items()},
            }}, f)
        self.env = {k: v for k, v in os.environ.items() if k not in CHAOS_ENV}
        if nosleep:
            self.env["PEBBLE_VA_NOSLEEP"] = "1"
        if not chaos:
            self.env.update(PEBBLE_WFE_NONCEREJECT="0", PEBBLE_AUTHZREUSE="0")
        self.dlog = os.path.join(tmp, "challtestsrv.log")
        self.plog = os.path.join(tmp, "pebble.log")
        self.d = self.p = None

    def inside(self):
        """Where Pebble runs: its lab host's namespace, or here."""
        return self.host.inside() if self.host else contextlib.nullcontext()

    def start(self):
        with self.inside():
            self._start()
        return self

    def _start(self):
        if self.d is None and not self.dnsserver:
            cmd = [CHALLTESTSRV, "-defaultIPv4", self.target, "-defaultIPv6", "",
                   "-dnsserver", "127.0.0.1:%d" % self.dns,
                   "-management", "127.0.0.1:%d" % self.cmgmt,
                   "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""]
            with open(self.dlog, "wb") as out:
                self.d = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT)
            listening(self.cmgmt, self.d, self.dlog)
        with open(self.plog, "ab") as out:
            self.p = subprocess.Popen([PEBBLE, "-config", self.conf, "-dnsserver",
                                       self.dnsserver or "127.0.0.1:%d" % self.dns],
                                      stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=subprocess.STDOUT, env=self.env)
        listening(self.acme, self.p, self.plog, addr=self.addr)
        listening(self.mgmt, self.p, self.plog, addr=self.addr)

    def stop(self):
        if self.p is not None:
            stop_process(self.p)
            self.p = None

    def close(self):
        self.stop()
        if self.d is not None:
            stop_process(self.d)
            self.d = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- what Pebble says
    def _get(self, path):
        ctx = ssl.create_default_context(cafile=self.pki + "/ca.pem")
        with self.inside(), urllib.request.urlopen("https://%s:%d%s" % (self.addr, self.mgmt,
                                                                        path),
                                                   context=ctx, timeout=10) as r:
            return r.read().decode()

    def root(self):
        """Pebble's issuing root (made anew at each start), PEM."""
        return self._get("/roots/0")

    def intermediate(self):
        return self._get("/intermediates/0")

    def log(self):
        return tail(self.plog, 1 << 24)

    def orders(self):
        """Orders Pebble added (each newOrder that made one)."""
        return self.log().count("Added order ")

    def accounts(self):
        """Accounts Pebble made (each "There are now N accounts" line)."""
        return len(re.findall(r"There are now \d+ accounts in memory", self.log()))

    def issued(self):
        """Certificates Pebble issued."""
        return self.log().count("Issued certificate serial ")

    def replacements(self):
        """Orders that named, with `replaces`, a certificate they replace."""
        return len(re.findall(r"ARI: order \S+ is a replacement of", self.log()))

    def first_serial_unmatchable(self):
        """Did the first certificate's serial begin with a zero byte?  Pebble
        2.10 cannot match such a certID (one certificate in 256; its log
        prints the number without that byte): it refuses the order that
        replaces it (500 serverInternal), and the client orders again
        without `replaces` (acme_proto.c), so no order counts as one."""
        m = re.search(r"Issued certificate serial ([0-9a-f]+) for order", self.log())
        return bool(m) and len(m.group(1)) < 16


# --------------------------------------------------------------------------
# The fault-injecting proxy

class Fault:
    """One answer the proxy gives instead of Pebble's, to the next `times`
    requests whose method and path match (path: a prefix or a regexp).
    kind: "429" (rateLimited, Retry-After: retry_after), "500", "notjson"
    (200, HTML), "huge" (200, application/json, `size` bytes of an unending
    JSON string), "redirect" (302 to another origin), "delay" (Pebble's
    answer, held `delay` seconds), "ari" (Pebble's renewalInfo answer replaced
    by window(serial) -> (start, end) unix seconds), "plain" (Pebble's answer
    with every https:// in it made http://), "noreplace" (a newOrder that says
    `replaces` answered 500 serverInternal, as Pebble 2.10.1 answers one for a
    certificate whose serial starts with a zero byte; others passed on)."""

    def __init__(self, kind, path, method=None, times=1, retry_after=3, size=16 << 20,
                 delay=0.0, window=None, location="https://127.0.0.1:1/elsewhere"):
        self.kind, self.path, self.method, self.times = kind, path, method, times
        self.location = location
        self.retry_after, self.size, self.delay, self.window = retry_after, size, delay, window
        self.hits = []  # unix times it was applied

    def matches(self, method, path):
        if self.times <= 0 or (self.method and method != self.method):
            return False
        return path.startswith(self.path) or bool(re.fullmatch(self.path, path))


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int(t % 1 * 1000)


class FaultProxy:
    """An HTTPS proxy in front of Pebble's ACME port (the suite CA's
    certificate, as Pebble's own): every request is passed on with its Host
    header, so Pebble writes the proxy's URLs in its answers and checks the
    JWS url against them.  faults: a list of Fault, first match wins.
    requests: (unix time, method, path, JWS payload decoded or None, status)."""

    def __init__(self, pki, upstream_port):
        self.pki, self.upstream = pki, upstream_port
        self.faults, self.requests = [], []
        self.lock = threading.Lock()
        self.port = free_port()
        self.directory = "https://127.0.0.1:%d/dir" % self.port
        self.up_ctx = ssl.create_default_context(cafile=pki + "/ca.pem")
        self.arrived = threading.Condition(self.lock)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                proxy.handle(self)

            do_POST = do_HEAD = do_GET

        class Srv(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.httpd = Srv(("127.0.0.1", self.port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki + "/certs/server.pem")
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def add(self, fault):
        with self.lock:
            self.faults.append(fault)
        return fault

    def seen(self, path, method=None):
        """The requests so far to path (a prefix)."""
        with self.lock:
            return [r for r in self.requests
                    if r[2].startswith(path) and (method is None or r[1] == method)]

    @staticmethod
    def payload(body):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            p = json.loads(body)["payload"]
            if not p:
                return {}
            return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
        return None

    def handle(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else b""
        with self.lock:
            fault = next((f for f in self.faults if f.matches(h.command, h.path)), None)
            if fault:
                fault.times -= 1
                fault.hits.append(time.time())
        status = self.answer(h, body, fault)
        with self.lock:
            self.requests.append((time.time(), h.command, h.path, self.payload(body), status))
            self.arrived.notify_all()

    def send(self, h, status, headers, body):
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            with contextlib.suppress(OSError):
                h.wfile.write(body)
        return status

    def answer(self, h, body, fault):
        kind = fault.kind if fault else None
        if kind == "429":
            return self.send(h, 429, [("Content-Type", "application/problem+json"),
                                      ("Retry-After", str(fault.retry_after))],
                             b'{"type":"urn:ietf:params:acme:error:rateLimited",'
                             b'"detail":"injected by the test","status":429}')
        if kind == "500":
            return self.send(h, 500, [("Content-Type", "application/problem+json")],
                             b'{"type":"urn:ietf:params:acme:error:serverInternal",'
                             b'"detail":"injected by the test","status":500}')
        if kind == "noreplace" and (self.payload(body) or {}).get("replaces"):
            return self.send(h, 500, [("Content-Type", "application/problem+json")],
                             b'{"type":"urn:ietf:params:acme:error:serverInternal",'
                             b'"detail":"could not find an order for the given certificate",'
                             b'"status":500}')
        if kind == "notjson":
            return self.send(h, 200, [("Content-Type", "text/html")],
                             b"<html><body>not JSON { [ \"</body></html>\n")
        if kind == "huge":
            return self.send(h, 200, [("Content-Type", "application/json")],
                             b'{"status":"' + b"A" * fault.size)
        if kind == "redirect":
            return self.send(h, 302, [("Location", fault.location)], b"")
        if kind == "delay":
            time.sleep(fault.delay)
        status, headers, rbody = self.forward(h, body)
        if kind == "plain":
            rbody = rbody.replace(b"https://", b"http://")
        if kind == "ari" and status == 200:
            start, end = fault.window(h.path.rsplit("/", 1)[-1])  # the certificate's ARI id
            rbody = json.dumps({"suggestedWindow": {"start": rfc3339(start),
                                                    "end": rfc3339(end)}}).encode()
        return self.send(h, status, headers, rbody)

    def forward(self, h, body):
        try:
            c = http.client.HTTPSConnection("127.0.0.1", self.upstream, timeout=30,
                                            context=self.up_ctx)
            hdrs = {k: v for k, v in h.headers.items()
                    if k.lower() not in ("connection", "content-length", "accept-encoding")}
            c.request(h.command, h.path, body=body if body else None, headers=hdrs)
            r = c.getresponse()
            rbody = r.read()
            headers = [(k, v) for k, v in r.getheaders()
                       if k.lower() not in ("connection", "content-length",
                                            "transfer-encoding")]
            c.close()
            return r.status, headers, rbody
        except OSError:
            return 502, [("Content-Type", "text/plain")], b"Pebble is not there\n"


# --------------------------------------------------------------------------
# Knot: an authoritative server for DNS-01

KNOTD = shutil.which("knotd") or ("/usr/sbin/knotd" if os.access("/usr/sbin/knotd", os.X_OK)
                                  else None)
KNOT_HINT = "Debian's knot (knotd): apt-get install knot (tests/setup.sh does it)"


class Knot:
    """knotd serving zone (with SOA, an NS ns1.ZONE whose name the system
    cannot resolve, and records: {owner: (type, rdata)}) on 127.0.0.1:port,
    updates of it allowed to the TSIG key keyname (hmac-sha256, a random
    secret; self.secret, base64).  bind_key_file(path, secret=None) writes
    the key in BIND's format."""

    def __init__(self, tmp, zone, keyname="acme-update.", records=(), zones=None, owners=None):
        self.tmp = os.path.join(tmp, "knot")
        self.zone, self.keyname = zone.rstrip(".") + ".", keyname
        self.secret = base64.b64encode(os.urandom(32)).decode()
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.log = os.path.join(self.tmp, "knot.log")
        for d in ("run", "db", "zones"):
            os.makedirs(os.path.join(self.tmp, d), exist_ok=True)
        # zones: {zone: records} beside zone (a CNAME-delegated challenge zone)
        every = {self.zone: records}
        every.update({z.rstrip(".") + ".": r for z, r in (zones or {}).items()})
        for z, recs in every.items():
            with open(os.path.join(self.tmp, "zones", z + "zone"), "w") as f:
                f.write("$ORIGIN %s\n$TTL 60\n@ SOA ns1 hostmaster 1 60 60 3600 60\n@ NS ns1\n"
                        % z + "".join("%s %s %s\n" % (o, t, r) for o, (t, r) in recs))
        # owners: the names the key may update (TXT only), as an update-policy
        # that refuses the others; None: any name of the zones
        policy = "" if owners is None else (
            "    update-type: [TXT]\n    update-owner: name\n    update-owner-match: equal\n"
            "    update-owner-name: [%s]\n" % ", ".join(o.rstrip(".") + "." for o in owners))
        self.conf = os.path.join(self.tmp, "knot.conf")
        with open(self.conf, "w") as f:
            f.write("""server:
    rundir: "{t}/run"
    listen: 127.0.0.1@{port}
database:
    storage: "{t}/db"
key:
  - id: {key}
    algorithm: hmac-sha256
    secret: {secret}
acl:
  - id: acme
    key: {key}
    action: update
{policy}template:
  - id: default
    storage: "{t}/zones"
    file: "%s.zone"
    zonefile-sync: -1
zone:
{zones}log:
  - target: stderr
    any: info
""".format(t=self.tmp, port=self.port, key=keyname, secret=self.secret, policy=policy,
           zones="".join("  - domain: %s\n    acl: acme\n" % z for z in every)))
        self.p = None

    def bind_key_file(self, path, secret=None):
        with open(path, "w") as f:
            f.write('key "%s" {\n\talgorithm hmac-sha256;\n\tsecret "%s";\n};\n'
                    % (self.keyname.rstrip("."), secret or self.secret))
        os.chmod(path, 0o600)
        return path

    def start(self):
        with open(self.log, "ab") as out:
            self.p = subprocess.Popen([KNOTD, "-c", self.conf], stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=subprocess.STDOUT)
        wait_for(lambda: self.p.poll() is None and "server started" in tail(self.log, 1 << 20),
                 10, "knotd started (%s)" % tail(self.log))
        return self

    def stop(self):
        if self.p is not None:
            stop_process(self.p)
            self.p = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def updates(self):
        """The updates that changed the zone (its log's "DDNS, finished, serial
        N -> M" lines; one that changed nothing is not counted)."""
        return tail(self.log, 1 << 22).count("DDNS, finished, serial")


# --------------------------------------------------------------------------
# BIND 9: the other authoritative server of DNS-01's tests

NAMED = shutil.which("named") or ("/usr/sbin/named" if os.access("/usr/sbin/named", os.X_OK)
                                  else None)
NAMED_HINT = "Debian's bind9 (named): apt-get install bind9 (tests/setup.sh does it)"


class Bind(Knot):
    """named (BIND 9) in the foreground serving the same zones as Knot (the
    same arguments) on 127.0.0.1:port, updates allowed to the TSIG key by
    an update-policy: `grant KEY zonesub ANY` for every name, or with owners
    `grant KEY name OWNER TXT` for each (the others refused, as the man
    page's example policy refuses another name)."""

    def __init__(self, tmp, zone, keyname="acme-update.", records=(), zones=None, owners=None):
        self.tmp = os.path.join(tmp, "bind")
        self.zone, self.keyname = zone.rstrip(".") + ".", keyname
        self.secret = base64.b64encode(os.urandom(32)).decode()
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.log = os.path.join(self.tmp, "named.log")
        os.makedirs(self.tmp, exist_ok=True)
        every = {self.zone: records}
        every.update({z.rstrip(".") + ".": r for z, r in (zones or {}).items()})
        key = keyname.rstrip(".")
        grant = "grant %s zonesub ANY;" % key if owners is None else " ".join(
            "grant %s name %s TXT;" % (key, o.rstrip(".") + ".") for o in owners)
        zconf = ""
        for z, recs in every.items():
            with open(os.path.join(self.tmp, z + "zone"), "w") as f:
                f.write("$ORIGIN %s\n$TTL 60\n@ SOA ns1 hostmaster 1 60 60 3600 60\n@ NS ns1\n"
                        "ns1 A 127.0.0.1\n" % z
                        + "".join("%s %s %s\n" % (o, t, r) for o, (t, r) in recs))
            zconf += 'zone "%s" { type primary; file "%s/%szone"; update-policy { %s }; };\n' % (
                z, self.tmp, z, grant)
        self.conf = os.path.join(self.tmp, "named.conf")
        with open(self.conf, "w") as f:
            f.write("""options {{
    directory "{t}"; pid-file "{t}/named.pid"; session-keyfile "{t}/session.key";
    listen-on port {port} {{ 127.0.0.1; }}; listen-on-v6 {{ none; }};
    recursion no; dnssec-validation no; notify no;
}};
controls {{ }};
key "{key}" {{ algorithm hmac-sha256; secret "{secret}"; }};
logging {{ channel e {{ stderr; severity info; print-time yes; }};
          category default {{ e; }}; category update {{ e; }}; category security {{ e; }}; }};
{zones}""".format(t=self.tmp, port=self.port, key=key, secret=self.secret, zones=zconf))
        self.p = None

    def start(self):
        with open(self.log, "ab") as out:
            self.p = subprocess.Popen([NAMED, "-g", "-4", "-c", self.conf],
                                      stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT)
        wait_for(lambda: self.p.poll() is None and "running" in tail(self.log, 1 << 20),
                 20, "named running (%s)" % tail(self.log))
        return self

    def updates(self):
        """The updates that changed a zone (named's "adding an RR" lines)."""
        return tail(self.log, 1 << 22).count(": adding an RR at")


class Resolver(Bind):
    """named as a recursive resolver on 127.0.0.1:port for zones (names),
    each forwarded to upstream (a Knot's or Bind's port): what follows a
    CNAME from one zone into another, as a CA's resolver does (Pebble's own
    lookup takes the answer as it comes and follows none)."""

    def __init__(self, tmp, zones, upstream):  # pylint: disable=super-init-not-called
        self.tmp = os.path.join(tmp, "resolver")
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.log = os.path.join(self.tmp, "named.log")
        os.makedirs(self.tmp, exist_ok=True)
        self.conf = os.path.join(self.tmp, "named.conf")
        with open(self.conf, "w") as f:
            f.write("""options {{
    directory "{t}"; pid-file "{t}/named.pid"; session-keyfile "{t}/session.key";
    listen-on port {port} {{ 127.0.0.1; }}; listen-on-v6 {{ none; }};
    recursion yes; allow-recursion {{ 127.0.0.1; }}; dnssec-validation no; notify no;
    max-cache-ttl 1; max-ncache-ttl 1;
}};
controls {{ }};
logging {{ channel e {{ stderr; severity info; }}; category default {{ e; }}; }};
{zones}""".format(t=self.tmp, port=self.port, zones="".join(
                'zone "%s" { type forward; forward only; forwarders { 127.0.0.1 port %d; }; };\n'
                % (z, upstream) for z in zones)))
        self.p = None
