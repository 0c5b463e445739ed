"""clusterlab: issue 57's gatling cluster in a network lab, as ops/test_cluster_lab.py tests
it and bench/compare-cluster measures it.

The lab (bench/netlab) has six hosts: lb (Debian's haproxy), g1, g2 and g3 (a gatling and
an etcd member each), ca (Pebble and pebble-challtestsrv) and c1 (the client).  Every
gatling runs `-p 80 -e 443 -y http,https -Y <lb> -k /healthz -g 3 --acme ... --cluster
etcd=<g1>,<g2>,<g3> --cluster-name lab` with its own -C and --acme-dir.  haproxy runs
bench/lb's configuration (dist/haproxy.cfg's defaults and backend gatling: lb:80 round
robin to the nodes' port 80 with a PROXY v2 header), lb:443 passed through round robin to
the nodes' port 443 with a PROXY v2 header, and a frontend per node (lb:800N to gN:80,
lb:440N to gN:443) through which one node is reached alone.  pebble-challtestsrv answers
every name with lb's address, so Pebble's HTTP-01 goes to lb:80 and its TLS-ALPN-01 to
lb:443, whichever node the balancer picks then.  Pebble's certificate names ca's address
(dist/mkcert.sh PKI ADDRESS), which the nodes' --acme-ca-root trusts; its chaos is on
(nonces refused, authorizations reused), but for its random validation delay
(PEBBLE_VA_NOSLEEP=1), which would cost up to 15 s an order.

g1 and g2 want gatling.test (HTTP-01 first, gatling's default) and race for its lock; g3
wants www.gatling.test by TLS-ALPN-01 alone (--acme-challenge), so both challenges go
through the balancer.  ClusterLab brings it all up but Pebble; start_pebble() starts it
(once haproxy has every node UP, so that no validation meets a node not yet listening:
the clients retry the directory meanwhile), wait_certificates() waits for both
certificates on every node.  Root, network namespaces, haproxy, etcd and Pebble are
needed: LAB_MARKS skips a test module without them, compare-cluster checks them itself.
"""
import concurrent.futures
import contextlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import types

import pytest

import acmelab
from acmelab import Pebble
from conftest import wait_for
from test_acme_https import BACKOFF, BODY, NAME, cert_serial, children, pairs
from test_cluster import CGI, ETCD, MKCERT, etcd_members, with_secret
from test_lb import Gatling, Haproxy, needs_lab

NODES = ("g1", "g2", "g3")
NAMES = (NAME, "www." + NAME)
# who wants which name: g1 and g2 race for gatling.test (HTTP-01), g3 alone orders
# www.gatling.test by TLS-ALPN-01
WANTS = {"g1": ((NAME,), ()), "g2": ((NAME,), ()),
         "g3": ((NAMES[1],), ("--acme-challenge", "tls-alpn-01"))}
HTTP_PORT, HTTPS_PORT = 8000, 4400  # + N: lb's frontend for node gN
ISSUE_TIMEOUT = 60
HOLDS = "holds the cluster's ACME lock for %s"
# what a test module in the lab needs, skipped saying which is missing
LAB_MARKS = [
    pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed "
                       "(apt-get install haproxy; tests/setup.sh does)"),
    pytest.mark.skipif(not ETCD, reason="needs etcd (Debian's etcd-server: tests/setup.sh)"),
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    needs_lab,
]

# after bench/lb's configuration (frontend www on lb:80, dist's backend gatling): HTTPS
# passed through round robin, and a way to each node alone.  The checks of the HTTPS
# backends are TCP connects (with the PROXY header, as the traffic): a node serves no
# certificate before its first order.
TLS_RR = """\
frontend tls
    mode tcp
    option tcplog
    bind %(lb)s:443
    default_backend tls

backend tls
    mode tcp
    balance roundrobin
"""
TLS_SERVER = "    server %(g)s %(addr)s:443 send-proxy-v2 check inter 1s fall 2 rise 2\n"
ONE_NODE = """
frontend %(g)s-https
    mode tcp
    option tcplog
    bind %(lb)s:%(https)d
    default_backend %(g)s-https

backend %(g)s-https
    mode tcp
    server %(g)s %(addr)s:443 send-proxy-v2 check inter 1s fall 2 rise 2

frontend %(g)s-http
    mode http
    bind %(lb)s:%(http)d
    default_backend %(g)s-http

backend %(g)s-http
    mode http
    http-reuse never
    server %(g)s %(addr)s:80 send-proxy-v2 check inter 1s fall 2 rise 2
"""


def haproxy_sections(addrs):
    """The sections after bench/lb's configuration: TLS_RR with every node, ONE_NODE for
    each."""
    out = TLS_RR % {"lb": addrs["lb"]}
    out += "".join(TLS_SERVER % {"g": g, "addr": addrs[g]} for g in NODES)
    for i, g in enumerate(NODES, 1):
        out += ONE_NODE % {"g": g, "addr": addrs[g], "lb": addrs["lb"],
                           "https": HTTPS_PORT + i, "http": HTTP_PORT + i}
    return out


def docroot(tmp, c1_addr):
    """The nodes' site: BODY as /, a CGI whose answers the cache keeps a minute, and
    PURGEs allowed from c1 (the client address haproxy's PROXY header carries)."""
    www = tmp / "www"
    www.mkdir()
    (www / "index.html").write_bytes(BODY)
    (www / ".cache").write_text("ttl 60\npurge %s\n" % c1_addr)
    (www / "p.cgi").write_text(CGI)
    os.chmod(str(www / "p.cgi"), 0o755)
    return str(www)


def node(lab, g, addrs, pebble, etcd_urls, www, tmp, more=()):
    """gatling on host g, a node of cluster lab wanting WANTS[g]; more: options after."""
    names, own = WANTS[g]
    certs, state = tmp / ("certs-" + g), tmp / ("acme-" + g)
    certs.mkdir()
    # etcd over plain http between the lab's hosts (a virtual network of one
    # machine): insecure, said at start; the values are sealed all the same
    return Gatling(lab.host(g), addrs[g], 80, addrs["lb"], www, tmp, tls_port=443, extra=[
        "-C", str(certs), "-w", "\\.cgi$", "--acme", "admin@" + NAME,
        "--acme-ca", pebble.directory, "--acme-ca-root", roots_file(pebble, tmp),
        "--acme-dir", str(state), "--acme-names", ",".join(names),
        "--cluster", "etcd=" + with_secret(etcd_urls) + ",insecure", "--cluster-name", "lab"] +
        list(own) + list(more),
        # the client's first retry after a failure (Pebble not there yet) 2 s later, not 60
        env={"GATLING_TEST_ACME_BACKOFF": str(BACKOFF)})


def roots_file(pebble, tmp):
    """The nodes' --acme-ca-root: the lab PKI's root (Pebble's HTTPS) now, and
    Pebble's issuing root once Pebble started (ClusterLab.start_pebble), which
    a certificate from etcd must chain to (gatling reads the file again)."""
    path = str(tmp / "roots.pem")
    if not os.path.exists(path):
        shutil.copyfile(pebble.pki + "/ca.pem", path)
    return path


def said(g, pattern):
    """The lines of gatling g's error log that match pattern."""
    return [l for l in g.errlog() if re.search(pattern, l)]


def served_serial(host, addr, port, name, root_pem=None):
    """The serial of the leaf that addr:port serves for SNI name, from lab host host
    (verified against root_pem, Pebble's root, when given); None when the handshake
    fails (no certificate for the name yet, or not Pebble's)."""
    ctx = ssl.create_default_context(cadata=root_pem) if root_pem else \
        ssl._create_unverified_context()
    with host.inside(), contextlib.suppress(OSError):
        with socket.create_connection((addr, port), timeout=3) as s, \
                ctx.wrap_socket(s, server_hostname=name) as t:
            return cert_serial(t.getpeercert(binary_form=True))
    return None


def lock_processes(g):
    """The processes of node g that hold its ACME locks: its ACME client (under its
    acme-keeper) and its cluster side process (under its cluster-keeper, the one that
    keeps the lease alive).  [(pid, comm)]."""
    out = []
    for keeper, kid in (("acme-keeper", "acme-client"), ("cluster-keeper", "gatling-cluster")):
        for p, comm in children(g.pid):
            if comm.startswith(keeper):
                out += [(k, c) for k, c in children(p) if c.startswith(kid)]
    return out


class ClusterLab:
    """The lab, its three etcd members, the three nodes (more: options each gets after
    its own) and haproxy UP; Pebble (profiles: its certificate profiles beside the
    default) made but not started.  close() stops it all and removes the lab."""

    def __init__(self, tmp, lab="clustertest", profiles=None, more=(), hosts=()):
        from benchkit import netlab
        self.t0 = time.monotonic()
        self.tmp = tmp
        os.chmod(str(tmp), 0o755)
        self.lab = netlab.Lab(["lb"] + list(NODES) + ["ca", "c1"] + list(hosts), lab=lab)
        self.procs, self.members, self.pebble = [], [], None
        try:
            self._up(profiles, more)
        except BaseException:
            self.close()
            raise

    def _up(self, profiles, more):
        lab, tmp = self.lab, self.tmp
        self.addrs = addrs = {h.name: h.addrs[0] for h in lab.hosts}
        self.pki = str(tmp / "pki")
        subprocess.run(["sh", MKCERT, self.pki, addrs["ca"]], check=True,
                       capture_output=True, timeout=60)
        self.members = etcd_members(str(tmp), hosts=[lab.host(g) for g in NODES])
        self.pebble = Pebble(str(tmp), self.pki, 80, 443, host=lab.host("ca"),
                             target=addrs["lb"], profiles=profiles)
        self.www = docroot(tmp, addrs["c1"])
        urls = ",".join(m.url for m in self.members)
        self.gatlings = {g: node(lab, g, addrs, self.pebble, urls, self.www, tmp, more)
                         for g in NODES}
        self.procs += self.gatlings.values()
        self.haproxy = Haproxy(lab.host("lb"), tmp, addrs["lb"],
                               {g: addrs[g] for g in NODES}, extra=haproxy_sections(addrs))
        self.procs.append(self.haproxy)
        self.haproxy.wait_up()

    def start_pebble(self):
        """Pebble started; the time it was (monotonic)."""
        self.pebble.start()
        self.started = time.monotonic()
        with open(roots_file(self.pebble, self.tmp), "a") as f:
            f.write(self.pebble.root())
        return self.started

    def certs(self):
        return [str(self.tmp / ("certs-" + g)) for g in NODES]

    def wait_certificates(self, timeout=ISSUE_TIMEOUT):
        """Until every node's -C has both certificates, the same ones; then the namespace
        the tests take (lab, addrs, gatlings, haproxy, pebble, root, serials, issued,
        tmp, members: the etcd members, host by host as NODES).  AssertionError with the nodes' and Pebble's last words otherwise."""
        certs = self.certs()
        try:
            wait_for(lambda: len(pairs(certs[0])) == 2 and all(pairs(c) == pairs(certs[0])
                                                                for c in certs),
                     timeout, "both certificates on every node", step=0.25)
        except AssertionError as e:
            raise AssertionError("%s: %s\n%s\n%s" % (
                e, [pairs(c) for c in certs], "\n".join(
                    l for g in NODES for l in self.gatlings[g].errlog()[-8:]),
                self.pebble.log()[-2000:])) from None
        self.issued = time.monotonic()
        return types.SimpleNamespace(lab=self.lab, addrs=self.addrs, gatlings=self.gatlings,
                                     haproxy=self.haproxy, pebble=self.pebble,
                                     root=self.pebble.root(), serials=pairs(certs[0]),
                                     issued=self.issued, tmp=self.tmp, members=self.members)

    def close(self):
        # at once: each gatling serves out its -g grace on SIGTERM (3 s)
        with concurrent.futures.ThreadPoolExecutor(max(1, len(self.procs))) as ex:
            list(ex.map(lambda p: p.stop(), self.procs))
        self.procs = []
        if self.pebble:
            self.pebble.close()
        for m in self.members:
            m.stop()
        self.members = []
        self.lab.down()
