"""--acme with --cluster (issue 57): two gatling nodes, each with its own -C
and --acme-dir, one etcd and Pebble.  Pebble validates on node A's ports only,
and node B, started first, holds the cluster's ACME lock: its challenge
reaches A through etcd (A's side process writes it into A's state
directory), B's client orders once, and the certificate and key reach A's -C
through etcd; both serve it.  Then B is SIGKILLed: its lease runs out and A
takes the lock over.  Skipped, saying so, without etcd or Pebble."""
import os
import shutil
import signal
import time

import pytest

import acmelab
from acmelab import Pebble, wait_for
from test_acme_https import BACKOFF, PLAIN, Site, logged, pairs, served
from test_cluster import Etcd

pytestmark = [
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    pytest.mark.skipif(not shutil.which("etcd"),
                       reason="needs etcd (Debian's etcd-server: tests/setup.sh)"),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
]

HOLDS = "holds the cluster's ACME lock: its ACME client orders"


@pytest.fixture
def pki():
    from conftest import test_pki
    return test_pki()


def test_one_order_for_the_cluster(tmp_path, pki):
    etcd = Etcd(str(tmp_path)).start()
    a = Site(str(tmp_path / "a"))
    b = Site(str(tmp_path / "b"))
    extra = ("--cluster", "etcd=" + etcd.url, "--cluster-name", "acme")
    try:
        with Pebble(a.tmp, pki, a.http, a.https) as pebble:
            pebble.start()
            with b.gatling(pebble.directory, extra) as nb:
                wait_for(lambda: logged(nb, HOLDS), 15, "B holding the lock: %s" % nb.errlog)
                with a.gatling(pebble.directory, extra) as na:
                    wait_for(lambda: logged(na, "another node of the cluster holds"), 15,
                             "A's client waiting: %s" % na.errlog[-10:])
                    root = pebble.root()
                    der = served(na, root, what="A serving the certificate B's client got")
                    assert served(nb, root) == der
                    assert pairs(a.certs) == pairs(b.certs) and len(pairs(a.certs)) == 1
                    assert logged(na, "installed from the cluster")
                    time.sleep(3 * BACKOFF)  # a second order would come by now
                    assert pebble.orders() == 1, pebble.log()[-3000:]
                    assert not logged(na, HOLDS)
                    # B dies without a word: its lease (5 s) runs out, A takes over
                    os.kill(nb.pid, signal.SIGKILL)
                    nb.process.wait(10)
                    nb.exit_checked = True  # killed on purpose
                    wait_for(lambda: logged(na, HOLDS), 20, "A taking the lock over: %s"
                             % na.errlog[-10:])
                    wait_for(lambda: logged(na, "holds the cluster's ACME lock now"), 10,
                             "A's client ordering: %s" % na.errlog[-10:])
                    time.sleep(2 * BACKOFF)
                    assert pebble.orders() == 1, "the certificate A installed is current"
    finally:
        etcd.stop()
