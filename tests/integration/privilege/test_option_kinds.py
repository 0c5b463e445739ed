"""Every option whose value is a path or a secret, attacked by its kind as
the option table says it (issue 63's last test, issue 62: the suite's list
of paths read from the table).  `gatling --list-options` gives the rows; a
new option of kind path, log, user-dir or secret is attacked here without a
new test.

gatling runs as root with -u nobody; nobody, the attacker, owns a directory.
For every such option (and the files inside --cluster's value, whose row is
a URL's):
  - the chain: root's T/t/NAME -> nobody's T/userdir/NAME -> T/victim, a
    directory of root's alone; the option's value through it.  The start
    and --check refuse, naming the option and the path, without echoing
    the victim's file; the victim is as it was (no file made, appended to,
    chowned or chmodded).
  - a secret: the file group/world-readable (0644, 0640) or nobody's:
    refused, naming the path.
Before either, the same option with a good value of root's must start: so
a refusal is the attack's, not a value of the wrong shape.  A row whose
default value (a bare path: a file, or else a directory) does not start
needs an entry in TEMPLATES (what else the option needs, what its value
looks like, what a good one holds): the test of that row fails until it has
one, so no option is forgotten.
"""
import os
import subprocess

import pytest

from conftest import client_pki, free_port
from privtools import (as_nobody, build, launch, needs_root, scratch, snapshot, user,
                       users_dir)

pytestmark = needs_root
KINDS = ("path", "log", "user-dir", "secret")
SECRET = "root-only-secret-line"
NAME = "gatling.test"
TSIG = ('key "acme-update" {\n\talgorithm hmac-sha256;\n\tsecret '
        '"ZmFrZWtleWZha2VrZXlmYWtla2V5ZmFrZWtleWZha2U=";\n};\n')
EAB = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W\n"


def table():
    """[(name, kind, flags)] of gatling --list-options."""
    out = subprocess.run([build().binary, "--list-options"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3:
            rows.append((f[0], f[1], f[2].split(",")))
    return rows


def self_signed(key, cert):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "7", "-subj", "/CN=" + NAME, "-addext", "subjectAltName=DNS:" + NAME],
                   check=True, capture_output=True, timeout=30)


def write(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def fill_file(path):
    """A file any option reading one takes (a comment in an options file,
    a MIME types file, a log), its line the one nobody must not see."""
    write(path, "# " + SECRET + "\n", 0o644)


def fill_dir(path):
    os.mkdir(path, 0o755)
    fill_file(path + "/gatling.conf")


def fill_certs(path):
    """-C's directory: a certificate and key (the victim's, root's alone)."""
    os.mkdir(path, 0o700)
    self_signed(path + ".k", path + ".c")
    with open(path + "/server.pem", "w") as out:
        for f in (".c", ".k"):
            out.write(open(path + f).read())
            os.unlink(path + f)
    os.chmod(path + "/server.pem", 0o600)


def fill_pem(path):
    self_signed(path + ".key", path)
    os.chmod(path, 0o644)


def fill_key(path):
    """A client key (--cluster key=) and its certificate beside it."""
    self_signed(path, path + ".crt")
    os.chmod(path, 0o600)


def acme(state=None):
    state = state or "%s/acme-state" % os.getcwd()
    return ["-T", "10", "-e", "0", "--acme", "admin@gatling.test", "--acme-ca",
            "https://127.0.0.1:%d/dir" % free_port(), "--acme-dir", state, "--acme-names", NAME]


def cluster(extra):
    """--cluster with its required secret= (root's alone, made here) and
    extra items."""
    good = os.getcwd() + "/cluster.secret"
    if not os.path.exists(good):
        write(good, "ab" * 32 + "\n")
    return ["--cluster", "etcd=http://127.0.0.1:%d,secret=%s%s" % (free_port(), good, extra)]


def good_key():
    """A client key of root's alone in the cwd, beside the certificate tried."""
    key = os.getcwd() + "/client.key"
    if not os.path.exists(key):
        fill_key(key)
    return key


def good_certs():
    """A -C directory of root's in the cwd (--tls-client-*: client
    certificates are asked where a certificate is)."""
    d = os.getcwd() + "/certs"
    if not os.path.exists(d):
        fill_certs(d)
    return d


def fill_crl(path):
    """A CRL (--tls-client-crl), of client_pki()'s CA."""
    write(path, open(client_pki(os.getcwd()) + "/crl.pem").read(), 0o644)


def client_ca():
    """--tls-client-ca's good value beside a --tls-client-crl tried."""
    return client_pki(os.getcwd()) + "/ca.pem"


def secret_text(text):
    return lambda path: write(path, text)


# What a row's option needs beyond its bare value: "args" (value -> the
# arguments), "shape" ("file" or "dir": what the value names), "fill" (makes a
# good value at a path: the control's, and the victim's copy behind the
# chain), "control" (False: the control's value is left for gatling to make).
# Names with a space are files inside a value whose row is of another kind.
TEMPLATES = {
    "-C": {"args": lambda v: ["-e", "0", "-C", v], "shape": "dir", "fill": fill_certs},
    "-m": {"fill": lambda p: write(p, "text/x-" + SECRET + " tst\n", 0o644)},
    "--acme-dir": {"args": acme, "shape": "dir", "fill": fill_dir, "control": False},
    "--acme-ca-root": {"args": lambda v: acme() + ["--acme-ca-root", v], "fill": fill_pem},
    "--acme-dns-key": {"args": lambda v: acme() + [
        "--acme-challenge", "dns-01", "--acme-dns-server", "127.0.0.1:%d" % free_port(),
        "--acme-dns-key", v], "fill": secret_text(TSIG)},
    "--acme-eab": {"args": lambda v: acme() + ["--acme-eab", "kid:@" + v],
                   "fill": secret_text(EAB)},
    "--tls-client-ca": {"args": lambda v: ["-e", "0", "-C", good_certs(), "--tls-client-ca", v],
                        "fill": fill_pem},
    "--tls-client-crl": {"args": lambda v: ["-e", "0", "-C", good_certs(), "--tls-client-ca",
                                            client_ca(), "--tls-client-crl", v],
                         "fill": fill_crl},
    "--proxy-ca": {"args": lambda v: ["--proxy-ca", v, "-P", "h2/127.0.0.1/1/^/x"],
                   "fill": fill_pem},
    "--cluster secret=": {"kind": "secret",
                          "args": lambda v: ["--cluster", "etcd=http://127.0.0.1:%d,secret=%s"
                                             % (free_port(), v)],
                          "fill": secret_text("ab" * 32 + "\n")},
    "--cluster password-file=": {"kind": "secret",
                                 "args": lambda v: cluster(",user=gatling,password-file=" + v),
                                 "fill": secret_text("hunter2\n")},
    "--cluster key=": {"kind": "secret", "args": lambda v: cluster(",cert=%s.crt,key=%s" % (v, v)),
                       "fill": fill_key},
    "--pool file:": {"kind": "path", "args": lambda v: ["--pool", "x=file:" + v, "-P", "@x/^/p/"],
                     "fill": lambda p: write(p, "127.0.0.1/9\n", 0o644)},
    "--cluster ca=": {"kind": "path", "args": lambda v: cluster(",ca=" + v), "fill": fill_pem},
    "--cluster cert=": {"kind": "path", "args": lambda v: cluster(",cert=%s,key=%s" % (
        v, good_key())), "fill": fill_pem},
}


def rows():
    """[(name, kind, template or None)]: the table's path and secret rows,
    then the files inside other rows' values."""
    out = [(n, k, TEMPLATES.get(n)) for n, k, flags in table() if k in KINDS]
    out += [(n, t["kind"], t) for n, t in TEMPLATES.items() if " " in n]
    return out


def shapes(name, kind, flags_relative, tpl):
    """The template's, or the defaults by kind: a file (and else a
    directory) for a path, a directory for a user-dir, a file otherwise."""
    if tpl:
        return [dict({"args": lambda v, o=name: [o, v], "shape": "file", "fill": None}, **tpl)]
    if not flags_relative:
        return []  # not a bare path (OPT_NOT_RELATIVE): only a template says its value
    one = lambda shape: {"args": lambda v, o=name: [o, v], "shape": shape, "fill": None}
    if kind == "user-dir":
        return [dict(one("dir"), control=False)]
    if kind == "path":
        return [one("file"), one("dir")]
    return [one("file")]


def fill(t, path):
    (t["fill"] or (fill_dir if t["shape"] == "dir" else fill_file))(path)


def start(args, base):
    """The start's and --check's: (started, text, returncode) each."""
    with launch(["-u", "nobody"] + args, base) as run:
        started = (run.port is not None, run.text(), run.proc.returncode)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    chk = subprocess.run([build().binary, "-i", "127.0.0.1", "-p", "0", "-u", "nobody",
                          "--check"] + args, cwd=base, capture_output=True, text=True,
                         timeout=60, env=env, stdin=subprocess.DEVNULL)
    return started, (chk.returncode == 0, chk.stderr, chk.returncode)


def control(t, base):
    """The option with a good value of root's: (started, text)."""
    os.mkdir(base + "/ctl", 0o755)
    path = base + "/ctl/" + ("dir" if t["shape"] == "dir" else "file")
    if t.get("control", True):
        fill(t, path)
    with launch(["-u", "nobody"] + t["args"](path), base) as run:
        return run.port is not None, run.text()


def template_for(name, kind, flags_relative, tpl):
    """The first shape whose control starts; the test fails (naming what to
    add) when none does."""
    tried = []
    for t in shapes(name, kind, flags_relative, tpl):
        with scratch() as base:
            os.chdir(base)
            ok, text = control(t, base)
        if ok:
            return t
        tried.append("%s as a %s:\n%s" % (name, t["shape"], text))
    pytest.fail("%s (kind %s): no value of root's starts gatling; add what it needs to "
                "TEMPLATES in %s\n%s" % (name, kind, __file__, "\n".join(tried)))


def relative(name):
    return next((("relative" in f) for n, k, f in table() if n == name), True)


ROWS = None


def ids():
    global ROWS
    if ROWS is None:
        try:
            ROWS = rows()
        except Exception:  # no build: each test skips in build()
            ROWS = []
    return ROWS


def row_ids(kinds):
    return [n for n, k, t in ids() if k in kinds] or ["no-build"]


def row(name):
    if name == "no-build":
        build()
        pytest.skip("no rows")
    return next((n, k, t) for n, k, t in ids() if n == name)


@pytest.fixture(autouse=True)
def _cwd():
    old = os.getcwd()
    yield
    os.chdir(old)


@pytest.mark.parametrize("opt", row_ids(KINDS))
def test_chain_into_users_directory(opt):
    """root's link -> nobody's directory -> nobody's link -> root's victim:
    refused by the start and by --check, naming the option and the path."""
    name, kind, tpl = row(opt)
    t = template_for(name, kind, relative(name), tpl)
    with scratch() as base:
        os.chdir(base)
        v = base + "/victim"
        os.mkdir(v, 0o700)
        target = v if t["shape"] == "dir" else v + "/sub"
        if t["shape"] == "dir":
            os.rmdir(v)
            fill(t, v)
            os.chmod(v, 0o700)
        else:
            os.mkdir(target, 0o700)
            fill(t, target + "/value")
        before = snapshot(v, contents=True)
        os.makedirs(base + "/t", 0o755)
        ud = users_dir(base + "/userdir")
        os.symlink(target, ud + "/x")
        as_nobody(ud + "/x")
        os.symlink(ud + "/x", base + "/t/x")
        value = base + "/t/x" + ("" if t["shape"] == "dir" else "/value")
        said = name.split()[0]
        for what, (started, text, rc) in zip(("the start", "--check"), start(t["args"](value),
                                                                             base)):
            assert not started and rc != 0, "%s %s: %s took the chain:\n%s" % (
                name, value, what, text)
            assert said in text and value in text, "%s: not named:\n%s" % (what, text)
            assert SECRET not in text, "%s: root's file was echoed:\n%s" % (what, text)
        assert snapshot(v, contents=True) == before, "root changed the victim"


@pytest.mark.parametrize("how", ["0644", "0640", "nobody's"])
@pytest.mark.parametrize("opt", row_ids(("secret",)))
def test_secret_others_may_read(opt, how):
    name, kind, tpl = row(opt)
    t = template_for(name, kind, relative(name), tpl)
    with scratch() as base:
        os.chdir(base)
        path = base + "/secret"
        fill(t, path)
        os.chmod(path, 0o600 if how == "nobody's" else int(how, 8))
        if how == "nobody's":
            os.chown(path, user().pw_uid, user().pw_gid)
        for what, (started, text, rc) in zip(("the start", "--check"), start(t["args"](path),
                                                                             base)):
            assert not started and rc != 0, "%s: %s took it:\n%s" % (what, how, text)
            assert path in text, "%s: not named:\n%s" % (what, text)
            assert ("uid %d" % user().pw_uid if how == "nobody's" else "chmod 600") in text, text


def test_every_template_names_a_row():
    """A template whose option was renamed or changed kind would leave the
    new row to the defaults unseen: each names a path or secret row (or,
    with a space, a file inside a row's value)."""
    kind = {n: k for n, k, f in table()}
    stale = [n for n in TEMPLATES
             if (n.split()[0] not in kind if " " in n else kind.get(n) not in KINDS)]
    assert not stale, "TEMPLATES names no path or secret row: %s" % stale
