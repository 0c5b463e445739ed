"""The paths root reads or makes, walked as an attacker would steer them
(issue 63, findings 1 and 4).  gatling runs as root with -u nobody; nobody,
the attacker, owns a directory (as systemd's StateDirectory= or
debian/postinst make /var/lib/gatling and /var/log/gatling the service
user's).

The chain: root's T/t/NAME -> T/userdir/x, nobody's T/userdir/x -> T/victim,
a directory of root's alone.  Root handed the whole target to the kernel,
which followed nobody's link too: --acme-dir's victim was chowned to nobody
(with its files), -l and -q made their log there, -C loaded the key kept
there, --config read (and echoed) root's file.  Now every one is refused,
naming the path, and the victim is as it was.

Then the files root reads and what it requires of them: --config owned by
another user or writable by others; the secrets (--acme-dns-key,
--acme-eab's @FILE, --cluster's key=, password-file= and secret=) readable
by group or others, or owned by another user (sshd's StrictModes).
"""
import os
import subprocess

import pytest

from conftest import free_port
from privtools import (as_nobody, launch, needs_root, owner, scratch, snapshot, user,
                       users_dir)

pytestmark = needs_root
NAME = "gatling.test"
SECRET = "root-only-secret-line"
TSIG = ('key "acme-update" {\n\talgorithm hmac-sha256;\n\tsecret '
        '"ZmFrZWtleWZha2VrZXlmYWtla2V5ZmFrZWtleWZha2U=";\n};\n')


def victim(base):
    """T/victim: root's alone, a 0600 file and a 0700 directory in it; its
    listing and owners, to compare after."""
    v = base + "/victim"
    os.mkdir(v, 0o700)
    os.mkdir(v + "/sub", 0o700)
    with open(v + "/gatling.conf", "w") as f:
        f.write(SECRET + "\n")
    os.chmod(v + "/gatling.conf", 0o600)
    return v


def chain(base, name, v):
    """root's T/t/NAME -> T/userdir/NAME, nobody's T/userdir/NAME -> v."""
    os.makedirs(base + "/t", 0o755, exist_ok=True)
    ud = base + "/userdir"
    if not os.path.isdir(ud):
        users_dir(ud)
    os.symlink(v, ud + "/" + name)
    as_nobody(ud + "/" + name)
    os.symlink(ud + "/" + name, base + "/t/" + name)
    return base + "/t/" + name


def acme(state):
    return ["-u", "nobody", "-T", "10", "-e", "0", "--acme", "admin@gatling.test",
            "--acme-ca", "https://127.0.0.1:%d/dir" % free_port(), "--acme-dir", state,
            "--acme-names", NAME]


def self_signed(key, cert):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "7", "-subj", "/CN=" + NAME, "-addext", "subjectAltName=DNS:" + NAME],
                   check=True, capture_output=True, timeout=30)


def refused(run, opt, path):
    text = run.text()
    assert run.port is None and run.proc.returncode != 0, "gatling started:\n" + text
    assert opt in text and path in text and "symbolic link" in text, text
    assert SECRET not in text, "root's file was echoed:\n" + text


@pytest.mark.parametrize("what", ["acme-dir", "access-log", "error-log", "certs", "config"])
def test_root_link_into_users_directory(what):
    with scratch() as base:
        v = victim(base)
        if what == "certs":  # a pair only root may read
            with open(v + "/server.pem", "w") as out:
                self_signed(base + "/k.pem", base + "/c.pem")
                for f in ("c.pem", "k.pem"):
                    out.write(open(base + "/" + f).read())
            os.chmod(v + "/server.pem", 0o600)
        before = snapshot(v)
        link = chain(base, what, v)
        args = {"acme-dir": acme(link),
                "access-log": ["-u", "nobody", "-l", link + "/access.log"],
                "error-log": ["-u", "nobody", "-q", link + "/error.log"],
                "certs": ["-u", "nobody", "-e", "0", "-C", link],
                "config": ["-u", "nobody", "--config", link + "/gatling.conf"]}[what]
        opt = {"acme-dir": "--acme-dir", "access-log": "-l", "error-log": "-q", "certs": "-C",
               "config": "--config"}[what]
        with launch(args, base) as run:
            pass
        assert snapshot(v) == before, "root changed the victim directory"
        refused(run, opt, link)


@pytest.mark.parametrize("with_u", [False, True], ids=["no-u", "u-nobody"])
def test_users_certificate_directory(with_u):
    """-C T/userdir, nobody's directory holding nobody's link server.pem -> a pair only
    root may read (issue 78, item 5).  Without -u, root would read it through the link
    (the logs in such a directory were refused, the certificates taken): refused, naming
    -C and why; with -u nobody, read as nobody, who cannot: no certificate served.
    Neither echoes the key."""
    with scratch() as base:
        v = victim(base)
        with open(v + "/server.pem", "w") as out:
            self_signed(base + "/k.pem", base + "/c.pem")
            for f in ("c.pem", "k.pem"):
                out.write(open(base + "/" + f).read())
        os.chmod(v + "/server.pem", 0o600)
        key = open(base + "/k.pem").read().splitlines()[1]
        ud = users_dir(base + "/userdir")
        os.symlink(v + "/server.pem", ud + "/server.pem")
        as_nobody(ud + "/server.pem")
        args = (["-u", "nobody"] if with_u else []) + ["-e", "0", "-C", ud]
        with launch(args, base) as run:
            text = run.text()
        assert key not in text, "the key was echoed:\n" + text
        if with_u:
            assert "HTTPS with" not in text or "with 0 cert" in text, text
        else:
            assert run.port is None and run.proc.returncode != 0, "gatling started:\n" + text
            assert "-C " + ud in text and "others than root" in text and "-u USER" in text, text


def test_users_link_to_roots_file_as_config():
    """--config T/userdir/gatling.conf, nobody's link to a file of root's
    (/etc/shadow): refused, and not one line of it shown."""
    with scratch() as base:
        v = victim(base)
        ud = users_dir(base + "/userdir")
        os.symlink(v + "/gatling.conf", ud + "/gatling.conf")
        as_nobody(ud + "/gatling.conf")
        with launch(["--config", ud + "/gatling.conf"], base) as run:
            pass
        refused(run, "--config", ud + "/gatling.conf")


@pytest.mark.parametrize("how", ["nobody's", "group-writable", "world-writable"])
def test_config_others_may_write(how):
    with scratch() as base:
        conf = base + "/gatling.conf"
        with open(conf, "w") as f:
            f.write("-T 10\n")
        if how == "nobody's":
            os.chown(conf, user().pw_uid, user().pw_gid)
        os.chmod(conf, {"nobody's": 0o644, "group-writable": 0o664,
                        "world-writable": 0o646}[how])
        with launch(["--config", conf], base) as run:
            pass
        assert run.port is None and run.proc.returncode != 0, run.text()
        assert "--config " + conf in run.text(), run.text()
        assert ("uid %d" % user().pw_uid if how == "nobody's" else "may write") in run.text()


def test_config_of_roots_alone_is_read():
    with scratch() as base:
        conf = base + "/gatling.conf"
        with open(conf, "w") as f:
            f.write("-T 10\n")
        os.chmod(conf, 0o644)
        with launch(["--config", conf], base) as run:
            assert run.port, run.text()


def secret_args(kind, path):
    if kind == "dns-key":
        return ["--acme", "admin@gatling.test", "--acme-challenge", "dns-01",
                "--acme-dns-server", "127.0.0.1:%d" % free_port(), "--acme-dns-key", path,
                "--acme-dir", os.path.dirname(path) + "/state", "--acme-names", NAME, "-e", "0",
                "--acme-ca", "https://127.0.0.1:%d/dir" % free_port()]
    if kind == "eab":
        return ["--acme", "admin@gatling.test", "--acme-eab", "kid:@" + path,
                "--acme-dir", os.path.dirname(path) + "/state", "--acme-names", NAME, "-e", "0",
                "--acme-ca", "https://127.0.0.1:%d/dir" % free_port()]
    etcd = "etcd=http://127.0.0.1:%d" % free_port()
    if kind == "secret":
        return ["--cluster", etcd + ",secret=" + path]
    # --cluster's own secret= (required), root's alone, beside the one tried
    good = os.path.dirname(path) + "/cluster.secret"
    write_secret("secret", good)
    os.chmod(good, 0o600)
    etcd += ",secret=" + good
    if kind == "password-file":
        return ["--cluster", etcd + ",user=gatling,password-file=" + path]
    return ["--cluster", etcd + ",cert=" + path + ".crt,key=" + path]


def write_secret(kind, path):
    if kind == "key":
        self_signed(path, path + ".crt")
        return
    with open(path, "w") as f:
        f.write({"dns-key": TSIG, "password-file": "hunter2\n", "secret": "ab" * 32 + "\n",
                 "eab": "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W\n"}[kind])


@pytest.mark.parametrize("kind", ["dns-key", "eab", "password-file", "key", "secret"])
@pytest.mark.parametrize("how", ["0644", "0640", "nobody's"])
def test_secret_file_refused(kind, how):
    with scratch() as base:
        path = base + "/secret"
        write_secret(kind, path)
        os.chmod(path, 0o600 if how == "nobody's" else int(how, 8))
        if how == "nobody's":
            os.chown(path, user().pw_uid, user().pw_gid)
        with launch(secret_args(kind, path), base) as run:
            pass
        assert run.port is None and run.proc.returncode != 0, run.text()
        assert path in run.text(), run.text()
        assert ("uid %d" % user().pw_uid if how == "nobody's" else "chmod 600") in run.text()


@pytest.mark.parametrize("kind", ["dns-key", "eab", "password-file", "key", "secret"])
def test_secret_file_of_roots_alone_taken(kind):
    with scratch() as base:
        path = base + "/secret"
        write_secret(kind, path)
        os.chmod(path, 0o600)
        with launch(secret_args(kind, path), base) as run:
            assert run.port, run.text()


def test_acme_dir_of_roots_not_gatlings_is_not_handed_over():
    """--acme-dir naming a directory of root's that gatling did not make (it
    holds what gatling never puts there): not chowned, refused."""
    with scratch() as base:
        v = victim(base)
        before = snapshot(v)
        with launch(acme(v), base) as run:
            pass
        assert snapshot(v) == before, "root chowned a directory it did not make"
        assert run.port is None and "--acme-dir " + v in run.text(), run.text()


def test_acme_dir_made_by_gatling_is_handed_over():
    with scratch() as base:
        state = base + "/made/state"
        with launch(acme(state), base) as run:
            assert run.port, run.text()
        assert owner(state) == user().pw_uid
        assert owner(base + "/made") == 0
