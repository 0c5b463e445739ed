"""DNS-01 as admins delegate it (issue 66, items 3; gatling/acme/acme_dns.c):
`_acme-challenge.NAME` a CNAME into a zone that takes updates, so the main
zone's key never needs update rights.  Against BIND 9 (named) and Knot, each
serving the main zone dns.test and the challenge zone chal.test on a
loopback port, updates allowed to one TSIG key by an update policy
(acmelab.Bind, acmelab.Knot), with Pebble resolving through the same server
and its chaos on.

  - the CNAME followed: the wildcard certificate issued and served, the TXT
    record added at the CNAME's target in chal.test and gone afterwards;
  - a policy that refuses the target name (it allows another): the check
    before the order fails with what the server answered (BIND: REFUSED;
    Knot: NOTAUTH, TSIG BADKEY), the name and the zone, and no order is ever
    made, however many attempts (Pebble's log counts them);
  - a CNAME loop: said, no order;
  - what the check rests on, measured with knsupdate: under that policy an
    update with nothing to change, or prerequisites only, passes at both
    servers; the add-and-delete at the name is refused.

Skipped, with the reason, without Pebble, named, knotd or kdig.
"""
import os
import re
import shutil
import subprocess

import pytest

import acmelab
from acmelab import Bind, Knot, Pebble, Resolver, free_port, wait_for
from conftest import test_pki as suite_pki  # (not collected as a test by this name)
from test_acme_dns import gatling, https_get
from test_acme_https import PLAIN, logged, not_yet, x509

ZONE, CHAL = "dns.test", "chal.test"
WILD = "*." + ZONE
TARGET = "dns." + CHAL  # where _acme-challenge.dns.test points
KDIG = shutil.which("kdig")

pytestmark = [
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    pytest.mark.skipif(not KDIG, reason="kdig missing: apt-get install knot-dnsutils"),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
    pytest.mark.skipif(not acmelab.NAMED, reason="named (Pebble's resolver here) missing: "
                       + acmelab.NAMED_HINT),
]
SERVERS = [
    pytest.param(Knot, marks=pytest.mark.skipif(not acmelab.KNOTD, reason=acmelab.KNOT_HINT),
                 id="knot"),
    pytest.param(Bind, marks=pytest.mark.skipif(not acmelab.NAMED, reason=acmelab.NAMED_HINT),
                 id="bind"),
]


def txt(dns, owner):
    out = subprocess.run([KDIG, "@127.0.0.1", "-p", str(dns.port), "+short", owner, "TXT"],
                         capture_output=True, text=True, timeout=20)
    return [l for l in out.stdout.split() if not l.endswith(".")]  # TXT values, not CNAMEs


def lab(tmp_path, cls, records, owners):
    tmp = str(tmp_path)
    dns = cls(tmp, ZONE, records=records, zones={CHAL: []}, owners=owners)
    key = dns.bind_key_file(os.path.join(tmp, "tsig.key"))
    http, https = free_port(), free_port()
    # Pebble asks a resolver that follows the CNAME from dns.test into chal.test
    resolver = Resolver(tmp, (ZONE, CHAL), dns.port) if acmelab.NAMED else dns
    pebble = Pebble(tmp, suite_pki(), http, https, dnsserver=resolver.addr)
    pebble.resolver = resolver
    return tmp, dns, key, http, https, pebble


def errlog(srv):
    return "\n".join(srv.errlog[-30:])


def waited(srv, dns, pebble, pred, timeout, what, step=0.25):
    """wait_for, its failure saying what gatling, the DNS server and Pebble logged."""
    try:
        return wait_for(pred, timeout, what, step=step)
    except AssertionError as e:
        raise AssertionError("%s\n--- gatling:\n%s\n--- dns:\n%s\n--- pebble:\n%s" % (
            e, errlog(srv), acmelab.tail(dns.log, 3000), pebble.log()[-3000:])) from None


@pytest.mark.parametrize("cls", SERVERS)
def test_cname_delegated_challenge_zone(tmp_path, cls):
    # the key may update TXT at dns.chal.test only: nothing in dns.test
    tmp, dns, key, http, https, pebble = lab(
        tmp_path, cls, [("_acme-challenge", ("CNAME", TARGET + "."))], [TARGET])
    with dns.start(), pebble.resolver.start(), pebble.start():
        with gatling(tmp, http, https, pebble, dns, key) as srv:
            root = pebble.root()
            der = waited(srv, dns, pebble,
                         lambda: srv.alive() and not_yet(https_get, https, "a." + ZONE, root),
                         90, "the wildcard certificate served")
            leaf = x509().load_der_x509_certificate(der)
            assert leaf.extensions.get_extension_for_class(
                x509().SubjectAlternativeName).value.get_values_for_type(x509().DNSName) == [WILD]
            wait_for(lambda: not txt(dns, TARGET), 10, "the TXT record removed")
            assert pebble.issued() == 1, pebble.log()[-3000:]
            assert not logged(srv, "not authoritative|no SOA"), errlog(srv)


@pytest.mark.parametrize("cls", SERVERS)
def test_refusing_policy_orders_nothing(tmp_path, cls):
    # the policy lets the key update another name only
    tmp, dns, key, http, https, pebble = lab(
        tmp_path, cls, [("_acme-challenge", ("CNAME", TARGET + "."))], ["other." + CHAL])
    answer = "REFUSED" if cls is Bind else r"NOTAUTH \(TSIG BADKEY"
    with dns.start(), pebble.start():
        with gatling(tmp, http, https, pebble, dns, key) as srv:
            line = r"\*\.dns\.test: a test update .*TXT record of %s\. in zone %s\. .*" \
                   r"answered %s.*update policy refuses.*failure (\d+)" % (TARGET, CHAL, answer)
            waited(srv, dns, pebble, lambda: len(logged(srv, line)) >= 2, 60,
                   "two refused attempts logged")
            got = logged(srv, line)
            assert "_acme-challenge.dns.test. CNAME dns.chal.test." in got[0], got[0]
            assert pebble.orders() == 0, pebble.log()[-3000:]
            assert not txt(dns, TARGET)
            print(got[0])


def test_cname_loop_is_said_and_orders_nothing(tmp_path):
    if not acmelab.KNOTD:
        pytest.skip(acmelab.KNOT_HINT)
    tmp, dns, key, http, https, pebble = lab(
        tmp_path, Knot, [("_acme-challenge", ("CNAME", "loop.%s." % CHAL))], None)
    with open(os.path.join(dns.tmp, "zones", CHAL + ".zone"), "a") as f:
        f.write("loop CNAME _acme-challenge.%s.\n" % ZONE)
    with dns.start(), pebble.start():
        with gatling(tmp, http, https, pebble, dns, key) as srv:
            waited(srv, dns, pebble,
                   lambda: logged(srv, r"\*\.dns\.test: .*a CNAME loop.*next attempt"), 30,
                   "the loop logged")
            assert pebble.orders() == 0


@pytest.mark.parametrize("cls", SERVERS)
def test_only_the_very_update_proves_the_policy(tmp_path, cls):
    """What gatling.8 says the check rests on, measured at the server: with a
    policy that allows another name, an update with no records to change (the
    SOA as prerequisite) and a prerequisite-only update pass; the add and
    delete of a TXT at the name is refused; and one the policy allows leaves
    the zone's serial as it was."""
    knsupdate = shutil.which("knsupdate")
    if not knsupdate:
        pytest.skip("knsupdate missing: apt-get install knot-dnsutils")
    dns = cls(str(tmp_path), ZONE, zones={CHAL: []}, owners=["ok." + CHAL])

    def update(body):
        script = "server 127.0.0.1 %d\nkey hmac-sha256:%s %s\nzone %s.\n%s\nsend\nanswer\n" % (
            dns.port, dns.keyname, dns.secret, CHAL, body)
        out = subprocess.run([knsupdate], input=script, capture_output=True, text=True,
                             timeout=20)
        got = re.findall(r"status: (\w+)", out.stdout + out.stderr)
        return got[0] if got else ("NOERROR" if out.returncode == 0 else out.stderr[-200:])

    def serial():
        out = subprocess.run([KDIG, "@127.0.0.1", "-p", str(dns.port), "+short", CHAL, "SOA"],
                             capture_output=True, text=True, timeout=20)
        return (out.stdout.split() + [None] * 3)[2]

    with dns.start():
        wait_for(lambda: serial() == "1", 20, "the zone served")  # a slow first answer aside
        for owner in ("ok." + CHAL, TARGET):
            seen = (update("prereq yxrrset %s. SOA" % CHAL),
                    update("prereq nxrrset %s. TXT" % owner),
                    update("add %s. 60 TXT probe\ndel %s. TXT probe" % (owner, owner)))
            print(cls.__name__, owner, seen)
            refused = "REFUSED" if cls is Bind else "BADKEY"  # Knot: NOTAUTH, TSIG BADKEY
            assert seen == (("NOERROR",) * 3 if owner.startswith("ok.")
                            else ("NOERROR", "NOERROR", refused)), seen
        assert serial() == "1"
