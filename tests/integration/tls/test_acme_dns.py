"""DNS-01 (issue 54, gatling/acme/acme_dns.c): wildcard certificates through
RFC 2136 updates signed with TSIG, against real components: Debian's Knot
(acmelab.Knot: one zone, dns.test, on a loopback port, updates allowed to
one hmac-sha256 key) and Pebble resolving through it (its -dnsserver), with
Pebble's chaos on (5% of good nonces rejected, authorizations reused half
the time).

gatling runs as a user would run it: `--acme EMAIL ... --acme-names
'*.dns.test' --acme-dns-server 127.0.0.1:PORT --acme-dns-key KEYFILE` (the
key in BIND's format, as tsig-keygen writes it).  What is checked, on the
outside only:

  - a wildcard certificate: issued, in -C as *.dns.test (a complete pair),
    served by SNI for two subdomains and verified against Pebble's root for
    each; the TXT record gone from the zone afterwards (kdig); the time it
    took is printed;
  - a wrong TSIG key (the right name and another secret; another name): a
    clear error in the log (Knot's NOTAUTH, TSIG BADSIG or BADKEY, named), and
    Pebble never sees an order, nor Knot a change;
  - the DNS server down: each attempt a logged failure, the next one later
    and later (back-off, no tight loop), no order; once Knot is up the
    certificate arrives;
  - --acme-challenge dns-01 for a plain name: issued by DNS-01 as well;
  - a validation that fails (Pebble resolves through a second Knot serving
    the same zone, which never gets the update): the CA's error logged, the
    record removed from the server it was added to all the same.

Skipped, with the reason, without Pebble, knotd or kdig (tests/setup.sh
installs knot and knot-dnsutils).  Runs once (run-check's ONCE_ACME), on the
first plain build.
"""
import base64
import os
import re
import shutil
import subprocess
import time

import pytest

import acmelab
from acmelab import Knot, Pebble, free_port, wait_for
from conftest import Build, running_server
from conftest import test_pki as suite_pki  # (not collected as a test by this name)
from test_acme_https import (BACKOFF, BODY, EMAIL, PLAIN, ctx_for, h1_get, logged, not_yet, pairs,
                             x509)

ZONE = "dns.test"
WILD = "*." + ZONE
KDIG = shutil.which("kdig")
ISSUE_TIMEOUT = 60

pytestmark = [
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    pytest.mark.skipif(not acmelab.KNOTD, reason="knotd missing: " + acmelab.KNOT_HINT),
    pytest.mark.skipif(not KDIG, reason="kdig missing: apt-get install knot-dnsutils "
                       "(tests/setup.sh does it)"),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
]


def site_args(tmp, http, https, ca, knot_addr, keyfile, names=WILD):
    root = os.path.join(tmp, "www")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(BODY)
    os.makedirs(os.path.join(tmp, "certs"), exist_ok=True)
    return root, ["-p", str(http), "-e", str(https), "-C", os.path.join(tmp, "certs"),
                  "-T", "10", "-S", "--acme", EMAIL, "--acme-ca", ca,
                  "--acme-ca-root", suite_pki() + "/ca.pem", "--acme-dir",
                  os.path.join(tmp, "acme"), "--acme-names", names,
                  "--acme-dns-server", knot_addr, "--acme-dns-key", keyfile]


def https_get(port, sni, root_pem):
    """GET / over HTTPS with SNI sni, verified for sni against root_pem:
    the certificate (DER)."""
    return h1_get(ctx_for(root_pem), port, sni=sni)


def txt(knot, owner):
    """The TXT records Knot serves at owner."""
    out = subprocess.run([KDIG, "@127.0.0.1", "-p", str(knot.port), "+short", owner, "TXT"],
                         capture_output=True, text=True, timeout=20)
    return out.stdout.split()


def tail_log(knot):
    return acmelab.tail(knot.log, 2000)


def lab(tmp_path, wrong_key=False, knot_up=True):
    tmp = str(tmp_path)
    knot = Knot(tmp, ZONE)
    key = knot.bind_key_file(os.path.join(tmp, "tsig.key"),
                             secret=base64.b64encode(os.urandom(32)).decode()
                             if wrong_key else None)
    http, https = free_port(), free_port()
    pebble = Pebble(tmp, suite_pki(), http, https, dnsserver=knot.addr)
    return tmp, knot, key, http, https, pebble


def gatling(tmp, http, https, pebble, knot, key, names=WILD, extra=()):
    root, args = site_args(tmp, http, https, pebble.directory, knot.addr, key, names)
    args += list(extra)
    env = {"GATLING_TEST_ACME_BACKOFF": str(BACKOFF)}
    return running_server(Build(PLAIN[0]), root, args, env=env, check_fds=False)


def test_wildcard_certificate_served_for_two_subdomains(tmp_path):
    tmp, knot, key, http, https, pebble = lab(tmp_path)
    with knot.start(), pebble.start():
        began = time.monotonic()
        with gatling(tmp, http, https, pebble, knot, key) as srv:
            root = pebble.root()
            der = wait_for(lambda: srv.alive() and not_yet(https_get, https, "a." + ZONE, root),
                           ISSUE_TIMEOUT, "the wildcard certificate served (stderr:\n%s)"
                           % "\n".join(srv.errlog[-30:]), step=0.25)
            took = time.monotonic() - began
            assert https_get(https, "www." + ZONE, root) == der
            leaf = x509().load_der_x509_certificate(der)
            names = leaf.extensions.get_extension_for_class(
                x509().SubjectAlternativeName).value.get_values_for_type(x509().DNSName)
            assert names == [WILD]
            assert pairs(os.path.join(tmp, "certs")) == {WILD: leaf.serial_number}
            # removed after the validation: nothing left at _acme-challenge
            wait_for(lambda: not txt(knot, "_acme-challenge." + ZONE), 10,
                     "the TXT record removed")
            assert pebble.orders() >= 1 and pebble.issued() == 1, pebble.log()[-3000:]
            # the record added and removed: two changes (the check before the order, none)
            assert knot.updates() == 2, tail_log(knot)
            print("time to a wildcard certificate: %.1f s" % took)


def test_dns01_for_a_plain_name(tmp_path):
    """--acme-challenge dns-01: a plain name goes by DNS too (the zone has no
    address for it, so HTTP-01 and TLS-ALPN-01 could not succeed)."""
    tmp, knot, key, http, https, pebble = lab(tmp_path)
    name = "host." + ZONE
    with knot.start(), pebble.start():
        with gatling(tmp, http, https, pebble, knot, key, names=name,
                     extra=["--acme-challenge", "dns-01"]) as srv:
            root = pebble.root()
            der = wait_for(lambda: srv.alive() and not_yet(https_get, https, name, root),
                           ISSUE_TIMEOUT, "the certificate served (stderr:\n%s)"
                           % "\n".join(srv.errlog[-30:]), step=0.25)
            leaf = x509().load_der_x509_certificate(der)
            assert leaf.extensions.get_extension_for_class(
                x509().SubjectAlternativeName).value.get_values_for_type(x509().DNSName) == [name]
            assert knot.updates() == 2 and not txt(knot, "_acme-challenge." + name)


@pytest.mark.parametrize("wrong", ["secret", "name"])
def test_wrong_tsig_key_is_a_clear_error_and_orders_nothing(tmp_path, wrong):
    tmp, knot, key, http, https, pebble = lab(tmp_path, wrong_key=wrong == "secret")
    if wrong == "name":  # the right secret under a name the server does not know
        with open(key) as f:
            text = f.read()
        with open(key, "w") as f:
            f.write(text.replace('key "acme-update"', 'key "acme-other"'))
    error = "BADSIG" if wrong == "secret" else "BADKEY"
    with knot.start(), pebble.start():
        with gatling(tmp, http, https, pebble, knot, key) as srv:
            wait_for(lambda: logged(srv, r"\*\.dns\.test: .*NOTAUTH \(TSIG %s" % error), 30,
                     "the key's error logged (stderr:\n%s)" % "\n".join(srv.errlog[-30:]))
            line = logged(srv, error)[0]
            assert ("acme-update" if wrong == "secret" else "acme-other") in line, line
            assert "next attempt in" in line, line
            assert pebble.orders() == 0, pebble.log()[-3000:]
            assert not txt(knot, "_acme-challenge." + ZONE) and knot.updates() == 0
            print("\n".join(logged(srv, "acme: ")))


def test_dns_server_down_backs_off_then_issues(tmp_path):
    tmp, knot, key, http, https, pebble = lab(tmp_path)
    with pebble.start():
        with gatling(tmp, http, https, pebble, knot, key) as srv:
            fail = r"\*\.dns\.test: .*port %d: .*\(failure (\d+), next attempt in (\d+) s" \
                % knot.port
            began = time.monotonic()
            wait_for(lambda: len(logged(srv, fail)) >= 2, 60,
                     "two failed attempts logged (stderr:\n%s)" % "\n".join(srv.errlog[-30:]))
            time.sleep(max(0.0, 12 - (time.monotonic() - began)))
            got = [re.search(fail, l).groups() for l in logged(srv, fail)]
            assert [int(n) for n, _ in got] == list(range(1, len(got) + 1)), got
            # from BACKOFF s doubling (2-3, 3-5, 6-10 s): three attempts in 12 s at most
            assert len(got) <= 3 and int(got[1][1]) >= int(got[0][1]) >= 1, got
            assert pebble.orders() == 0
            print("\n".join(logged(srv, "acme: ")))
            with knot.start():
                root = pebble.root()
                wait_for(lambda: srv.alive() and not_yet(https_get, https, "b." + ZONE, root),
                         90, "the certificate once Knot is up (stderr:\n%s)"
                         % "\n".join(srv.errlog[-30:]), step=0.5)


def test_record_removed_after_a_failed_validation(tmp_path):
    tmp, knot, key, http, https, _ = lab(tmp_path)
    other = Knot(os.path.join(tmp, "other"), ZONE)  # the zone as the CA sees it: never updated
    pebble = Pebble(tmp, suite_pki(), http, https, dnsserver=other.addr)
    with knot.start(), other.start(), pebble.start():
        with gatling(tmp, http, https, pebble, knot, key) as srv:
            wait_for(lambda: logged(srv, r"\*\.dns\.test: .*authorization invalid.*next attempt"),
                     60, "the failed validation logged (stderr:\n%s)"
                     % "\n".join(srv.errlog[-30:]))
            print("\n".join(logged(srv, "acme: ")))
            assert pebble.orders() >= 1
            # the record went in (Knot applied the update) and out again
            wait_for(lambda: knot.updates() >= 2 and not txt(knot, "_acme-challenge." + ZONE),
                     10, "the TXT record removed after the failure (%s)" % tail_log(knot))
