"""bench/slashdot's servers under attack: the document root (compare-servers' files, a
protected directory, the gzip scenario's text files), the passwords of that directory,
gatling and nginx started for a scenario (Srv; nginx's config), and the probes that a server
does what a scenario needs (a login refused and accepted, gzip sent)."""
import http.client
import os
import re
import shutil
import subprocess
import time
import zlib

from benchkit import servers as cs
from benchkit.benchlib import make_text
from benchkit.slashdot.base import BenchError, GZIP_FILES, PASSWORD, PLACE, REALM, USER, basic, get

# ---------------------------------------------------------------------------------------------
# The document root: compare-servers' 1k.bin and 1m.bin, a protected directory, 40 text files.


def make_docroot(tmp, with_gzip):
    root = cs.make_docroot(tmp)
    os.mkdir(os.path.join(root, "private"), 0o755)
    with open(os.path.join(root, "private", "secret.txt"), "w") as f:
        f.write("the normal clients never see this\n")
    info = {}
    if with_gzip:
        d = os.path.join(root, "gz")
        os.mkdir(d, 0o755)
        total = 0
        for i in range(GZIP_FILES):
            data = make_text(1 << 20, i)
            with open(os.path.join(d, f"t{i:02d}.txt"), "wb") as f:
                f.write(data)
            if i == 0:  # one sample is enough: the files are alike
                z = zlib.compressobj(6, zlib.DEFLATED, 31)
                total = len(z.compress(data) + z.flush())
        info = {"gzip_sample_bytes": total, "gzip_total_est": total * GZIP_FILES}
    for dirpath, dirs, files in os.walk(root):
        for x in dirs:
            os.chmod(os.path.join(dirpath, x), 0o755)
        for x in files:
            os.chmod(os.path.join(dirpath, x), 0o644)
    return root, info


def make_hash():
    """(hash, how): yescrypt from mkpasswd (Debian's whois), else SHA-512 from openssl."""
    if shutil.which("mkpasswd"):
        r = subprocess.run(["mkpasswd", "-m", "yescrypt", PASSWORD], capture_output=True,
                           text=True, timeout=10)
        if r.returncode == 0 and r.stdout.startswith("$y$"):
            return r.stdout.strip(), "yescrypt (mkpasswd -m yescrypt)"
    return sha512_hash("mkpasswd -m yescrypt unavailable")


def sha512_hash(why):
    r = subprocess.run(["openssl", "passwd", "-6", PASSWORD], capture_output=True, text=True,
                       timeout=10)
    if r.returncode != 0 or not r.stdout.startswith("$6$"):
        raise BenchError(f"openssl passwd -6 failed: {r.stderr.strip()}")
    return r.stdout.strip(), f"SHA-512 crypt (openssl passwd -6; {why})"


def write_auth_files(root, tmp, hashed):
    with open(os.path.join(root, "private", ".htaccess"), "w") as f:
        f.write(f"# bench/slashdot: the first non-comment line is the realm\n{REALM}\n"
                f"{USER}:{hashed}\n")
    os.chmod(os.path.join(root, "private", ".htaccess"), 0o644)
    path = os.path.join(tmp, "htpasswd")
    with open(path, "w") as f:
        f.write(f"{USER}:{hashed}\n")
    os.chmod(path, 0o644)
    return path


# ---------------------------------------------------------------------------------------------
# Servers: gatling with options, nginx with a config of our own (1 worker, sendfile, default
# timeouts unless told, gzip for text/plain, auth_basic on /private/).

class Srv(cs.Server):
    _n = 0

    def __init__(self, kind, label, binary, ctx, cap=None, timeout=None, workers=1, wc=None):
        super().__init__(kind, binary, ctx.tmp, ctx.docroot, ctx.nofile)
        Srv._n += 1
        self.label, self.cap, self.timeout, self.workers = label, cap, timeout, workers
        self.wc = wc or cap  # nginx worker_connections (default: the open-file limit - 100)
        self.htpasswd = ctx.htpasswd
        self.dir = os.path.join(ctx.tmp, "srv", f"{Srv._n:02d}-{kind}")
        os.makedirs(self.dir, exist_ok=True)
        self.base_socks = 0

    def configure(self, port):
        if self.name == "gatling":
            argv = [self.binary, "-i", PLACE.host, "-p", "0", "-n"]
            if self.timeout:  # the soak: idle connections that never send a request outlive it
                argv += ["-T", str(self.timeout), "-s", str(min(self.timeout, 3600))]
            if self.workers > 1:
                argv += ["-W", str(self.workers)]
            if self.cap:
                argv += ["-N", str(self.cap)]
            return PLACE.argv("server", argv)
        path = os.path.join(self.dir, "nginx.conf")
        with open(path, "w") as f:
            f.write(nginx_conf(self.dir, port, self.docroot, self.htpasswd, self.nofile,
                               self.wc, self.timeout))
        return PLACE.argv("server", [self.binary, "-p", self.dir + "/", "-e",
                                     f"{self.dir}/error.log", "-c", path])

    def start(self):
        """Start, check both files, and count the sockets of the idle server (listeners):
        sockets, not descriptors, because gatling keeps the files it served open."""
        super().start()
        self.verify()
        time.sleep(0.2)
        self.base_socks = cs.Server.sockets(self)

    def socks(self):
        """Sockets above the listeners: the connections the server holds."""
        return cs.Server.sockets(self) - self.base_socks

    def settle(self, limit=10.0):
        """Wait until the server holds no connection (the last run's are closed); returns how
        many it still holds after limit seconds."""
        deadline = time.monotonic() + limit
        while self.socks() > 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        return max(0, self.socks())


def nginx_conf(d, port, root, htpasswd, nofile, wc, timeout):
    os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
    user = "user nobody nogroup;\n" if os.getuid() == 0 else ""
    temps = "".join(f"    {t}_temp_path {d}/tmp/{t};\n"
                    for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    # nginx's slow-client defences stay at their defaults (client_header_timeout,
    # client_body_timeout, send_timeout 60 s, keepalive_timeout 75 s) except in the soak, where
    # idle connections must outlive the run; the keep-alive request limit is lifted as in
    # compare-servers, so that bench's connections are not closed every 1,000 requests
    tmo = ""
    if timeout:
        tmo = "".join(f"    {k} {timeout}s;\n" for k in
                      ("keepalive_timeout", "client_header_timeout", "client_body_timeout",
                       "send_timeout"))
    return (f"daemon off;\nmaster_process on;\nworker_processes 1;\n{user}"
            f"worker_rlimit_nofile {nofile};\npid {d}/nginx.pid;\n"
            f"error_log {d}/error.log warn;\n"
            f"events {{\n    use epoll;\n    worker_connections {wc or nofile - 100};\n}}\n"
            "http {\n    access_log off;\n    sendfile on;\n    tcp_nopush on;\n"
            f"    keepalive_requests 1000000000;\n{tmo}{temps}"
            "    types { application/octet-stream bin; text/plain txt; text/html html; }\n"
            "    default_type application/octet-stream;\n"
            "    gzip on;\n    gzip_types text/plain;\n    gzip_comp_level 6;\n"
            f"    server {{\n        listen {PLACE.host}:{port} backlog=4096;\n"
            f"        root {root};\n"
            f"        location /private/ {{\n            auth_basic \"{REALM}\";\n"
            f"            auth_basic_user_file {htpasswd};\n        }}\n    }}\n}}\n")


def gatling_has_cap(binary):
    """Does this gatling know -N (the connection cap)?  Read from its -h usage."""
    try:
        r = subprocess.run([binary, "-h"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return re.search(r"\[-N\b|^\s+-N\s", r.stdout + r.stderr, re.M) is not None


def probe_auth(srv):
    """None if srv answers 401 to a wrong password and 200 to the right one, else why not."""
    try:
        st, h, _ = get(srv.port, "/private/secret.txt", {"Authorization": basic(USER, "x")})
        st2, _, _ = get(srv.port, "/private/secret.txt", {"Authorization": basic(USER, PASSWORD)})
    except (OSError, http.client.HTTPException) as e:
        return f"probe failed: {e}"
    if st != 401 or st2 != 200:
        return f"wrong password -> {st}, right password -> {st2} (want 401, 200)"
    return None


def probe_gzip(srv):
    try:
        st, h, body = get(srv.port, "/gz/t00.txt", {"Accept-Encoding": "gzip"}, timeout=10)
    except (OSError, http.client.HTTPException) as e:
        return f"probe failed: {e}"
    if st != 200 or h.get("content-encoding") != "gzip":
        return f"gz/t00.txt with Accept-Encoding: gzip -> {st}, {h.get('content-encoding')!r}"
    return None
