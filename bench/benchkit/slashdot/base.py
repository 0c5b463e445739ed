"""bench/slashdot's common ground: its log (minutes:seconds since the start), the scenarios
and their constants, where the server, the normal clients and the attackers run (Place, and
PLACE, the one the run uses), and small helpers: formatting, the ephemeral ports per source
address, a Basic Authorization header, one GET from the driver."""
import base64
import http.client
import time

from benchkit import benchlib as bl
from benchkit import servers as cs
from benchkit import wrk as wk

BenchError, median = cs.BenchError, wk.median

T_START = time.monotonic()


def log(msg):
    t = time.monotonic() - T_START
    cs.log(f"[{int(t // 60)}:{int(t % 60):02d}] {msg}")


SCENARIOS = ("slowloris", "slowbody", "slowread", "range", "auth", "gzip", "flood", "soak")
SMALL, BIG = cs.SMALL, cs.BIG          # 1k.bin (the normal clients' file), 1m.bin
NORMAL_CONNS = 50                      # bench -c 50 -k: the normal clients
TPUT_TARGET = 0.90                     # under attack >= 90% of quiet requests/s
P99_TARGET = 2.0                       # under attack p99 <= 2x quiet
SLOW_CONNS = 1000                      # slowhttptest -c
AUTH_RATE, AUTH_CONNS = 100, 10        # bad logins/s, over at most 10 connections in flight
GZIP_FILES, GZIP_RATE, GZIP_CONNS = 40, 24, 8
GZIP_CACHE = 16 << 20                  # gatling's ENC_CACHE_DEFAULT (gatling/encoding.h)
FD_SLACK = 200                         # per process: listeners, stdio, epoll, files, margin
REUSEPORT_SKEW = 1.05                  # gatling -W 2: SO_REUSEPORT's hash is not exactly even
RAMP_STALL = 20.0                      # soak: no new idle connection for this long = failed
SOAK_RSS_EVERY = 5.0                   # seconds between RSS samples in the soak
ATTACK_NICE = 19
CLONE_NEWNET = 0x40000000              # setns(2): the network namespace
PASSWORD, USER, REALM = "slashdot-correct-horse", "alice", "slashdot"


class Place:
    """Where the server, the normal clients and the attackers run: this machine's loopback (the
    default), or each on a host of its own in a bench/netlab lab (--netlab: hosts srv, cli,
    atk).  A command runs on its host through the host's prefix (ip netns exec NS; netlab's
    Host.argv); the server listens on its host's first address and the attackers bind to
    theirs.  CPUs are the same either way: a namespace has its own network stack, not its own
    CPU, so the server stays on the server CPU and bench and the attackers on the client CPU
    (the attackers on attacker_cpu when --attacker-cpu moves them).  rt (--rt) runs the server
    and the normal clients at SCHED_FIFO 1, above every other process of a shared machine; the
    attackers stay at nice 19."""

    def __init__(self, host="127.0.0.1", sources=None, hosts=None, attacker_cpu=None, rt=False):
        self.host = host
        self.sources = list(sources or [f"127.0.0.{i}" for i in range(2, 10)])
        self.hosts = hosts or {}  # role ("server", "client", "attacker") -> netlab Host
        self.attacker_cpu, self.rt = attacker_cpu, rt

    def argv(self, role, argv):
        if self.rt and role in ("server", "client"):
            argv = ["chrt", "-f", "1"] + list(argv)
        h = self.hosts.get(role)
        return h.argv(argv) if h else list(argv)

    def into_lab(self, srv, cli, atk):
        """--netlab: the server on the lab's host srv, the normal clients on cli, the attackers
        on atk and its addresses (the CPUs and rt as they were)."""
        self.host, self.sources = srv.addrs[0], list(atk.addrs)
        self.hosts = {"server": srv, "client": cli, "attacker": atk}

    def source_range(self):
        """httpbench -b FIRST-LAST: the sources are consecutive addresses."""
        return f"{self.sources[0]}-{self.sources[-1]}"


PLACE = Place()  # main() moves it for --netlab (into_lab) and sets --attacker-cpu, --rt


class Refused(Exception):
    """A run that cannot fit the limits (descriptors, ports): refused before it starts."""


secs_arg = bl.secs_str


def fmt_int(x):
    return "-" if x is None else f"{x:,.0f}"


tool_version = bl.tool_version


def ports_per_source():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return hi - lo + 1
    except (OSError, ValueError):
        return None


def basic(user, pw):
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


def get(port, path, headers=None, timeout=5):
    c = http.client.HTTPConnection(PLACE.host, port, timeout=timeout)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def mib(x):
    return "-" if x is None else f"{x / 2**20:.1f}"
