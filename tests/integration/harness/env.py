"""The run's settings and what follows from them: the paths (ROOT, BUILD_DIR),
GATLING_SCHEME (SCHEME, TLS, H2, H3, MUX and the versions a response and the log
show), the test PKI (test_pki(); client_pki() for mutual TLS), the skip marks by
scheme and backend, URLs, TLS
contexts for clients, the timeouts and the `serial` mark."""

import contextlib
import os
import re
import subprocess
import time

import pytest


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD_DIR = os.environ.get("GATLING_BUILD_DIR") or os.path.join(ROOT, "build")

LISTEN_RE = re.compile(r"listening on (\S+) port (\d+)")

# GATLING_SCHEME=https runs the HTTP tests over TLS: every server gets a
# certificate from a throwaway CA (dist/mkcert.sh) and an HTTPS port, srv.port
# is the HTTPS port (srv.plain_port the HTTP one), and Client speaks TLS.
# GATLING_SCHEME=h2 runs them over HTTP/2: the servers as for https, curl
# asks for h2 (ALPN), and Client is H2Client, which turns each HTTP/1.1
# request a test sends into a stream on one HTTP/2 connection (Python's h2).
# GATLING_SCHEME=h3 runs them over HTTP/3: the servers as for https (HTTP/3
# is served on UDP at the HTTPS port's number), and Client is H3Client, the
# same idea over one QUIC connection (aioquic).
SCHEME = os.environ.get("GATLING_SCHEME", "http")
TLS = SCHEME in ("https", "h2", "h3")
H2 = SCHEME == "h2"
H3 = SCHEME == "h3"
MUX = H2 or H3  # each request a stream of one connection
# what a response's status line says, and the access log's request line
HTTP_VERSION = {"h2": "HTTP/2", "h3": "HTTP/3"}.get(SCHEME, "HTTP/1.1")
LOG_VERSION = {"h2": "HTTP/2.0", "h3": "HTTP/3.0"}.get(SCHEME, "HTTP/1.1")
_pki = []


def test_pki():
    """The directory of the throwaway CA (ca.pem) and certs/server.pem."""
    if not _pki:
        import tempfile
        d = tempfile.mkdtemp(prefix="gatling-pki-")
        subprocess.run(["sh", os.path.join(ROOT, "dist", "mkcert.sh"), d], check=True,
                       capture_output=True, timeout=60)
        _pki.append(d)
    return _pki[0]


_CLIENT_CA_CNF = """[ca]
default_ca = c
[c]
dir = {d}
database = {d}/index.txt
new_certs_dir = {d}/new
serial = {d}/serial
crlnumber = {d}/crlnumber
certificate = {d}/ca.pem
private_key = {d}/ca.key
default_md = sha256
default_days = 30
default_crl_days = 30
policy = p
unique_subject = no
x509_extensions = ext
[p]
organizationName = optional
commonName = supplied
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
"""


def _ossl(*args, cwd=None):
    subprocess.run(("openssl",) + args, check=True, capture_output=True, timeout=60, cwd=cwd)


def _new_ca(d, name, cn):
    _ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
          "-days", "30", "-subj", "/O=gatling tests/CN=" + cn,
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign",
          "-keyout", os.path.join(d, name + ".key"), "-out", os.path.join(d, name + ".pem"))


def client_pki(parent):
    """Client certificates for mutual TLS (issue 66), made with openssl in
    parent/client once: the client CA (ca.pem, ca.key; an `openssl ca`
    database beside them) and its CRL (crl.pem), another CA that issued none
    of ours (other-ca.pem), and clients, each a PEM file holding certificate
    and key: alice.pem and bob.pem (valid), expired.pem (valid in January
    2020 only), revoked.pem (listed in crl.pem) and stranger.pem (CN=alice
    too, from other-ca.pem).  Returns the directory."""
    d = os.path.join(parent, "client")
    if os.path.exists(os.path.join(d, "crl.pem")):
        return d
    os.makedirs(os.path.join(d, "new"), exist_ok=True)
    open(os.path.join(d, "index.txt"), "w").close()
    for f in ("serial", "crlnumber"):
        with open(os.path.join(d, f), "w") as fh:
            fh.write("1000\n")
    cnf = os.path.join(d, "ca.cnf")
    with open(cnf, "w") as fh:
        fh.write(_CLIENT_CA_CNF.format(d=d))
    _new_ca(d, "ca", "client CA")
    _new_ca(d, "other-ca", "client CA")  # the same name, another key
    clients = {"alice": (), "bob": (), "revoked": (),
               "expired": ("-startdate", "20200101000000Z", "-enddate", "20200201000000Z")}
    for name, dates in list(clients.items()) + [("stranger", None)]:
        key, csr, crt = (os.path.join(d, name + x) for x in (".key", ".csr", ".crt"))
        _ossl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
              "-subj", "/O=gatling tests/CN=" + ("alice" if name == "stranger" else name),
              "-keyout", key, "-out", csr)
        if dates is None:
            ext = os.path.join(d, "ext")
            with open(ext, "w") as fh:
                fh.write("basicConstraints=critical,CA:FALSE\nextendedKeyUsage=clientAuth\n")
            _ossl("x509", "-req", "-in", csr, "-CA", os.path.join(d, "other-ca.pem"),
                  "-CAkey", os.path.join(d, "other-ca.key"), "-CAcreateserial",
                  "-days", "30", "-extfile", ext, "-out", crt)
        else:
            _ossl("ca", "-batch", "-config", cnf, "-notext", "-in", csr, "-out", crt, *dates)
        with open(os.path.join(d, name + ".pem"), "w") as fh:
            fh.write(open(crt).read() + open(key).read())
    _ossl("ca", "-config", cnf, "-revoke", os.path.join(d, "revoked.crt"))
    _ossl("ca", "-config", cnf, "-gencrl", "-out", os.path.join(d, "crl.pem"))
    return d


# Tests whose subject is plain TCP behaviour that TLS changes by design: a 503
# written before any handshake (HTTPS refusals just close), half-closes,
# byte-level timing of raw sockets, other tools that speak plain HTTP.  What
# the caps and rates (-N, -K, -A, -B) do on the HTTPS port is tested in
# test_tls.py instead.  They are left out of the h2 and h3 passes too (TLS).
http_only = pytest.mark.skipif(TLS, reason="plain HTTP by design (see conftest)")

# The backends after the first (the first is epoll on Linux): a module whose
# tests are about what sits above io/ (a codec's rules and defences, the
# cache) runs those on the first backend and its sanitizer build only, and
# keeps on every backend the tests that lean on the loop (deadlines, wakeups,
# writes that block); see first_backend_only.
OTHER_BACKENDS = ("uring", "sigio", "poll", "kqueue")


def first_backend_only(request, names, why):
    """Skip the test request names when it runs on one of OTHER_BACKENDS and
    its name (without parameters) is in names."""
    b = request.node.callspec.params.get("build") if hasattr(request.node, "callspec") else None
    if b in OTHER_BACKENDS and request.node.originalname in names:
        pytest.skip(why)


# Tests whose requests or assertions cannot be said in HTTP/2: the HTTP/1.1
# parser and framing (bad request lines, chunked bodies, HTTP/1.0, 100-continue),
# connection management (Connection: close, keep-alive counts, half-closes,
# pipelining limits), byte-level timing of a request, tools that speak only
# HTTP/1.1 (ab, wrk).  Mark them explicitly, with the reason; H2Client fails
# (NotH2) on a request it cannot turn into a stream, never skips one.  The same
# holds for HTTP/3 (H3Client, NotH3): h1_only skips in the h2 and h3 passes.
def h1_only(reason):
    return pytest.mark.skipif(MUX, reason="HTTP/1.1 only: " + reason)


# Tests that need a client with no HTTP/3 here: Debian 12's curl is built
# without it (curl_version_args() asks for --http3-only in the h3 pass, so an
# unmarked curl test fails there, saying so), and ab, wrk, goaccess's feeds,
# h2load's TCP modes are TCP clients.  Mark them with the reason; where it is
# cheap a test uses Client (H3Client) instead.
def no_h3_client(reason):
    return pytest.mark.skipif(H3, reason="no HTTP/3 client for this: " + reason)


# A test that shows a server bug over HTTP/2 (named in the reason): expected to
# fail in the h2 pass until the server is fixed; not strict, so the fix's own
# change can drop the mark.
def h2_bug(reason):
    return pytest.mark.xfail(H2, reason="server bug over HTTP/2: " + reason, strict=False)


# The same for HTTP/3 (the h3 pass).
def h3_bug(reason):
    return pytest.mark.xfail(H3, reason="server bug over HTTP/3: " + reason, strict=False)


def url(port, path="/"):
    """The URL of path on a test server, in the suite's scheme (curl, ab and
    wrk take it; curl trusts the test CA through CURL_CA_BUNDLE)."""
    if TLS:
        os.environ["CURL_CA_BUNDLE"] = os.path.join(test_pki(), "ca.pem")
    return "%s://127.0.0.1:%d%s" % ("https" if TLS else "http", port, path)


def curl_version_args():
    """curl's arguments for the suite's protocol: --http2 in the h2 pass (curl
    would offer h2 by ALPN anyway; this says so), --http3-only in the h3 pass
    (which Debian 12's curl refuses: a curl test there wants no_h3_client),
    none otherwise."""
    return ["--http2"] if H2 else ["--http3-only"] if H3 else []


def client_tls_context(alpn=None):
    import ssl
    ctx = ssl.create_default_context(cafile=os.path.join(test_pki(), "ca.pem"))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def import_h2():
    """Python's h2 (Debian's python3-h2, pure Python): from the interpreter's
    own packages, else from Debian's /usr/lib/python3/dist-packages (the suite
    may run under another python3 than /usr/bin/python3)."""
    import sys
    try:
        import h2.connection  # noqa: F401
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import h2.connection  # noqa: F401
        except ImportError:
            raise ImportError("GATLING_SCHEME=h2 needs Python's h2 (apt-get install "
                              "python3-h2, or pip install h2; tests/setup.sh does it)")
    import h2
    return h2


# Lines on the server's stderr that always mean a bug.
ALARMING = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
            "Segmentation fault", "AddressSanitizer:DEADLYSIGNAL", "stack smashing",
            "double free", "malloc(): ", "free(): ", "WARNING: ThreadSanitizer",
            "ERROR: ThreadSanitizer")

# The waits below are hang detection: each ends as soon as what it waits for
# happens, so a passing test does not spend them.  They are generous because
# make check's first phase runs ~20 passes on 2 CPUs: a sanitizer build there
# waits hundreds of milliseconds for a CPU (a close "at once" took 1.13 s).
START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0
# default: a response that takes longer than this is a hang.  15 s, not 5: a
# password check or a gzip runs on the worker threads, at SCHED_IDLE (jobs.c),
# which a CPU that other processes keep busy runs only when it has nothing
# else: a 30 ms hash took 1.4 s with the machine busy, and more is possible.
IO_TIMEOUT = 15.0
FILE_CACHE_WAIT = 6.0  # the open-file cache closes idle files after ~1 s
SOCKET_CLOSE_WAIT = 6.0  # the server notices a client's close within a few ms


# `make check` runs the suite once per build, several builds at a time
# (tests/run-check); tests marked `serial` measure CPU or wall-clock time and
# run afterwards, one build at a time, so that the other passes do not add to
# what they measure.  Even so the machine may be shared, and the kernel
# charges a task with the softirq work of whatever traffic arrives while it
# runs, so a cost test also
#   - lets the socket tables settle first (settle()),
#   - connects from a loopback address earlier tests did not use
#     (fresh_source_address()), so its connections meet none of their
#     TIME_WAIT entries, and
#   - is judged on the least of a few runs (best_of()): other load only adds,
#     so the least is the closest to the truth, while a server that really
#     costs too much fails every run.

serial = pytest.mark.serial

_IDLE_PROBE = """import os, time
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
t = time.monotonic()
while time.monotonic() - t < %r:
    pass
print(time.process_time())
"""


def skip_if_idle_class_starved(secs=0.5, least=0.5):
    """Skip when a thread of SCHED_IDLE (the class of gatling's job threads,
    site/jobs.c) gets under `least` of a CPU (half unless told) for secs:
    the machine's other work starves that class by its design, and what a
    test of the jobs' timing would measure is the neighbours (two busy loops
    on 2 CPUs left it 0.3% in one measurement, 8-24% in others, and a
    quarter let a test run that the same loops then starved past -s).
    A benchmark's condition, not the server's fault: the serial phase's tests
    that wait on a job within -s say so instead of failing."""
    import subprocess
    import sys
    if not hasattr(os, "SCHED_IDLE"):
        return
    p = subprocess.run([sys.executable, "-c", _IDLE_PROBE % secs], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        return
    share = float(p.stdout) / secs
    if share < least:
        pytest.skip("a SCHED_IDLE thread got %.0f%% of a CPU here: busy CPUs starve gatling's "
                    "job threads by design (a benchmark's condition)" % (share * 100))

# A test that asserts a bound only the plain build holds: memory a server
# keeps (peak RSS, page faults), which ASan's quarantine and shadow memory
# make meaningless on the sanitizer build, where the test still runs for its
# answers.  make check's HTTP pass on the plain twin of a sanitizer build
# runs little else (run-check --lean): these, and the modules in LEAN there.
plain_bound = pytest.mark.plain_bound


@contextlib.contextmanager
def own_user(prefix="gt"):
    """A system user and group of the test's own (PREFIX and 8 random hex
    digits: no home, no login shell), made with useradd and removed with
    userdel after: yields its name.  For a test that runs something as a
    user a package would make (the options file's `-u gatling`, which the
    package's postinst makes): it must not rely on a package that another
    test or an earlier run installed, which a fresh machine lacks (issue 91).
    A name of its own, so that it neither races test_package.py's install
    and purge nor leaves anything behind.  Root only: skips otherwise."""
    if os.geteuid() != 0:
        pytest.skip("making a user needs root")
    name = "%s%s" % (prefix, os.urandom(4).hex())
    for tries in range(20):  # another test may hold /etc/passwd's lock
        r = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                            "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
                           capture_output=True, text=True, timeout=60)
        if r.returncode == 0 or "lock" not in r.stderr:
            break
        time.sleep(0.5)
    assert r.returncode == 0, "useradd %s: %s" % (name, r.stderr)
    try:
        yield name
    finally:
        for tries in range(20):
            r = subprocess.run(["userdel", name], capture_output=True, text=True, timeout=60)
            if r.returncode == 0 or "lock" not in r.stderr:
                break
            time.sleep(0.5)
        assert r.returncode == 0, "userdel %s: %s" % (name, r.stderr)
