"""--acme's state directory, live/ and -C as root treats them (issue 52,
finding 2).  gatling runs as root with -u nobody and --acme, its CA a
closed local port (the client only backs off: no Pebble needed); STATE is
nobody's, as the client, which runs as nobody, leaves it.  nobody, the
attacker:
  - replaces challenges/tls-alpn-01, or live/, by a symbolic link to a
    directory of root's, and waits for a restart: the directory stays
    root's (root chown()ed it by name);
  - plants a hard link to a file of root's in STATE and kills the ACME
    client, whose keeper (root) starts it again: the file stays root's
    (the client chowned STATE's tree as root at every start);
  - points live/NAME/privkey.pem and fullchain.pem at a key only root may
    read: gatling does not load it (root read it at start);
  - puts a FIFO at live/NAME/ocsp.der: the start does not hang;
and an admin's -C directory is not handed to nobody (it was, silently),
the serving processes hold challenges/ and not STATE (the account key),
and a STATE made by an earlier run as root is handed over, but for what
nobody could have planted in it.
"""
import os
import signal
import subprocess
import time

import pytest

from conftest import free_port
from privtools import as_nobody, launch, needs_root, owner, scratch, user, wait_until

pytestmark = needs_root
NAME = "gatling.test"


def acme(state, *more):
    return ["-u", "nobody", "-T", "10", "-e", "0", "--acme", "admin@gatling.test",
            "--acme-ca", "https://127.0.0.1:%d/dir" % free_port(), "--acme-dir", state,
            "--acme-names", NAME] + list(more)


def nobodys_state(base):
    """STATE as a client running as nobody leaves it."""
    state = base + "/state"
    for d in ("", "/challenges", "/challenges/http-01", "/challenges/tls-alpn-01", "/live",
              "/account"):
        os.mkdir(state + d, 0o700 if d in ("", "/live", "/account") else 0o755)
        os.chown(state + d, user().pw_uid, user().pw_gid)
    return state


def roots_dir(path):
    os.mkdir(path, 0o755)
    with open(path + "/keep", "w") as f:
        f.write("root's\n")
    return path


def swapped(state, sub, target):
    """nobody replaces STATE/sub by a link to target."""
    os.rename(state + "/" + sub, state + "/" + sub + ".old")
    os.symlink(target, state + "/" + sub)
    as_nobody(state + "/" + sub)


def client_pids(server_pid):
    """The acme-client processes below server_pid (keeper's children)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/comm" % p) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == "acme-client":
            ppid = int(fields[1])
            with open("/proc/%d/stat" % ppid) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == server_pid:
                    out.append(int(p))
    return out


@pytest.mark.parametrize("sub", ["challenges/tls-alpn-01", "live"])
def test_link_to_roots_directory(sub):
    with scratch() as base:
        state, victim = nobodys_state(base), roots_dir(base + "/root-only")
        swapped(state, sub, victim)
        with launch(acme(state), base) as run:
            if run.port:
                time.sleep(1)  # the client's own start
        assert owner(victim) == 0, "root chowned the directory the link named"
        assert run.port is None and sub in run.text(), run.text()


def test_client_restart_chowns_nothing():
    """A hard link in STATE, then the client killed: the keeper (root) starts
    it again, and nothing of root's changes hands."""
    with scratch() as base:
        state = nobodys_state(base)
        secret = base + "/secret"
        with open(secret, "w") as f:
            f.write("root's key\n")
        os.chmod(secret, 0o600)
        with launch(acme(state), base) as run:
            assert run.port, run.text()
            pids = wait_until(lambda: client_pids(run.proc.pid))
            assert pids, "no ACME client"
            # what fs.protected_hardlinks=0 lets nobody do (root makes it here)
            os.link(secret, state + "/account/planted")
            os.kill(pids[0], signal.SIGKILL)
            assert wait_until(lambda: any("starts again" in l for l in run.lines))
            restarted = wait_until(lambda: [p for p in client_pids(run.proc.pid)
                                            if p != pids[0]], 10)
            assert restarted, run.text()
            time.sleep(1)  # its start: what chowned the tree
        assert owner(secret) == 0, "the restarted client chowned root's file to nobody"


def self_signed(key, cert):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "7", "-subj", "/CN=" + NAME, "-addext", "subjectAltName=DNS:" + NAME],
                   check=True, capture_output=True, timeout=30)


def test_live_key_read_as_the_user():
    """live/NAME/*.pem links to a certificate and key only root may read:
    not loaded (root read them at start, following the links)."""
    with scratch() as base:
        state = nobodys_state(base)
        closed = base + "/closed"
        os.mkdir(closed, 0o700)
        self_signed(closed + "/key.pem", closed + "/cert.pem")
        live = state + "/live/" + NAME
        os.mkdir(live, 0o700)
        os.chown(live, user().pw_uid, user().pw_gid)
        for link, target in (("fullchain.pem", "cert.pem"), ("privkey.pem", "key.pem")):
            os.symlink(closed + "/" + target, live + "/" + link)
            as_nobody(live + "/" + link)
        with launch(acme(state), base) as run:
            assert run.port, run.text()
            assert "HTTPS with" not in run.text() and "no certificate" in run.text(), run.text()


def test_fifo_in_live_does_not_hang_the_start():
    """live/NAME/ocsp.der a FIFO beside a good pair (nobody's): the start
    goes on (root's open waited for a writer forever), the pair is served."""
    with scratch() as base:
        state = nobodys_state(base)
        live = state + "/live/" + NAME
        os.mkdir(live, 0o700)
        self_signed(live + "/privkey.pem", live + "/fullchain.pem")
        os.mkfifo(live + "/ocsp.der", 0o600)
        for f in ("", "/privkey.pem", "/fullchain.pem", "/ocsp.der"):
            as_nobody(live + f)
        with launch(acme(state), base, timeout=10) as run:
            assert run.port, run.text()
            assert "HTTPS with 1 certificate" in run.text(), run.text()


def test_admins_tls_dir_is_not_handed_over():
    with scratch() as base:
        state = nobodys_state(base)
        certs = base + "/certs"
        os.mkdir(certs, 0o755)
        with launch(acme(state, "-C", certs), base) as run:
            if run.port:
                wait_until(lambda: owner(certs) != 0, 5)
        assert owner(certs) == 0, "-C was chowned to -u's user"
        assert run.port is None and "-C " + certs in run.text(), run.text()


def test_serving_processes_hold_challenges_only():
    with scratch() as base:
        state = nobodys_state(base)
        with launch(acme(state), base) as run:
            assert run.port, run.text()
            fds = set()
            for fd in os.listdir("/proc/%d/fd" % run.proc.pid):
                try:
                    fds.add(os.readlink("/proc/%d/fd/%s" % (run.proc.pid, fd)))
                except OSError:
                    pass
        assert state not in fds, "the server holds the whole state directory: %r" % fds
        assert state + "/challenges" in fds, fds


def test_roots_state_is_handed_over_but_not_what_nobody_planted():
    """STATE from an earlier run as root (root's alone): handed to -u's user
    whole, through descriptors, the account key too; but not what lies in a
    directory in it that nobody already owns (challenges/, from a run with
    -u): a hard link there to a file of root's stays root's."""
    with scratch() as base:
        state = base + "/state"
        os.mkdir(state, 0o700)
        os.mkdir(state + "/account", 0o700)
        with open(state + "/account/key.pem", "w") as f:
            f.write("key\n")
        for d in ("/challenges", "/challenges/tls-alpn-01"):
            os.mkdir(state + d, 0o755)
            os.chown(state + d, user().pw_uid, user().pw_gid)
        secret = base + "/secret"
        with open(secret, "w") as f:
            f.write("root's key\n")
        os.chmod(secret, 0o600)
        os.link(secret, state + "/challenges/tls-alpn-01/planted.pem")
        with launch(acme(state), base) as run:
            assert run.port, run.text()
            time.sleep(1)  # the client's start
        for p in ("", "/account", "/account/key.pem", "/challenges/http-01"):
            assert owner(state + p) == user().pw_uid, p
        assert owner(secret) == 0, "root chowned what nobody planted in its directory"
