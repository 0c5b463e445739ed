"""servers: the peers a driver starts and measures, on one machine: gatling, nginx,
lighttpd and h2o serving static files, each with a minimal configuration in a temporary
directory (127.0.0.1, a free port, no access log, sendfile, long keep-alive, 10,000+
connections; nginx with one worker): Server (config writer, start/stop, /proc probes over
all its processes), their versions, the docroot of 1 KiB and 1 MiB files, the CPUs' busy
ticks, and the child-process bookkeeping the drivers share (benchlib's, under the names the
drivers use).  compare-servers measures them; compare-static, compare-tls (tls.py),
compare-h2 (h2.py), compare-dynamic, compare-cache, compare-pool, fastpath, slashdot and
validate-loadgen start them too.
"""
import os
import http.client
import socket
import subprocess
import time

from . import benchlib as bl

SERVER_CPU, CLIENT_CPU = bl.SERVER_CPU, bl.CLIENT_CPU
HOST = "127.0.0.1"
SMALL = ("1k.bin", 1024)
BIG = ("1m.bin", 1024 * 1024)
IDLE_TIMEOUT = 600  # seconds; every server's idle/keep-alive timeout, far beyond any measurement
START_TIMEOUT = 10.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
BINARIES = {"nginx": "/usr/sbin/nginx", "lighttpd": "/usr/sbin/lighttpd", "h2o": "/usr/bin/h2o"}
REPO = bl.REPO
log, BenchError = bl.log, bl.BenchError

# (benchlib: spawn, stop_session, stop_all; the names below are what the other drivers use)
_children = bl.CHILDREN  # Popen objects still to be reaped
spawn = bl.spawn  # a session of its own, SIGTERM if this script dies
proc_stat, session_pids = bl.proc_stat, bl.session_pids
stop = bl.stop_session


def proc_stime(pid):
    """Kernel-mode CPU ticks of one process (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[12])
    except (OSError, IndexError, ValueError):
        return 0


def cleanup_children():
    bl.stop_all(session=True, grace=2.0)


def _on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


free_port = bl.free_port


class Server:
    """One server instance: config writer, start/stop, and /proc probes over all its processes."""

    def __init__(self, name, binary, tmp, docroot, nofile):
        self.name, self.binary, self.docroot, self.nofile = name, binary, docroot, nofile
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        self.proc = None
        self.port = None
        self.argv = None
        self.startup_log = ""

    # -- configs ---------------------------------------------------------------------------
    def configure(self, port):
        """Write the config for port; return the argv.  gatling has no file: options only."""
        d, root = self.dir, self.docroot
        if self.name == "gatling":
            # -s as -T: the memory measurement holds connections that never send a request
            return [self.binary, "-i", HOST, "-p", "0", "-n", "-T", str(IDLE_TIMEOUT), "-s",
                    str(IDLE_TIMEOUT)]
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
                    f"    server {{\n        listen {HOST}:{port} backlog=4096;\n"
                    f"        root {root};\n    }}\n}}\n")
            path = os.path.join(d, "nginx.conf")
            argv = [self.binary, "-p", d + "/", "-e", f"{d}/error.log", "-c", path]
        elif self.name == "lighttpd":
            # lighttpd refuses more connections than max-fds/2 (and cannot raise the hard limit)
            conf = (f'server.document-root = "{root}"\nserver.bind = "{HOST}"\n'
                    f"server.port = {port}\n"
                    f'server.errorlog = "{d}/error.log"\n'
                    f"server.max-fds = {self.nofile}\n"
                    f"server.max-connections = {self.nofile // 2}\n"
                    "server.max-keep-alive-requests = 1000000000\n"
                    f"server.max-keep-alive-idle = {IDLE_TIMEOUT}\n"
                    f"server.max-read-idle = {IDLE_TIMEOUT}\n"
                    f"server.max-write-idle = {IDLE_TIMEOUT}\n"
                    'server.network-backend = "sendfile"\n'
                    'server.event-handler = "linux-sysepoll"\n'
                    "server.listen-backlog = 4096\n"
                    'mimetype.assign = (".bin" => "application/octet-stream")\n')
            path = os.path.join(d, "lighttpd.conf")
            argv = [self.binary, "-D", "-f", path]
        elif self.name == "h2o":
            # h2o 2.2 has no per-connection request limit and no sendfile (it preads and writes);
            # http1-request-timeout is also its keep-alive idle timeout.  No pid-file: h2o writes
            # it after dropping to nobody.
            conf = (f"listen:\n  host: {HOST}\n  port: {port}\n"
                    "num-threads: 1\n"
                    f"max-connections: {self.nofile - 100}\n"
                    f"http1-request-timeout: {IDLE_TIMEOUT}\n"
                    f"error-log: {d}/error.log\n"
                    f"temp-buffer-path: {d}\n"
                    "file.mime.addtypes:\n  application/octet-stream: .bin\n"
                    f"hosts:\n  default:\n    paths:\n      /:\n        file.dir: {root}\n")
            path = os.path.join(d, "h2o.conf")
            argv = [self.binary, "-c", path]
        with open(path, "w") as f:
            f.write(conf)
        return argv

    def config_text(self):
        for fn in ("nginx.conf", "lighttpd.conf", "h2o.conf"):
            p = os.path.join(self.dir, fn)
            if os.path.exists(p):
                with open(p) as f:
                    return f.read()
        return None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self):
        port = None if self.name == "gatling" else free_port()
        self.argv = self.configure(port)
        self.logfile = os.path.join(self.dir, "stderr.log")
        with open(self.logfile, "w") as out:
            self.proc = spawn(bl.pinned(SERVER_CPU, self.argv), cwd=self.docroot,
                              stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with status {self.proc.returncode}: "
                                 f"{self.log_tail()}")
            if self.name == "gatling":
                port = (bl.listening_port(self.read_log()) or (None, None))[1]
            if port and self._accepts(port):
                self.port = port
                time.sleep(0.1)
                self.startup_log = self.read_log()
                return
            time.sleep(0.05)
        raise BenchError(f"{self.name} not ready after {START_TIMEOUT:.0f} s: {self.log_tail()}")

    @staticmethod
    def _accepts(port):
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self):
        if self.proc:
            stop(self.proc)
            self.proc = None

    def read_log(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self):
        text = self.read_log()
        err = os.path.join(self.dir, "error.log")
        if os.path.exists(err):
            with open(err, errors="replace") as f:
                text += f.read()
        return " | ".join(text.strip().splitlines()[-5:]) or "(no output)"

    def verify(self):
        """GET both files once; the body must be the file, byte for byte."""
        for fn, size in (SMALL, BIG):
            c = http.client.HTTPConnection(HOST, self.port, timeout=5)
            try:
                c.request("GET", "/" + fn)
                r = c.getresponse()
                body = r.read()
            finally:
                c.close()
            with open(os.path.join(self.docroot, fn), "rb") as f:
                want = f.read()
            if r.status != 200 or body != want:
                raise BenchError(f"{self.name}: GET /{fn} gave status {r.status}, "
                                 f"{len(body)} bytes (want 200, {size} bytes, same content)")

    # -- /proc probes ----------------------------------------------------------------------
    def pids(self):
        return session_pids(self.proc.pid)

    def cpu_ticks(self):
        return sum((proc_stat(p) or (0, 0, 0))[2] for p in self.pids())

    def kernel_ticks(self):
        """stime alone: the part of cpu_ticks spent in the kernel."""
        return sum(proc_stime(p) for p in self.pids())

    def memory(self):
        """Bytes summed over all the server's processes, from smaps_rollup: rss, pss, and anon
        (Pss_Anon: the heap and stacks, where connection state lives; unlike Pss of shared
        libraries it does not move when unrelated processes on the machine start or exit)."""
        m = {"rss": 0, "pss": 0, "anon": 0}
        keys = {"Rss": "rss", "Pss": "pss", "Pss_Anon": "anon"}
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        k, _, v = line.partition(":")
                        if k in keys:
                            m[keys[k]] += int(v.split()[0]) * 1024
            except OSError:
                pass
        return m

    def sockets(self):
        n = 0
        for pid in self.pids():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
                except OSError:
                    pass
        return n


def version_of(name, binary):
    argv = {"nginx": [binary, "-v"], "lighttpd": [binary, "-v"], "h2o": [binary, "--version"]}
    if name not in argv:
        return None  # gatling: its startup log line says what it is
    try:
        r = subprocess.run(argv[name], capture_output=True, text=True, timeout=5)
        return (r.stdout + r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def cpu_busy_ticks():
    """{cpu index: busy ticks} from /proc/stat (busy = all but idle and iowait)."""
    busy = {}
    with open("/proc/stat") as f:
        for line in f:
            name, *v = line.split()
            if name.startswith("cpu") and name != "cpu":
                v = [int(x) for x in v]
                busy[name[3:]] = sum(v[:8]) - v[3] - v[4]
    return busy


def make_docroot(tmp):
    root = os.path.join(tmp, "docroot")
    os.mkdir(root)
    for fn, size in (SMALL, BIG):
        with open(os.path.join(root, fn), "wb") as f:
            f.write(os.urandom(size))
        os.chmod(os.path.join(root, fn), 0o644)
    # servers that drop to nobody (nginx workers, h2o) must read the docroot
    os.chmod(tmp, 0o755)
    os.chmod(root, 0o755)
    return root
