"""A second CA (issue 66, item 4; gatling/acme/acme_ca.c): `--acme-ca`
given twice, two Pebble instances, each with its own root, chaos on (5% of
good nonces rejected, authorizations reused half the time).

  - the first CA down (nobody listens at its directory): the order goes to
    the second at once, its certificate served (verified against the second
    Pebble's root), the move and the issuer logged, the issuer in /metrics;
  - the first CA refusing every newOrder with 429 rateLimited (a
    fault-injecting proxy in front of it): the second one's certificate
    served, the first never made an order;
  - the first CA answering but every validation failing (its validation
    ports lead nowhere): three failures there, then the second CA;
  - an --acme-eab after each --acme-ca: each binding goes to its own CA
    (the proxy in front of each sees that CA's kid in newAccount).
"""
import base64
import json
import os

import pytest

import acmelab
from acmelab import Fault, FaultProxy, Pebble, free_port
from test_acme_https import (PLAIN, Site, logged, metrics, served, wait_for, x509)

pytestmark = [
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
]


def pebble_in(site, sub, http=None, https=None, **kw):
    tmp = os.path.join(site.tmp, sub)
    os.makedirs(tmp, exist_ok=True)
    return Pebble(tmp, pki_dir(), http or site.http, https or site.https, **kw)


def pki_dir():
    from conftest import test_pki
    return test_pki()


def issuer_cn(pem):
    from cryptography.x509.oid import NameOID
    cert = x509().load_pem_x509_certificate(pem.encode())
    return cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


def issued_by(srv, second, since=0):
    """The log line that says the certificate came from second, and /metrics'."""
    cn = issuer_cn(second.intermediate())
    line = wait_for(lambda: logged(srv, r"certificate \S+ installed.*issued by %s \(%s\)"
                                   % (cn, second.directory), since), 15,
                    "the issuer logged (stderr:\n%s)" % "\n".join(srv.errlog[-20:]))
    text = wait_for(lambda: (lambda t: t if 'issuer="%s"' % cn in t else None)(metrics(srv)),
                    15, "the issuer in /metrics")
    assert 'gatling_acme_certificate_issuer{name="gatling.test",issuer="%s"} 1' % cn in text
    return line[0]


def test_first_ca_down_second_serves(tmp_path):
    site = Site(str(tmp_path))
    dead = "https://127.0.0.1:%d/dir" % free_port()
    with pebble_in(site, "second") as second:
        second.start()
        with site.gatling(dead, ["--acme-ca", second.directory]) as srv:
            der = served(srv, second.root())
            assert x509().load_der_x509_certificate(der).issuer.rfc4514_string()
            moved = logged(srv, r"gatling\.test: %s failed on its side .*goes to %s now"
                           % (dead, second.directory))
            assert moved, "\n".join(srv.errlog[-20:])
            print(moved[0])
            print(issued_by(srv, second))
            assert second.issued() == 1


def test_first_ca_rate_limited_second_serves(tmp_path):
    site = Site(str(tmp_path))
    with pebble_in(site, "first") as first, pebble_in(site, "second") as second, \
            FaultProxy(pki_dir(), first.acme) as proxy:
        first.start(), second.start()
        proxy.add(Fault("429", "/order-plz", method="POST", times=1000, retry_after=3600))
        with site.gatling(proxy.directory, ["--acme-ca", second.directory]) as srv:
            served(srv, second.root())
            line = logged(srv, r"gatling\.test: %s failed on its side .*rateLimited.*goes to %s"
                          % (proxy.directory, second.directory))
            assert line, "\n".join(srv.errlog[-20:])
            print(issued_by(srv, second))
            assert first.orders() == 0 and len(proxy.seen("/order-plz", "POST")) >= 1


def test_failures_at_first_ca_move_on_after_retries(tmp_path):
    site = Site(str(tmp_path))
    # the first CA validates on ports nobody listens on: each attempt fails there
    with pebble_in(site, "first", http=free_port(), https=free_port()) as first, \
            pebble_in(site, "second") as second:
        first.start(), second.start()
        with site.gatling(first.directory, ["--acme-ca", second.directory]) as srv:
            served(srv, second.root(), timeout=120)
            fails = logged(srv, r"gatling\.test: .*\(failure \d+, next attempt")
            assert len(fails) == 3, "\n".join(srv.errlog[-20:])
            assert logged(srv, r"3 failures in a row at %s: the next attempt goes to %s"
                          % (first.directory, second.directory))
            assert first.orders() >= 3 and first.issued() == 0
            print(issued_by(srv, second))


def test_each_ca_gets_its_own_eab(tmp_path):
    site = Site(str(tmp_path))
    with pebble_in(site, "first") as first, pebble_in(site, "second") as second, \
            FaultProxy(pki_dir(), first.acme) as p1, FaultProxy(pki_dir(), second.acme) as p2:
        # 32 bytes: go-jose wants an HS256 key of the hash's size at least
        key = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        with_eab(first, "kid-one", key), with_eab(second, "kid-two", key)
        first.start(), second.start()
        # the first makes the account, then refuses every order
        p1.add(Fault("429", "/order-plz", method="POST", times=1000, retry_after=3600))
        with site.gatling(p1.directory, ["--acme-eab", "kid-one:" + key, "--acme-ca",
                                         p2.directory, "--acme-eab", "kid-two:" + key]) as srv:
            try:
                served(srv, second.root())
            except AssertionError:
                raise AssertionError("\n".join(srv.errlog[-20:])) from None
            for proxy, kid in ((p1, "kid-one"), (p2, "kid-two")):
                acct = [r for r in proxy.seen("/sign-me-up", "POST") if r[3]]
                assert acct and {eab_kid(r[3]) for r in acct} == {kid}, acct


def eab_kid(payload):
    prot = payload["externalAccountBinding"]["protected"]
    return json.loads(base64.urlsafe_b64decode(prot + "=" * (-len(prot) % 4)))["kid"]


def with_eab(pebble, kid, key):
    """Pebble told the EAB key kid (its config's externalAccountMACKeys)."""
    with open(pebble.conf) as f:
        conf = json.load(f)
    conf["pebble"]["externalAccountMACKeys"] = {kid: key}
    with open(pebble.conf, "w") as f:
        json.dump(conf, f)
    return pebble
