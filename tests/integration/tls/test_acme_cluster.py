"""--acme with --cluster (issue 57): gatling nodes, each with its own -C and
--acme-dir, one etcd and Pebble (its chaos on: nonces refused, authorizations
reused).  Pebble validates on node A's ports only, so a challenge of an order
node B placed reaches A through etcd (A's side process writes it into A's
state directory).  Shown: with two nodes and two names, each name is ordered
once for the cluster (Pebble's log counts orders and certificates), by the
node that holds that name's lock (seen in /metrics), both nodes serve both
certificates, and the cluster has one account (one key, one URL; Pebble made
one); the lock holder SIGKILLed mid-order hands the order over (at most one
duplicate, every name served); a holder cut off from etcd (its etcd member
stopped) finishes its order, serves it, lets another node take the lock,
and syncs when etcd is back.  Skipped, saying so, without etcd or Pebble."""
import glob
import os
import re
import shutil
import signal
import threading
import time

import pytest

import acmelab
from acmelab import Fault, FaultProxy, Pebble, wait_for
from test_acme_https import BACKOFF, NAME, PLAIN, Site, logged, metric, metrics, pairs, served
from test_cluster import Etcd, etcd_members, with_secret

pytestmark = [
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    pytest.mark.skipif(not shutil.which("etcd"),
                       reason="needs etcd (Debian's etcd-server: tests/setup.sh)"),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
]

NAMES = (NAME, "www." + NAME)
HOLDS = "holds the cluster's ACME lock for %s"


@pytest.fixture
def lab(tmp_path):
    """etcd, two sites (A and B) and Pebble validating on A's ports, started."""
    from conftest import test_pki
    etcd = Etcd(str(tmp_path)).start()
    a = Site(str(tmp_path / "a"))
    b = Site(str(tmp_path / "b"))
    try:
        with Pebble(a.tmp, test_pki(), a.http, a.https) as pebble:
            pebble.start()
            yield etcd, a, b, pebble
    finally:
        etcd.stop()


def roots(pebble, site):
    """--acme-ca-root for site: the suite's root (Pebble's HTTPS) and Pebble's
    issuing root, which a certificate from etcd must chain to (made anew at
    each Pebble start)."""
    path = os.path.join(site.tmp, "roots.pem")
    with open(path, "w") as f:
        f.write(open(pebble.pki + "/ca.pem").read() + pebble.root())
    return ("--acme-ca-root", path)


def extra(etcd, name, pebble, site, names=NAMES):
    return ("--cluster", "etcd=" + with_secret(etcd.url), "--cluster-name", name,
            "--acme-names", ",".join(names)) + roots(pebble, site)


class LockWatch:
    """Polls both nodes' /metrics (gatling_cluster_acme_lock) every 0.1 s:
    seen[node][name] is whether that node ever showed the lock held, and
    both lists the times two nodes showed one name's lock at once."""

    def __init__(self, nodes):
        self.nodes, self.seen, self.both = nodes, {}, []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.wait(0.1):
            now = {}
            for label, srv in self.nodes.items():
                try:
                    text = metrics(srv)
                except (OSError, AssertionError):
                    continue
                for n in NAMES:
                    v = metric(text, "gatling_cluster_acme_lock", n)
                    if v is not None:
                        self.seen.setdefault(label, {}).setdefault(n, 0)
                        self.seen[label][n] |= int(v)
                        now.setdefault(n, []).append(int(v))
            self.both += [n for n, vs in now.items() if sum(vs) > 1]

    def end(self):
        self.stop.set()
        self.t.join(5)


def account(site):
    """The (key, URL) of the one account of site's state directory."""
    keys = glob.glob(os.path.join(site.state, "account", "*", "key.pem"))
    assert len(keys) == 1, keys
    with open(keys[0]) as f:
        key = f.read()
    with open(os.path.join(os.path.dirname(keys[0]), "url")) as f:
        return key, f.read().split()[0]


def test_each_name_ordered_once(lab):
    etcd, a, b, pebble = lab
    """Both nodes want both names at once: each name is ordered once, by the
    node that got its lock (one lock line each in the logs, 1 in that node's
    /metrics while it ordered, never on both nodes at once, 0 on both after),
    and both nodes serve both certificates."""
    t0 = time.monotonic()
    with b.gatling(pebble.directory, extra(etcd, "two", pebble, b)) as nb, \
            a.gatling(pebble.directory, extra(etcd, "two", pebble, a)) as na:
        watch = LockWatch({"a": na, "b": nb})
        try:
            root = pebble.root()
            der = served(na, root, what="A serving %s" % NAME)
            wait_for(lambda: len(pairs(a.certs)) == 2 and pairs(a.certs) == pairs(b.certs),
                     60, "both names on both nodes: %s %s\n%s" % (
                         pairs(a.certs), pairs(b.certs), "\n".join(na.errlog[-20:])))
            assert served(nb, root) == der
            print("start to both names' certificates on both nodes: %.1f s"
                  % (time.monotonic() - t0))
            time.sleep(3 * BACKOFF)  # a second order would come by now
        finally:
            watch.end()
        assert pebble.orders() == 2, pebble.log()[-3000:]
        assert pebble.issued() == 2, pebble.log()[-3000:]
        assert pairs(a.certs) == pairs(b.certs)
        for n in NAMES:  # each name's lock taken once, by one node
            took = logged(na, HOLDS % re.escape(n)) + logged(nb, HOLDS % re.escape(n))
            assert len(took) == 1, (n, took, "\n".join(na.errlog), "\n".join(nb.errlog))
            assert any(watch.seen.get(k, {}).get(n) for k in "ab"), (n, watch.seen)
            assert watch.seen["a"].get(n) is not None and \
                watch.seen["b"].get(n) is not None, watch.seen
        assert not watch.both, "two nodes held one lock at once: %s" % watch.both
        # the locks let go once the certificates were in etcd
        for srv in (na, nb):
            text = metrics(srv)
            assert [metric(text, "gatling_cluster_acme_lock", n) for n in NAMES] == \
                [0, 0], text
        assert pebble.accounts() == 1, pebble.log()[-3000:]


def test_one_account(lab):
    """Two nodes started together, each with a name of its own (so both
    order, and both need the account at once): one account for the cluster
    -- the same key (etcd's) and URL in both state directories, and Pebble
    made one."""
    etcd, a, b, pebble = lab
    with b.gatling(pebble.directory, extra(etcd, "acct", pebble, b, NAMES[1:])), \
            a.gatling(pebble.directory, extra(etcd, "acct", pebble, a, NAMES[:1])) as na:
        served(na, pebble.root(), what="A serving %s" % NAME)
        wait_for(lambda: len(pairs(b.certs)) == 2 and pairs(a.certs) == pairs(b.certs),
                 60, "both names on both nodes: %s %s" % (pairs(a.certs), pairs(b.certs)))
        assert pebble.orders() == 2, pebble.log()[-3000:]
        assert account(a) == account(b)
        cahash = os.path.basename(glob.glob(os.path.join(a.state, "account", "*"))[0])
        assert etcd.get("/gatling/acct/acme/account/" + cahash) == account(a)[0]
        assert pebble.accounts() == 1, pebble.log()[-3000:]


def test_holder_killed_mid_order(lab):
    """B holds the lock and orders; it is SIGKILLed while the proxy holds its
    certificate download: its lease (5 s) runs out, and A's client, which
    wanted the name all along, gets the lock and orders.  The name is served
    by A, with at most one certificate more than one (B's was issued)."""
    etcd, a, b, pebble = lab
    names = (NAME,)
    with FaultProxy(pebble.pki, pebble.acme) as proxy:
        f = proxy.add(Fault("delay", "/certZ/", "POST", delay=8))
        with b.gatling(proxy.directory, extra(etcd, "kill", pebble, b, names)) as nb:
            wait_for(lambda: logged(nb, HOLDS % NAME), 15, "B holding the lock: %s"
                     % nb.errlog[-10:])
            with a.gatling(proxy.directory, extra(etcd, "kill", pebble, a, names)) as na:
                wait_for(lambda: f.hits, 60, "B's certificate download")
                assert logged(na, "another node of the cluster holds"), na.errlog[-10:]
                os.kill(nb.pid, signal.SIGKILL)
                nb.process.wait(10)
                nb.exit_checked = True  # killed on purpose
                assert not pairs(b.certs), "B killed before its certificate came"
                wait_for(lambda: logged(na, HOLDS % NAME), 20,
                         "A taking the lock over: %s" % na.errlog[-10:])
                served(na, pebble.root(), what="A serving the certificate it ordered")
                time.sleep(3 * BACKOFF)
                assert pebble.orders() <= 2 and pebble.issued() <= 2, pebble.log()[-3000:]


def test_holder_cut_off_from_etcd(tmp_path):
    """A partition: three etcd members, A on members 1 and 2, B on member 3.
    B holds the lock and orders; member 3 is stopped while the proxy holds
    B's certificate download (10 s), so B is cut off from etcd: it says so,
    lets go of its locks after their lease's 5 s (its client starts no new
    order), finishes the order in flight and serves that certificate; A,
    which wanted the name, takes the lock and orders (one duplicate at
    most).  Member 3 back: B syncs (etcd answers again) and both nodes end
    with the same certificate, the newer one."""
    from conftest import test_pki
    ms = etcd_members(str(tmp_path))
    a = Site(str(tmp_path / "a"))
    b = Site(str(tmp_path / "b"))
    ea = ("--cluster", "etcd=" + with_secret("%s,%s" % (ms[0].url, ms[1].url)),
          "--cluster-name", "cut", "--acme-names", NAME)
    eb = ("--cluster", "etcd=" + with_secret(ms[2].url)) + ea[2:]
    try:
        with Pebble(a.tmp, test_pki(), a.http, a.https) as pebble, \
                FaultProxy(pebble.pki, pebble.acme) as proxy:
            pebble.start()
            ea, eb = ea + roots(pebble, a), eb + roots(pebble, b)
            f = proxy.add(Fault("delay", "/certZ/", "POST", delay=10))
            with b.gatling(proxy.directory, eb) as nb:
                wait_for(lambda: logged(nb, HOLDS % NAME), 15, "B holding the lock: %s"
                         % nb.errlog[-10:])
                with a.gatling(proxy.directory, ea) as na:
                    wait_for(lambda: f.hits, 60, "B's certificate download")
                    ms[2].stop(keep=True)
                    cut = time.monotonic()
                    wait_for(lambda: logged(nb, "the node serves what it has and tries again"),
                             10, "B saying etcd is gone: %s" % nb.errlog[-5:])
                    wait_for(lambda: logged(nb, "locks held here were lost"), 15,
                             "B letting go of its locks: %s" % nb.errlog[-5:])
                    wait_for(lambda: logged(na, HOLDS % NAME), 20,
                             "A taking the lock over: %s" % na.errlog[-10:])
                    root = pebble.root()
                    served(nb, root, what="B serving the certificate it got cut off")
                    assert time.monotonic() - cut > 5 and logged(nb, "%s: certificate \\S+ "
                                                                     "installed" % NAME)
                    served(na, root, what="A serving")
                    assert not logged(nb, "answers again")
                    ms[2].start()
                    wait_for(lambda: logged(nb, "answers again"), 30,
                             "B syncing again: %s" % nb.errlog[-5:])
                    wait_for(lambda: pairs(a.certs) == pairs(b.certs), 30,
                             "one certificate on both: %s %s" % (pairs(a.certs), pairs(b.certs)))
                    assert served(na, root) == served(nb, root)
                    time.sleep(3 * BACKOFF)
                    assert pebble.orders() <= 2 and pebble.issued() <= 2, pebble.log()[-3000:]
                    assert pairs(a.certs) == pairs(b.certs)
    finally:
        for m in ms:
            m.stop()
