"""gRPC's own interop suite through gatling (issue 75): grpc-go's interop
server (google.golang.org/grpc/interop/server) behind gatling's h2c/ and h2/
pools, and grpc-go's interop client (interop/client) through it, one test
case of the client's at a time.  Both are grpc-go's, at the version
tests/setup.sh pins (GRPC_INTEROP_VERSION) and go installs into
GOPATH/bin/grpc-interop-VERSION/; without them every test skips, saying why.

The paths, each case on each:
  direct-h2c, direct-tls  the client straight to an interop server (plain
                          h2c; TLS with a certificate for interop.test of a CA
                          the module makes): the reference;
  FRONT-BACK via gatling  the client to gatling over h2c (its plain port, by
                          prior knowledge) or TLS (its HTTPS port, --use_tls
                          with the test CA, --server_host_override localhost),
                          gatling to a pool of two interop servers over h2c
                          (an h2c/ pool) or TLS (an h2/ pool, --proxy-ca the
                          module's CA, name=interop.test);
  FRONT-BACK via nginx    the reference proxy, where nginx is installed
                          (setup.sh's bench level): grpc_pass to the same pool,
                          h2c to h2c and TLS to TLS (all 18 cases pass there).
A fresh gatling for each case and path: a fresh pool, whose backend
connections the case's first call finds still opening (the crash of issue
75 needs one).  A path through gatling is required to pass where the
direct run over the client's and the backends' transports passes; gatling
must be alive after the case, then exit 0 on SIGTERM with no sanitizer's
report on stderr (checked in the test: a crash is the case's failure).  Every client run has a deadline (CLIENT_TIMEOUT):
a case that hangs fails, naming the case, with both sides' output, and the
module stays within minutes when every case hangs.

The cases are every one the client offers (its --help and its source's
switch: the --help list leaves out the soak tests) but those LEFT_OUT
says why; test_every_case_is_run_or_left_out holds that list to the
client's --help, so a new version's new case is not missed.  grpc-go's
client has no client_compressed_* or server_compressed_* cases (those are
the C++ and Java clients'), so compression is not among them.  As grpc-go's
own interop_test.sh does, every case runs with the service config of the
test_backend_metrics_load_balancer (the ORCA cases need it; the others do
not notice it).  orca_oob runs through a pool with balance=hash:user-agent:
its load reports come on a stream of their own (OpenRcaService) and must
come from the server its FullDuplexCall set them at, and a pool that sends
the two calls to two servers makes the case wait for a report that never
comes; with the client's calls kept at one backend it is a fair test (nginx
gets hash $http_user_agent for it).

Run by run-check once (ALL_ONLY: it waits on a peer, the interop servers),
on the build GATLING_BUILDS names, in make check-all only.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import free_port, ROOT, https_port, wait_for
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it

SETUP = os.path.join(ROOT, "tests", "setup.sh")
# A client run's deadline: each case takes under 0.2 s here (the soak tests' ten
# calls too) but orca_oob (2 s; its own deadline is 30 s).  After HUNG_MAX runs
# past theirs, the rest get HUNG_DEADLINE: a gatling that stalls every call
# fails the module in minutes, not in 72 deadlines.
CLIENT_TIMEOUT = {"orca_oob": 40}
DEFAULT_TIMEOUT = 15
HUNG_MAX, HUNG_DEADLINE = 3, 3
_hung = []
BACKEND_NAME = "interop.test"  # the name in the backends' certificate (name=, override)
SERVICE_CONFIG = '{"loadBalancingConfig": [{"test_backend_metrics_load_balancer": {}}]}'

# every case of grpc-go's interop client that runs here (in the order of its switch)
CASES = ["empty_unary", "large_unary", "client_streaming", "server_streaming", "ping_pong",
         "empty_stream", "timeout_on_sleeping_server", "cancel_after_begin",
         "cancel_after_first_response", "status_code_and_message", "special_status_message",
         "custom_metadata", "unimplemented_method", "unimplemented_service", "rpc_soak",
         "channel_soak", "orca_per_rpc", "orca_oob"]
_CLOUD = "needs Google Cloud credentials or a GCE metadata server"
LEFT_OUT = {
    "compute_engine_creds": _CLOUD,
    "service_account_creds": _CLOUD,
    "jwt_token_creds": _CLOUD,
    "per_rpc_creds": _CLOUD,
    "oauth2_auth_token": _CLOUD,
    "google_default_credentials": _CLOUD,
    "compute_engine_channel_credentials": _CLOUD,
    # DoPickFirstUnary wants a server ID in each answer, which grpc-go's interop
    # server never sets ("got empty server ID" direct): an xDS interop setup's case;
    # grpc-go's interop_test.sh leaves it out too
    "pick_first_unary": "needs servers that report a server ID (xDS interop), fails direct",
}
# the pool's options by case (see the docstring for orca_oob's)
POOL_OPTS = {"orca_oob": ";balance=hash:user-agent"}


def interop_version():
    """GRPC_INTEROP_VERSION=... as tests/setup.sh pins it (written there once)."""
    with open(SETUP) as f:
        m = re.search(r"^GRPC_INTEROP_VERSION=(\S+)$", f.read(), re.M)
    assert m, "tests/setup.sh pins GRPC_INTEROP_VERSION"
    return m.group(1)


def interop_dir():
    """The folder setup.sh go installed the interop server and client into, or None."""
    dirs = [os.path.expanduser("~/go")]
    go = shutil.which("go") or ("/usr/local/go/bin/go"
                                if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go:
        r = subprocess.run([go, "env", "GOPATH"], capture_output=True, text=True, timeout=30)
        dirs = [p for p in r.stdout.strip().split(":") if p] + dirs
    for gopath in dirs:
        d = os.path.join(gopath, "bin", "grpc-interop-" + interop_version())
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("server", "client")):
            return d
    return None


BIN = interop_dir()
pytestmark = pytest.mark.skipif(
    BIN is None, reason="grpc-go's interop server and client (%s) are not in "
    "GOPATH/bin/grpc-interop-%s/: tests/setup.sh go installs them where Go is "
    "(its go install failed, or there is no Go)" % (interop_version(), interop_version()))


def tail(text, n=40):
    return "\n".join(text.splitlines()[-n:])


class InteropServer:
    """grpc-go's interop server on a port the kernel chose (it says which at
    log level info; it has no flag for an address, and listens on all of
    them), over TLS with pem's certificate and key when given; its output in
    a file (log())."""

    def __init__(self, logfile, pem=None):
        self.logfile = logfile
        argv = [os.path.join(BIN, "server"), "--port", "0"]
        if pem:
            argv += ["--use_tls", "--tls_cert_file", pem, "--tls_key_file", pem]
        env = dict(os.environ, GRPC_GO_LOG_SEVERITY_LEVEL="info")
        with open(logfile, "w") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=env)

        def port():
            assert self.proc.poll() is None, "the interop server exited:\n" + self.log()
            m = re.search(r"interop server listening on \S*:(\d+)", self.log())
            return m and int(m.group(1))
        self.port = wait_for(port, 15, "the interop server's listening line")

    def log(self):
        with open(self.logfile, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Two interop servers in plaintext and two over TLS (a certificate for
    interop.test from a CA of the module's own), and the CA's file."""
    d = tmp_path_factory.mktemp("interop")
    subprocess.run(["sh", os.path.join(ROOT, "dist", "mkcert.sh"), str(d / "pki"),
                    BACKEND_NAME], check=True, capture_output=True, timeout=60)
    pem = str(d / "pki" / "certs" / "server.pem")
    servers = []
    try:
        for i in range(4):
            servers.append(InteropServer(str(d / ("server%d.log" % i)), pem if i >= 2 else None))
        yield {"h2c": servers[:2], "h2": servers[2:], "ca": str(d / "pki" / "ca.pem")}
    finally:
        for s in servers:
            s.stop()


def run_client(case, port, tls_ca=None, name=None):
    """The interop client's run of case against 127.0.0.1:port (over TLS when
    tls_ca is the CA's file, verifying name): (passed, what it printed)."""
    argv = [os.path.join(BIN, "client"), "--server_host", "127.0.0.1",
            "--server_port", str(port), "--test_case", case,
            "--service_config_json", SERVICE_CONFIG]
    if tls_ca:
        argv += ["--use_tls", "--use_test_ca", "--ca_file", tls_ca,
                 "--server_host_override", name]
    limit = CLIENT_TIMEOUT.get(case, DEFAULT_TIMEOUT)
    if len(_hung) >= HUNG_MAX:
        limit = HUNG_DEADLINE
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=limit)
    except subprocess.TimeoutExpired as e:
        _hung.append(case)
        out = (e.stdout or b"") + (e.stderr or b"")
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        return False, "%s: no end within %d s (killed; hung runs: %d, from %d on each gets "\
            "%d s); it printed:\n%s" % (case, limit, len(_hung), HUNG_MAX, HUNG_DEADLINE,
                                        tail(out))
    took = time.monotonic() - t0
    return r.returncode == 0, "%s: exit %d in %.2f s; it printed:\n%s" % (
        case, r.returncode, took, tail(r.stdout + r.stderr))


_direct = {}


def direct(lab, case, transport):
    """The case run straight at the first interop server over transport (h2c
    or h2, i.e. TLS), once per module: (passed, output)."""
    if (case, transport) not in _direct:
        s = lab[transport][0]
        _direct[case, transport] = run_client(
            case, s.port, *((lab["ca"], BACKEND_NAME) if transport == "h2" else ()))
    return _direct[case, transport]


def test_every_case_is_run_or_left_out():
    """The client's --help lists its cases: each is run here or left out with
    a reason (a version with a new case fails this until it is placed)."""
    r = subprocess.run([os.path.join(BIN, "client"), "--help"], capture_output=True, text=True,
                       timeout=30)
    text = r.stdout + r.stderr
    listed = text[text.index("-test_case"):]
    offered = set(re.findall(r"^\s+(\w+)\s*:", listed, re.M))
    assert len(offered) >= 20, text
    assert offered <= set(CASES) | set(LEFT_OUT), sorted(offered - set(CASES) - set(LEFT_OUT))
    assert not set(CASES) & set(LEFT_OUT)


@pytest.mark.parametrize("transport", ["h2c", "h2"], ids=["direct-h2c", "direct-tls"])
@pytest.mark.parametrize("case", CASES)
def test_direct(lab, case, transport):
    """The reference: the client straight to grpc-go's interop server."""
    ok, out = direct(lab, case, transport)
    assert ok, "%s direct over %s failed:\n%s\ninterop server:\n%s" % (
        case, transport, out, tail(lab[transport][0].log()))


def gatling_for(gatling, lab, case, back):
    """A fresh gatling with the pool of two interop servers over back (h2c
    or h2), every path to it, on a plain and an HTTPS port."""
    p1, p2 = (s.port for s in lab[back])
    pool = "g=%s/127.0.0.1/%d,127.0.0.1/%d%s" % (back, p1, p2, POOL_OPTS.get(case, ""))
    if back == "h2":
        pool += ";name=" + BACKEND_NAME
    args = ("-T", "10", "-C", os.path.join(pki_dir(), "certs"), "-e", "0",
            "--proxy-ca", lab["ca"], "--pool", pool, "-P", "@g/^/")
    return gatling({".proxy": ""}, args=args, check_fds=False)


@pytest.mark.parametrize("front,back", [("h2c", "h2c"), ("tls", "h2c"), ("h2c", "h2"),
                                        ("tls", "h2")],
                         ids=["h2c-h2c", "tls-h2c", "h2c-h2", "tls-h2"])
@pytest.mark.parametrize("case", CASES)
def test_through_gatling(gatling, lab, case, front, back):
    """The case through a fresh gatling: the client over front (h2c or TLS),
    gatling to its pool over back (h2c or h2 over TLS)."""
    for transport in {"h2" if front == "tls" else "h2c", back}:
        ok, out = direct(lab, case, transport)
        if not ok:
            pytest.skip("%s fails direct over %s too:\n%s" % (case, transport, out))
    srv = gatling_for(gatling, lab, case, back)
    if front == "tls":
        ok, out = run_client(case, https_port(srv), os.path.join(pki_dir(), "ca.pem"),
                             "localhost")
    else:
        ok, out = run_client(case, srv.port)
    where = "%s (%s to gatling, %s to the pool)" % (case, front, back)
    died = srv.process.poll()
    try:  # here, not at teardown: SIGTERM, exit 0, no sanitizer's report on stderr
        srv.finish()
        end = None
    except AssertionError as e:
        end = str(e)
    assert died is None, "gatling died during %s (status %s)\nclient: %s\n%s" % (
        where, died, out, end)
    assert end is None, "gatling's end after %s:\n%s\nclient: %s" % (where, end, out)
    assert ok, "%s through gatling failed, direct passed\nclient: %s\ngatling's stderr:\n%s" % (
        where, out, tail(srv.stderr_text()))


NGINX = "/usr/sbin/nginx"


def nginx_conf(d, port, lab, case, front, back):
    """nginx 1.22: one process, h2c by prior knowledge (listen ... http2) or
    TLS with the test PKI's certificate, grpc_pass (grpcs:// verified for
    interop.test over TLS) to an upstream of the pool's two interop servers
    (orca_oob's calls kept at one of them by their User-Agent, as in gatling's
    pool)."""
    os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
    temps = "".join("    %s_temp_path %s/tmp/%s;\n" % (t, d, t)
                    for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    ups = "".join("        server 127.0.0.1:%d;\n" % s.port for s in lab[back])
    if case in POOL_OPTS:
        ups += "        hash $http_user_agent;\n"
    pem = os.path.join(pki_dir(), "certs", "server.pem")
    listen = "listen 127.0.0.1:%d http2;\n" % port if front == "h2c" else (
        "listen 127.0.0.1:%d ssl http2;\n        ssl_certificate %s;\n"
        "        ssl_certificate_key %s;\n" % (port, pem, pem))
    tls = "" if back == "h2c" else (
        "            grpc_ssl_verify on;\n            grpc_ssl_trusted_certificate %s;\n"
        "            grpc_ssl_name %s;\n            grpc_ssl_server_name on;\n"
        % (lab["ca"], BACKEND_NAME))
    return ("daemon off;\nmaster_process off;\npid %s/nginx.pid;\nerror_log %s/error.log info;\n"
            "events {\n}\nhttp {\n    access_log off;\n%s"
            "    upstream pool {\n%s        keepalive 8;\n    }\n"
            "    server {\n        %s        location / {\n"
            "            grpc_pass %s://pool;\n%s        }\n    }\n}\n"
            % (d, d, temps, ups, listen, "grpc" if back == "h2c" else "grpcs", tls))


@pytest.mark.skipif(not os.access(NGINX, os.X_OK), reason="no nginx (sh tests/setup.sh bench)")
@pytest.mark.parametrize("front,back", [("h2c", "h2c"), ("tls", "h2")], ids=["h2c-h2c", "tls-h2"])
@pytest.mark.parametrize("case", CASES)
def test_through_nginx(lab, tmp_path, case, front, back):
    """The reference: the same case through a fresh nginx's grpc_pass to the
    same pool (where nginx is: tests/setup.sh installs it for the benchmarks)."""
    port, d = free_port(), str(tmp_path)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(nginx_conf(d, port, lab, case, front, back))

    def log():
        with open(os.path.join(d, "error.log"), errors="replace") as f:
            return f.read()

    def up():
        assert p.poll() is None, "nginx exited:\n" + log()
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    p = subprocess.Popen([NGINX, "-p", d + "/", "-e", d + "/error.log", "-c", d + "/nginx.conf"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_for(up, 10, "nginx listening")
        # nginx's path, not gatling's: a run that fails is tried once more (CI's
        # busy first phase saw cancel_after_begin fail once through nginx alone);
        # the second failure fails the reference
        for _ in range(2):
            if front == "tls":
                ok, out = run_client(case, port, os.path.join(pki_dir(), "ca.pem"), "localhost")
            else:
                ok, out = run_client(case, port)
            if ok or "no end within" in out:
                break
    finally:
        p.terminate()
        p.wait(10)
    assert ok, "%s through nginx (%s to it, %s to the pool):\n%s\nnginx:\n%s" % (
        case, front, back, out, tail(log()))
