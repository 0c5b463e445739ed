"""tls: servers.py's peers over HTTPS: TlsServer, compare-servers' Server with a TLS
configuration for gatling, nginx and h2o (one certificate file, the same cipher list, no
access log), started and probed as Server is.  compare-tls measures them; h2.py builds
compare-h2's and compare-h3's servers on it.
"""
import os
import subprocess
import time

from . import benchlib as bl
from . import servers as cs
from .servers import HOST, IDLE_TIMEOUT

SERVER_CPU, CLIENT_CPU = bl.SERVER_CPU, bl.CLIENT_CPU
log, BenchError = bl.log, bl.BenchError
CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
           "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
           "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
           "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305")


class TlsServer(cs.Server):
    """compare-servers' Server with an HTTPS configuration."""

    def __init__(self, name, binary, tmp, docroot, nofile, cert):
        super().__init__(name, binary, tmp, docroot, nofile)
        self.cert = cert  # chain + key in one PEM file, and (gatling) its directory

    def configure(self, port):
        d, root, cert = self.dir, self.docroot, self.cert
        if self.name == "gatling":
            self.http_port = cs.free_port()
            return [self.binary, "-i", HOST, "-p", str(self.http_port), "-e", str(port), "-n",
                    "-C", os.path.dirname(cert), "-T", str(IDLE_TIMEOUT), "-s", str(IDLE_TIMEOUT)]
        if self.name == "nginx":
            os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
            user = "user nobody nogroup;\n" if os.getuid() == 0 else ""
            temps = "".join(f"    {t}_temp_path {d}/tmp/{t};\n"
                            for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            conf = (f"daemon off;\nmaster_process on;\nworker_processes 1;\n{user}"
                    f"worker_rlimit_nofile {self.nofile};\npid {d}/nginx.pid;\n"
                    f"error_log {d}/error.log warn;\n"
                    f"events {{\n    use epoll;\n    worker_connections {self.nofile - 100};\n}}\n"
                    "http {\n    access_log off;\n    sendfile on;\n    tcp_nopush on;\n"
                    f"    keepalive_timeout {IDLE_TIMEOUT}s;\n"
                    "    keepalive_requests 1000000000;\n"
                    f"    client_header_timeout {IDLE_TIMEOUT}s;\n"
                    f"    send_timeout {IDLE_TIMEOUT}s;\n{temps}"
                    "    types { application/octet-stream bin; }\n"
                    "    default_type application/octet-stream;\n"
                    f"    ssl_certificate {cert};\n    ssl_certificate_key {cert};\n"
                    "    ssl_protocols TLSv1.2 TLSv1.3;\n"
                    f"    ssl_ciphers {CIPHERS};\n    ssl_prefer_server_ciphers off;\n"
                    "    ssl_ecdh_curve X25519:prime256v1:secp384r1;\n"
                    "    ssl_session_tickets on;\n    ssl_session_cache shared:SSL:10m;\n"
                    "    ssl_session_timeout 1h;\n"
                    f"    server {{\n        listen {HOST}:{port} ssl backlog=4096;\n"
                    f"        root {root};\n    }}\n}}\n")
            path = os.path.join(d, "nginx.conf")
            argv = [self.binary, "-p", d + "/", "-e", f"{d}/error.log", "-c", path]
        elif self.name == "h2o":
            conf = (f"listen:\n  host: {HOST}\n  port: {port}\n  ssl:\n"
                    f"    certificate-file: {cert}\n    key-file: {cert}\n"
                    "    minimum-version: TLSv1.2\n"
                    f"    cipher-suite: \"{CIPHERS}\"\n    cipher-preference: client\n"
                    "num-threads: 1\n"
                    f"max-connections: {self.nofile - 100}\n"
                    f"http1-request-timeout: {IDLE_TIMEOUT}\n"
                    f"error-log: {d}/error.log\n"
                    f"temp-buffer-path: {d}\n"
                    "ssl-session-resumption:\n  mode: all\n"
                    "file.mime.addtypes:\n  application/octet-stream: .bin\n"
                    f"hosts:\n  default:\n    paths:\n      /:\n        file.dir: {root}\n")
            path = os.path.join(d, "h2o.conf")
            argv = [self.binary, "-c", path]
        with open(path, "w") as f:
            f.write(conf)
        return argv

    def start(self):
        port = cs.free_port()
        self.argv = self.configure(port)
        self.logfile = os.path.join(self.dir, "stderr.log")
        with open(self.logfile, "w") as out:
            self.proc = cs.spawn(bl.pinned(SERVER_CPU, self.argv), cwd=self.docroot,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        deadline = time.monotonic() + cs.START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with status {self.proc.returncode}: "
                                 f"{self.log_tail()}")
            if self._accepts(port):
                self.port = port
                time.sleep(0.1)
                self.startup_log = self.read_log()
                return
            time.sleep(0.05)
        raise BenchError(f"{self.name} not ready: {self.log_tail()}")

    def verify(self, ca):
        for fn, size in (cs.SMALL, cs.BIG):
            p = subprocess.run(["curl", "-sS", "--cacert", ca, "-o", "-", "-w", "\n%{http_code}",
                                f"https://{HOST}:{self.port}/{fn}"], capture_output=True,
                               timeout=30)
            body, _, code = p.stdout.rpartition(b"\n")
            with open(os.path.join(self.docroot, fn), "rb") as f:
                if code != b"200" or body != f.read():
                    raise BenchError(f"{self.name}: GET https /{fn}: {code!r}, {len(body)} bytes "
                                     f"(want 200, {size}): {p.stderr.decode().strip()}")
