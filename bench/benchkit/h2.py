"""h2: tls.py's peers speaking HTTP/2 over TLS 1.3 with one suite, and Caddy: H2Server
(nginx, h2o and gatling as TlsServer configures them, h2 switched on; Caddy from a JSON
config), the OPENSSL_CONF that holds h2o and the clients to TLS_AES_128_GCM_SHA256, and
h2load runs with the server's CPU read from /proc/PID/task/TID/sched.  compare-h2 measures
them; compare-h3 adds h3 to Caddy's and gatling's; ab reads h2load's counts.
"""
import json
import os
import resource
import subprocess
import time

from . import benchlib as bl
from . import servers as cs
from . import tls as ct
from .servers import HOST

SERVER_CPU, CLIENT_CPU = bl.SERVER_CPU, bl.CLIENT_CPU
log, BenchError = bl.log, bl.BenchError
CADDY = "/usr/bin/caddy"
SUITE = "TLS_AES_128_GCM_SHA256"

# What OPENSSL_CONF points at: every SSL_CTX made by a process that loads the default
# configuration (h2o, nghttp, Python's ssl) gets TLS 1.3 and this one suite.  h2o 2.2 has no
# setting of its own for TLS 1.3 suites; nginx and gatling are also told in their own words.
OPENSSL_CNF = f"""openssl_conf = compare_h2
[compare_h2]
ssl_conf = compare_h2_ssl
[compare_h2_ssl]
system_default = compare_h2_tls
[compare_h2_tls]
MinProtocol = TLSv1.3
Ciphersuites = {SUITE}
"""


# the servers that can take TLS 1.3 early data, and how (compare-h2 --early-data): h2o 2.2
# (OpenSSL) and Caddy (Go's crypto/tls) have none
EARLY_DATA = ("gatling", "nginx")


class H2Server(ct.TlsServer):
    """compare-tls's TlsServer (same certificate file, same options) speaking h2 over TLS;
    early: with TLS 1.3 early data where the server has it (EARLY_DATA)."""
    early = False

    def configure(self, port):
        if self.name == "caddy":
            return self.configure_caddy(port)
        argv = super().configure(port)
        if self.name == "gatling":
            # -R 0: gatling closes a connection after 10,000 requests by default, the others not
            return argv + ["-O", SUITE, "-R", "0"] + (["--early-data", "65536"] if self.early
                                                       else [])
        path = os.path.join(self.dir, f"{self.name}.conf")
        with open(path) as f:
            conf = f.read()
        if self.name == "nginx":
            conf = _patch(conf, "ssl backlog=4096;", "ssl http2 backlog=4096;")
            conf = _patch(conf, "ssl_protocols TLSv1.2 TLSv1.3;",
                          f"ssl_protocols TLSv1.3;\n    ssl_conf_command Ciphersuites {SUITE};" +
                          ("\n    ssl_early_data on;" if self.early else ""))
        else:  # h2o: its HTTP/2 idle timeout is 10 s by default; the suite from OPENSSL_CONF
            conf = _patch(conf, "num-threads: 1\n",
                          f"num-threads: 1\nhttp2-idle-timeout: {cs.IDLE_TIMEOUT}\n")
        with open(path, "w") as f:
            f.write(conf)
        return argv

    def configure_caddy(self, port):
        """Caddy 2.6: a static file_server on HOST:port with the same certificate (chain and key
        in one PEM file, which Go's loader reads for both), TLS 1.3 only (Go does not let a
        server choose TLS 1.3 suites: the clients offer the one suite, through OPENSSL_CONF and
        h2load's --tls13-ciphers), HTTP/1.1 and h2, automatic HTTPS off, no admin endpoint (no
        clash on :2019 between rounds), nothing persisted, errors only in its log (no access
        log), timeouts of IDLE_TIMEOUT as the others'.  Go sizes GOMAXPROCS from the CPU set:
        pinned to one CPU, one worker like the others."""
        d, t = self.dir, f"{cs.IDLE_TIMEOUT}s"
        conf = {
            "admin": {"disabled": True, "config": {"persist": False}},
            "storage": {"module": "file_system", "root": os.path.join(d, "caddy-data")},
            "logging": {"logs": {"default": {"level": "ERROR", "writer": {
                "output": "file", "filename": os.path.join(d, "error.log")}}}},
            "apps": {
                "tls": {"certificates": {"load_files": [
                    {"certificate": self.cert, "key": self.cert, "tags": ["compare"]}]}},
                "http": {"servers": {"compare": {
                    "listen": [f"{HOST}:{port}"],
                    "protocols": ["h1", "h2"],
                    "read_timeout": t, "read_header_timeout": t, "write_timeout": t,
                    "idle_timeout": t,
                    "automatic_https": {"disable": True},
                    "tls_connection_policies": [{
                        "certificate_selection": {"any_tag": ["compare"]},
                        "protocol_min": "tls1.3", "alpn": ["h2", "http/1.1"]}],
                    "routes": [{"handle": [{"handler": "file_server", "root": self.docroot}]}],
                }}},
            },
        }
        path = os.path.join(d, "caddy.json")
        with open(path, "w") as f:
            json.dump(conf, f, indent=1)
        os.environ.setdefault("XDG_DATA_HOME", os.path.join(d, "xdg-data"))
        os.environ.setdefault("XDG_CONFIG_HOME", os.path.join(d, "xdg-config"))
        return [self.binary, "run", "--config", path]

    def config_text(self):
        p = os.path.join(self.dir, "caddy.json")
        if self.name == "caddy" and os.path.exists(p):
            with open(p) as f:
                return f.read()
        return super().config_text()

    def verify(self, ca):
        """Every file of the docroot once over h2: status 200, the exact bytes, HTTP/2."""
        for fn in sorted(os.listdir(self.docroot)):
            p = subprocess.run(["curl", "-sS", "--http2", "--cacert", ca, "-o", "-", "-w",
                                "\n%{http_code} %{http_version}",
                                f"https://{HOST}:{self.port}/{fn}"], capture_output=True,
                               timeout=30)
            body, _, tail = p.stdout.rpartition(b"\n")
            with open(os.path.join(self.docroot, fn), "rb") as f:
                if tail != b"200 2" or body != f.read():
                    raise BenchError(f"{self.name}: GET /{fn} over h2: {tail!r}, {len(body)} "
                                     f"bytes (want 200 over HTTP/2, the file's bytes): "
                                     f"{p.stderr.decode().strip()}")


def _patch(conf, old, new):
    """conf with old replaced by new; BenchError if compare-tls's config no longer has old."""
    if old not in conf:
        raise BenchError(f"compare-tls's config has changed: no {old!r} to adapt for h2")
    return conf.replace(old, new, 1)


def cpu_seconds(server):
    """CPU time of all the server's processes and their threads (se.sum_exec_runtime of
    /proc/PID/task/TID/sched, in ms to the nanosecond: a page load costs the server a
    millisecond or two, below the 10 ms ticks of /proc/PID/stat; schedstat is off here)."""
    ms = 0.0
    for pid in server.pids():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/sched") as f:
                    for line in f:
                        if line.startswith("se.sum_exec_runtime"):
                            ms += float(line.split(":")[1])
                            break
            except (OSError, ValueError, IndexError):
                pass
    return ms / 1e3


def measured(server, cmd, timeout):
    """Run cmd; (CompletedProcess, the server's CPU seconds, the client's CPU seconds, the other
    processes' share of the two CPUs in %, wall seconds) over it."""
    cpu0, busy0 = cpu_seconds(server), cs.cpu_busy_ticks()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = bl.spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        bl.stop(p)
        raise BenchError(f"did not finish within {timeout:g} s: {' '.join(cmd)}")
    bl.forget(p)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1, srv = cs.cpu_busy_ticks(), cpu_seconds(server) - cpu0
    cli = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    other = max((busy1[SERVER_CPU] - busy0[SERVER_CPU]) / cs.CLK_TCK - srv,
                (busy1[CLIENT_CPU] - busy0[CLIENT_CPU]) / cs.CLK_TCK - cli, 0.0)
    return (subprocess.CompletedProcess(cmd, p.returncode, out, err), srv, cli,
            100 * other / wall, wall)


def h2load_counts(text):
    """The figures of an h2load report: requests, ok (2xx), errors, bytes, seconds, cipher."""
    import re
    r = {}
    m = re.search(r"^finished in ([\d.]+)(ms|s),", text, re.M)
    if m:
        r["secs"] = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    m = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text, re.M)
    if m:
        r["done"], r["succeeded"] = int(m.group(3)), int(m.group(4))
        r["failed"], r["errored"], r["timeout"] = (int(m.group(i)) for i in (5, 6, 7))
    m = re.search(r"^status codes: (\d+) 2xx", text, re.M)
    r["ok"] = int(m.group(1)) if m else 0
    m = re.search(r"^traffic: \S+ \((\d+)\) total", text, re.M)
    r["bytes"] = int(m.group(1)) if m else 0
    m = re.search(r"^Cipher: (\S+)", text, re.M)
    r["cipher"] = m.group(1) if m else None
    m = re.search(r"^Application protocol: (\S+)", text, re.M)
    r["proto"] = m.group(1) if m else None
    return r


def run_h2load(a, server, path, conns, streams, duration, cmd_log):
    """One h2load run: a sample dict (rps, mbs, cpu per request and per MB, errors, noise)."""
    cmd = bl.pinned(CLIENT_CPU, ["h2load", "-t", "1", "-c", str(conns), "-m", str(streams),
                                 "-D", bl.secs_str(duration), "--tls13-ciphers", SUITE,
                                 f"https://{HOST}:{server.port}/{path}"])
    cmd_log.append(" ".join(cmd))
    p, srv, cli, other, wall = measured(server, cmd, duration + 60)
    r = h2load_counts(p.stdout)
    if p.returncode != 0 or "secs" not in r or "done" not in r:
        raise BenchError(f"h2load failed ({p.returncode}): {(p.stderr or p.stdout).strip()[-500:]}")
    # with -D, responses still arriving at the end count in "status codes" but not in "done"
    errors = r["done"] - r["succeeded"] + r["errored"] + r["timeout"]
    if r["cipher"] != SUITE or r["proto"] != "h2":
        raise BenchError(f"h2load negotiated {r['proto']} with {r['cipher']}, not h2 with {SUITE}")
    n = r["succeeded"]
    s = {"requests": n, "bytes": r["bytes"], "secs": r["secs"], "errors": errors,
         "rps": n / r["secs"], "mbs": r["bytes"] / r["secs"] / 1e6,
         "server_cpu_s": srv, "server_cpu_pct": 100 * srv / r["secs"],
         "client_cpu_pct": 100 * cli / wall, "other_cpu_pct": other, "cipher": r["cipher"]}
    s["cpu_per_req_us"] = 1e6 * srv / n if n else None
    s["cpu_per_mb_us"] = 1e6 * srv / (r["bytes"] / 1e6) if r["bytes"] else None
    return s


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "ms":
        return f"{v:.2f}"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def caddy_version(binary):
    return bl.tool_version([binary, "version"])
