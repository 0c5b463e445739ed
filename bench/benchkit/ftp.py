"""ftp: the FTP peers (vsftpd standalone with its own config, pure-ftpd with options only,
gatling -f) serving anonymous downloads from a fresh tree under the `ftp` user's home:
FtpServer (start/stop, the Pss of its whole process tree), where their binaries are, whether a
gatling binary has FTP, free passive port ranges.  compare-ftp measures them;
tests/integration/bench/test_loadgen_ftp.py and test_compare_ftp.py start them too.
"""
import ftplib
import os
import pwd
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time

from . import benchlib as bl

log, BenchError = bl.log, bl.BenchError
SERVER_CPU, CLIENT_CPU = bl.SERVER_CPU, bl.CLIENT_CPU
HOST = "127.0.0.1"
FILES = {"1k.bin": 1024, "1m.bin": 1024 * 1024}
IDLE_TIMEOUT = 600  # seconds: every server's idle limits, far beyond any measurement
START_TIMEOUT = 10.0
PASV_SPAN = 2000  # passive ports per server (vsftpd, pure-ftpd)

# Debian's vsftpd and pure-ftpd packages conflict (both provide ftp-server): tests/setup.sh
# installs one and unpacks the other's .deb under /opt/NAME
BINARIES = {"vsftpd": ["/usr/sbin/vsftpd", "/opt/vsftpd/usr/sbin/vsftpd"],
            "pure-ftpd": ["/usr/sbin/pure-ftpd", "/opt/pure-ftpd/usr/sbin/pure-ftpd"]}


def ftp_home():
    """The home of the `ftp` user (anonymous FTP's root), or None."""
    try:
        return pwd.getpwnam("ftp").pw_dir
    except KeyError:
        return None


def make_tree(home):
    """A fresh world-readable directory under home with the files; its name (the URL path)."""
    d = tempfile.mkdtemp(prefix="compare-ftp-", dir=home)
    os.chmod(d, 0o755)
    for fn, size in FILES.items():
        with open(os.path.join(d, fn), "wb") as f:
            f.write(os.urandom(size))
        os.chmod(os.path.join(d, fn), 0o644)
    return d


def find_binary(name, given=None):
    if given:
        return given
    for path in BINARIES[name]:
        if os.access(path, os.X_OK):
            return path
    return shutil.which(name) or BINARIES[name][0]


def gatling_has_ftp(binary):
    """Does this gatling have the FTP option (-f PORT in its usage)?"""
    try:
        r = subprocess.run([binary, "-h"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return re.search(r"^\s*-f \S+.*\bFTP\b", r.stdout + r.stderr, re.M | re.I) is not None


def low_ports(span=PASV_SPAN):
    """A block of span ports below the ephemeral range whose first port is free now: (first,
    last).  Below it, because a port bind(0) gave would be free only until the next bind(0) or
    connect() of anyone (gatling's own -p 0 among them) picked it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        lo = random.randrange(10000, max(low - span, 10001))
        with socket.socket() as s:
            try:
                s.bind((HOST, lo))
            except OSError:
                continue
        return lo, lo + span - 1
    raise BenchError("no free block of passive ports")


def tree_pids(root):
    """root and all its descendants (by the parent ids in /proc/PID/stat)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


class FtpServer:
    """One FTP server instance: its config, start and stop, verification and memory probes.
    xferlog: a file for vsftpd's transfer log (tests count downloads in it); default none."""

    def __init__(self, name, binary, tmp, home, nofile=20000, xferlog=None):
        self.name, self.binary, self.home, self.nofile = name, binary, home, nofile
        self.xferlog = xferlog
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.proc, self.port, self.argv, self.conf = None, None, None, None

    def configure(self, port):
        """Write the config for port; return the argv."""
        lo, hi = low_ports()
        maxc = str(self.nofile)
        if self.name == "gatling":  # -H: the root itself, no virtual host directories
            return [self.binary, "-i", HOST, "-p", "0", "-f", str(port), "-n", "-E", "-H", "-T",
                    str(IDLE_TIMEOUT)]
        if self.name == "pure-ftpd":  # anonymous only, no syslog, idle limit in minutes
            return [self.binary, "-S", f"{HOST},{port}", "-e", "-4", "-H", "-f", "none",
                    "-c", maxc, "-C", maxc, "-p", f"{lo}:{hi}", "-I", str(IDLE_TIMEOUT // 60)]
        empty = os.path.join(self.dir, "empty")  # vsftpd's secure_chroot_dir: root's, empty
        os.makedirs(empty, exist_ok=True)
        log_lines = (f"xferlog_enable=YES\nxferlog_std_format=YES\nxferlog_file={self.xferlog}\n"
                     if self.xferlog else "xferlog_enable=NO\n")
        self.conf = (f"listen=YES\nlisten_ipv6=NO\nlisten_address={HOST}\nlisten_port={port}\n"
                     "background=NO\nanonymous_enable=YES\nlocal_enable=NO\nwrite_enable=NO\n"
                     f"anon_root={self.home}\nno_anon_password=YES\n"
                     "anon_world_readable_only=YES\n"
                     f"pasv_enable=YES\npasv_min_port={lo}\npasv_max_port={hi}\n"
                     "max_clients=0\nmax_per_ip=0\n"
                     f"idle_session_timeout={IDLE_TIMEOUT}\n"
                     f"data_connection_timeout={IDLE_TIMEOUT}\n"
                     "accept_timeout=60\nconnect_timeout=60\n" + log_lines +
                     "dirmessage_enable=NO\nuse_sendfile=YES\nseccomp_sandbox=NO\n"
                     f"secure_chroot_dir={empty}\nftpd_banner=compare-ftp\n")
        path = os.path.join(self.dir, "vsftpd.conf")
        with open(path, "w") as f:
            f.write(self.conf)
        return [self.binary, path]

    def start(self):
        self.port = low_ports(1)[0]
        self.argv = self.configure(self.port)
        self.logfile = os.path.join(self.dir, "stderr.log")
        with open(self.logfile, "w") as out:
            self.proc = bl.spawn(bl.pinned(SERVER_CPU, self.argv), cwd=self.home,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with status {self.proc.returncode}: "
                                 f"{self.log_tail()}")
            try:
                with ftplib.FTP() as f:
                    f.connect(HOST, self.port, timeout=2)  # the 220 greeting
                return
            except (OSError, EOFError, ftplib.Error):
                time.sleep(0.05)
        raise BenchError(f"{self.name} not ready after {START_TIMEOUT:.0f} s: {self.log_tail()}")

    def stop(self):
        if self.proc:
            bl.stop_session(self.proc)
            self.proc = None

    def log_tail(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()[-500:].strip()
        except OSError:
            return ""

    def url(self, sub, fn):
        return f"ftp://{HOST}:{self.port}/{sub}/{fn}"

    def verify(self, tree):
        """Every file once, anonymous, passive: the exact bytes."""
        sub = os.path.basename(tree)
        for fn in FILES:
            got = bytearray()
            try:
                with ftplib.FTP() as f:
                    f.connect(HOST, self.port, timeout=10)
                    f.login()
                    f.retrbinary(f"RETR {sub}/{fn}", got.extend)
            except (OSError, EOFError, ftplib.Error) as e:
                raise BenchError(f"{self.name}: RETR {sub}/{fn}: {e}")
            with open(os.path.join(tree, fn), "rb") as f:
                if bytes(got) != f.read():
                    raise BenchError(f"{self.name}: RETR {sub}/{fn}: {len(got)} bytes, not the "
                                     "file's")

    def pids(self):
        return tree_pids(self.proc.pid) if self.proc else []

    def cpu_ticks(self):
        """{(pid, start time): utime + stime} of every process of the server's tree now."""
        out = {}
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    v = f.read().rsplit(")", 1)[1].split()
                out[pid, v[19]] = int(v[11]) + int(v[12])  # stat(5) fields 22, 14, 15
            except (OSError, ValueError, IndexError):
                pass
        return out

    def memory(self):
        """{"pss": bytes, "procs": n} over the server's whole process tree."""
        pss, procs = 0, 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            pss += int(line.split()[1]) * 1024
                            procs += 1
                            break
            except (OSError, ValueError, IndexError):
                pass
        return {"pss": pss, "procs": procs}
