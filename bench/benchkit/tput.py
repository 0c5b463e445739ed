"""bench/run throughput: the kernel suite's throughput rows (issue 47), measured as OpenBSD's
perform framework measures them: bulk TCP of one stream against many, UDP with empty,
MTU-sized and fragmenting datagrams, IPv4 and IPv6, over loopback, two hosts on a veth link,
through a host that forwards and through a relay process that copies or splices
(kb-stream, man/kb-stream.1).  See bench/doc/throughput.md.

The topologies are network namespaces named as bench/netlab names its labs
(netlab-tput-PID-HOST), so that `netlab gc` removes them if this process dies; tunings are
applied inside them only (a sysctl that turns out to be global is put back and refused), and
go away with them.

A run directory gets throughput.tsv (a row per test and run: status PASS / FAIL / NOEXIT,
Mbit/s, CPU), throughput-meta.json (label, kernel release, tuning), raw/tput-* (every tool's
output) and commands.txt lines; tputreport.py compares any number of such directories.
"""
import json
import os
import re
import select
import subprocess
import time

from . import benchlib as bl
from . import netlab

LAB = "tput"
TOPOS = ["lo", "veth", "fwd", "copy", "splice"]
# where the sender, receiver and relay run in each topology, and the receiver's address
# by family; the chain a - r - b carries fwd, copy and splice
V4 = {"va": "198.18.%d.1", "vb": "198.18.%d.2", "a": "198.18.%d.65", "ra": "198.18.%d.66",
      "rb": "198.18.%d.129", "b": "198.18.%d.130"}
V6 = {"va": "2001:2:0:1::1", "vb": "2001:2:0:1::2", "a": "2001:2:0:2::1",
      "ra": "2001:2:0:2::2", "rb": "2001:2:0:3::2", "b": "2001:2:0:3::1"}
TUNINGS = {
    "default": [],
    # per socket (kb-stream -C): a namespace other than the first may make only the
    # algorithms of tcp_allowed_congestion_control (here reno and bbr) its default
    "cubic": [("cc", "", "cubic")],
    "bbr": [("cc", "", "bbr")],
    "reno": [("cc", "", "reno")],
    "gro-on": [("ethtool", "gro", "on")],
    "gro-off": [("ethtool", "gro", "off")],
    "tso-off": [("ethtool", "tso", "off")],
    "gso-off": [("ethtool", "gso", "off")],
    "rmem-16m": [("sysctl", "net.ipv4.tcp_rmem", "4096 131072 16777216"),
                 ("sysctl", "net.ipv4.tcp_wmem", "4096 16384 16777216")],
    "mtu-9000": [("mtu", "", "9000")],
    "rps": [("rps", "", "3")],
    # a bottleneck neither tool can be: a tbf qdisc on every veth's egress; the rows through
    # it measure the path, so kb-stream and iperf3 (--iperf3) must read the same rate
    "rate-2g": [("tbf", "2gbit", "4mb")],
}
SECS = {"quick": 1, "full": 5, "tiny": 1}
UDP_WBUF = "4000000"
# how long past -t a sender, and past the sender a receiver or relay, may take before it
# is killed and the row is NOEXIT (kb-stream bounds itself well inside these)
GRACE = {"send": 30, "other": 15}  # the UDP receiver's buffer: a descheduled receiver drops less


class TputError(Exception):
    """Something the throughput suite cannot do (bench/run says why, exit 1)."""


def rows_for(suite, only=None):
    """The tests of a suite: dicts with name, proto, family, topo, n, len (UDP)."""
    rows = []

    def add(proto, fam, topo, n, length=None):
        name = "%s%d-%s-n%d" % (proto, fam, topo, n) + ("-l%d" % length if proto == "udp"
                                                         else "")
        rows.append({"name": name, "proto": proto, "family": fam, "topo": topo, "n": n,
                     "len": length})
    streams = {"quick": [1, 10], "full": [1, 10, 100], "tiny": [1, 10]}[suite]
    for topo in TOPOS if suite != "tiny" else ["lo", "veth", "fwd", "copy", "splice"]:
        for fam in (4, 6):
            for n in streams:
                add("tcp", fam, topo, n)
    udp_topos = ["lo", "veth", "fwd"]
    flows = {"quick": [1], "full": [1, 10], "tiny": [1]}[suite]
    for topo in udp_topos:
        for fam in ((4, 6) if suite == "full" else (4,)):
            for n in flows:
                for length in (0, 1472 if fam == 4 else 1452, 8000):  # 1500-byte MTU
                    add("udp", fam, topo, n, length)
    if suite != "tiny":  # iperf3's -P 15 (--iperf3 runs it beside these)
        add("tcp", 4, "lo", 15)
        add("tcp", 4, "veth", 15)
    if only:
        keep = only.split(",")
        rows = [r for r in rows if any(re.fullmatch(k.replace("*", ".*"), r["name"])
                                       for k in keep)]
    return rows


# -- the lab ------------------------------------------------------------------------------

def ip(*args):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True)
    if r.returncode:
        raise TputError("ip %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


class Lab:
    """Namespaces l (loopback), va - vb (veth), a - r - b (r forwards, or relays), owned
    by this process, removed by down() (and by `netlab gc` if this process dies)."""

    def __init__(self):
        if os.geteuid() != 0:
            raise TputError("throughput needs root: network namespaces for its topologies")
        self.netlab = netlab
        self.owner = os.getpid()
        self.netlab.gc(quiet=True)
        self.net = int(str(self.netlab.pick_subnet().network_address).split(".")[2])
        self.v4 = {k: v % self.net for k, v in V4.items()}
        self.ns, self.cc = {}, None
        try:
            self._build()
        except BaseException:
            self.down()
            raise

    def name(self, host):
        return self.netlab.ns_name(LAB, self.owner, host)

    def _link(self, h1, h2, if1, if2, a1, a2, p6):
        ip("-n", self.ns[h1], "link", "add", if1, "type", "veth", "peer", "name", if2,
           "netns", self.ns[h2])
        for h, i, k in ((h1, if1, a1), (h2, if2, a2)):
            ip("-n", self.ns[h], "addr", "add", self.v4[k] + "/26", "dev", i)
            ip("-n", self.ns[h], "-6", "addr", "add", V6[k] + "/64", "dev", i, "nodad")
            ip("-n", self.ns[h], "link", "set", i, "up")

    def _build(self):
        for h in ("l", "va", "vb", "a", "r", "b"):
            self.ns[h] = self.name(h)
            ip("netns", "add", self.ns[h])
            ip("-n", self.ns[h], "link", "set", "lo", "up")
        self._link("va", "vb", "eth0", "eth0", "va", "vb", 1)
        self._link("a", "r", "eth0", "eth0", "a", "ra", 2)
        self._link("r", "b", "eth1", "eth0", "rb", "b", 3)
        for h, via in (("a", "ra"), ("b", "rb")):
            ip("-n", self.ns[h], "route", "add", "default", "via", self.v4[via])
            ip("-n", self.ns[h], "-6", "route", "add", "default", "via", V6[via])
        self.sysctl("r", "net.ipv4.ip_forward", "1")
        self.sysctl("r", "net.ipv6.conf.all.forwarding", "1")

    def sysctl(self, host, key, value):
        r = subprocess.run(["ip", "netns", "exec", self.ns[host], "sysctl", "-q", "-w",
                            "%s=%s" % (key, value)], capture_output=True, text=True)
        if r.returncode:
            raise TputError("%s in %s: %s" % (key, host, r.stderr.strip()))

    def prefix(self, host):
        return ["ip", "netns", "exec", self.ns[host]]

    def veths(self):
        return [(h, d) for h, devs in (("va", ["eth0"]), ("vb", ["eth0"]), ("a", ["eth0"]),
                                       ("r", ["eth0", "eth1"]), ("b", ["eth0"])) for d in devs]

    def down(self):
        if self.ns:
            self.netlab.remove_lab(LAB, self.owner)
            self.ns = {}


def placement(lab, row):
    """(sender host, receiver host, relay host or None, the address the sender sends to,
    the receiver's bind address, the relay's listen address)."""
    fam, topo = row["family"], row["topo"]
    addr = (lambda k: lab.v4[k]) if fam == 4 else (lambda k: V6[k])
    if topo == "lo":
        lo = "127.0.0.1" if fam == 4 else "::1"
        return "l", "l", None, lo, lo, None
    if topo == "veth":
        return "va", "vb", None, addr("vb"), addr("vb"), None
    if topo == "fwd":
        return "a", "b", None, addr("b"), addr("b"), None
    return "a", "b", "r", addr("ra"), addr("b"), addr("ra")


# -- tunings: inside the lab only --------------------------------------------------------

def read_root_sysctl(key):
    try:
        with open("/proc/sys/" + key.replace(".", "/")) as f:
            return f.read().strip()
    except OSError:
        return None


def apply_tuning(lab, name):
    """Apply a named tuning to every host (sysctls) and veth (ethtool, MTU, RPS) of the lab.
    Refused (TputError) when it cannot be applied, or a sysctl turns out not to be per
    network namespace (it is put back first): the lab's deletion is the restore."""
    if name not in TUNINGS:
        raise TputError("tuning %r: one of %s" % (name, ", ".join(TUNINGS)))
    for kind, key, value in TUNINGS[name]:
        if kind == "cc":
            avail = (read_root_sysctl("net.ipv4.tcp_available_congestion_control") or "").split()
            if value not in avail:
                raise TputError("tuning %s: %s is not in tcp_available_congestion_control (%s)"
                                % (name, value, " ".join(avail)))
            lab.cc = value
        elif kind == "sysctl":
            before = read_root_sysctl(key)
            if before is None:
                raise TputError("tuning %s: no sysctl %s here" % (name, key))
            for h in lab.ns:
                lab.sysctl(h, key, value)
            if read_root_sysctl(key) != before:
                subprocess.run(["sysctl", "-q", "-w", "%s=%s" % (key, before)])
                if read_root_sysctl(key) != before:
                    raise TputError("tuning %s: %s is global and could not be put back to %r: "
                                    "FIX IT BY HAND" % (name, key, before))
                raise TputError("tuning %s: %s is not per network namespace here: refused "
                                "(it was put back)" % (name, key))
        elif kind == "ethtool":
            if not bl.shutil.which("ethtool"):
                raise TputError("tuning %s: ethtool is not installed" % name)
            for h, dev in lab.veths():
                r = subprocess.run(lab.prefix(h) + ["ethtool", "-K", dev, key, value],
                                   capture_output=True, text=True)
                if r.returncode:
                    raise TputError("tuning %s: ethtool -K %s %s %s: %s" % (
                        name, dev, key, value, r.stderr.strip()))
        elif kind == "mtu":
            for h, dev in lab.veths():
                ip("-n", lab.ns[h], "link", "set", dev, "mtu", value)
        elif kind == "tbf":
            for h, dev in lab.veths():
                r = subprocess.run(["tc", "-n", lab.ns[h], "qdisc", "replace", "dev", dev, "root",
                                    "tbf", "rate", key, "burst", value, "latency", "50ms"],
                                   capture_output=True, text=True)
                if r.returncode:
                    raise TputError("tuning %s: tc qdisc tbf on %s: %s" % (
                        name, dev, r.stderr.strip()))
        elif kind == "rps":
            for h, dev in lab.veths():
                path = "/sys/class/net/%s/queues/rx-0/rps_cpus" % dev
                r = subprocess.run(lab.prefix(h) + ["sh", "-c", "echo %s > %s" % (value, path)],
                                   capture_output=True, text=True)
                if r.returncode:
                    raise TputError("tuning %s: %s: %s" % (name, path, r.stderr.strip()))


# -- one row ----------------------------------------------------------------------------

def parse_kv(text, first):
    """The key=value pairs of the last line that starts with first ('total', ...)."""
    out = None
    for line in text.splitlines():
        w = line.split()
        if w and w[0] == first:
            out = dict(x.split("=", 1) for x in w[1:] if "=" in x)
    return out


def listening(p, timeout):
    """Read a started receiver's or relay's stdout up to '# listening on port P': (P, the
    output read).  Unbuffered reads of the descriptor: a buffered readline could swallow
    the line into the buffer, and select would then wait for more."""
    got, end, fd = b"", time.monotonic() + timeout, p.stdout.fileno()
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not r:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        got += chunk
        m = re.search(rb"^# listening on port (\d+)$", got, re.M)
        if m:
            return int(m.group(1)), [got.decode(errors="replace")]
    return None, [got.decode(errors="replace")]


def finish(p, timeout, head=()):
    """Wait for a spawned tool: (exit code or None when it had to be killed, its output)."""
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        bl.stop(p, grace=1)
        out, err = p.communicate()
        rc = None
    bl.forget(p)
    return rc, "".join(head) + (out or "") + (err or "")


def start_listener(lab, host, argv, what, procs):
    p = bl.spawn(lab.prefix(host) + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                 text=True)
    procs.append(p)
    port, head = listening(p, 10)
    if port is None:
        raise TputError("%s did not start: %s" % (what, "".join(head)[-300:]))
    return p, port, head


def row_argv(tool, row, secs, role, **kw):
    """kb-stream's argv for a role: recv, relay or send."""
    n, udp = str(row["n"]), row["proto"] == "udp"
    pin = ["-A", kw["pin"][role]] if kw.get("pin") else []
    if role == "recv":
        return [tool, "-s", "-B", kw["bind"], "-n", n, "-t", "%g" % (secs + 20)] + (
            ["-u", "-w", UDP_WBUF, "-i", "2"] if udp else []) + pin
    cc = ["-C", kw["cc"]] if kw.get("cc") and not udp else []
    if role == "relay":
        return [tool, "-R", kw["mode"], "-B", kw["bind"], "-c", kw["to"], "-p", str(kw["port"]),
                "-n", n, "-t", "%g" % (secs + 20)] + cc + pin
    return [tool, "-c", kw["to"], "-p", str(kw["port"]), "-n", n, "-t", "%g" % secs, "-S",
            "3"] + cc + (["-u", "-l", str(row["len"])] if udp else []) + pin


def run_row(ctx, row, run):
    """Measure one row once: a dict for throughput.tsv."""
    lab, tool, secs = ctx.lab, ctx.tool, ctx.secs
    snd, rcv, rel, to, bind, rbind = placement(lab, row)
    rec = {"test": row["name"], "run": run + 1, "status": "FAIL", "note": ""}
    procs, outs = [], {}
    try:
        rargv = row_argv(tool, row, secs, "recv", bind=bind, pin=ctx.pin)
        rp, port, rhead = start_listener(lab, rcv, rargv, "the receiver", procs)
        argvs = {"recv": lab.prefix(rcv) + rargv}
        if rel:
            argv = row_argv(tool, row, secs, "relay", mode=row["topo"], bind=rbind, to=bind,
                            port=port, cc=lab.cc, pin=ctx.pin)
            lp, port, lhead = start_listener(lab, rel, argv, "the relay", procs)
            argvs["relay"] = lab.prefix(rel) + argv
        argvs["send"] = lab.prefix(snd) + row_argv(tool, row, secs, "send", to=to, port=port,
                                                    cc=lab.cc, pin=ctx.pin)
        sp = bl.spawn(argvs["send"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(sp)
        rcs = {"send": finish(sp, secs + GRACE["send"])}
        if rel:
            rcs["relay"] = finish(lp, GRACE["other"], lhead)
        rcs["recv"] = finish(rp, GRACE["other"], rhead)
    except TputError as e:
        rec["note"] = str(e)
        return rec, {}
    finally:
        for p in procs:
            if p.poll() is None:
                bl.stop(p, grace=1)
    for role, (rc, out) in rcs.items():
        outs[role] = out
        ctx.raw_write("tput-%s.%d.%s.txt" % (row["name"], run + 1, role), out)
    if run == 0:
        for role in ("recv", "relay", "send"):
            if role in argvs:
                ctx.commands.append("%s %s\t%s" % (row["name"], role, " ".join(argvs[role])))
    judge(rec, row, rcs)
    return rec, outs


def judge(rec, row, rcs):
    """PASS: every tool exited 0 and the throughput is above zero (TCP: the receiver's
    count equal to what was sent); NOEXIT: a tool had to be killed; FAIL otherwise."""
    s = parse_kv(rcs["send"][1], "total") or {}
    r = parse_kv(rcs["recv"][1], "total") or {}
    udp = row["proto"] == "udp"
    main = r if udp else s
    rec.update({"mbit": float(main.get("mbit", 0)), "cpu_send": float(s.get("cpu", 0)),
                "cpu_recv": float(r.get("cpu", 0)),
                "cpu_bound": "yes" if "yes" in (s.get("cpu_bound"), r.get("cpu_bound"))
                else "no"})
    if udp:
        sent, got = int(r.get("sent", 0)), int(r.get("dgrams", 0))
        rec.update({"pps": got / float(r.get("secs") or 1), "sent": sent, "recv": got,
                    "lost": int(r.get("lost", 0)), "reordered": int(r.get("reordered", 0))})
    else:
        rec.update({"sent": int(s.get("sent", 0)), "recv": int(r.get("recv", 0))})
    if "relay" in rcs:
        rel = parse_kv(rcs["relay"][1], "total") or {}
        rec["cpu_relay"] = float(rel.get("cpu", 0))
    dead = [k for k, (rc, _) in rcs.items() if rc is None]
    bad = ["%s exit %d" % (k, rc) for k, (rc, _) in rcs.items() if rc not in (None, 0)]
    if dead:
        rec["status"], rec["note"] = "NOEXIT", "killed: " + ", ".join(dead)
    elif bad:
        rec["note"] = "; ".join(bad)
    elif udp and not rec["recv"]:
        rec["note"] = "no datagram arrived"
    elif not udp and (rec["mbit"] <= 0 or rec["sent"] != rec["recv"]):
        rec["note"] = "sent %d, received %d" % (rec["sent"], rec["recv"])
    else:
        rec["status"] = "PASS"


# -- iperf3 beside it ---------------------------------------------------------------------

def iperf3_beside(row):
    """Whether --iperf3 runs iperf3 beside this row: one to 128 TCP streams over IPv4 on
    loopback or the veth link (iperf3's -P is at most 128)."""
    return (row["proto"], row["family"]) == ("tcp", 4) and row["topo"] in ("lo", "veth") \
        and row["n"] <= 128


def run_iperf3(ctx, row, run):
    """iperf3 -P n where the row runs (sender's host to receiver's): a row 'iperf3-NAME'
    (Mbit/s sent, its CPU)."""
    name = "iperf3-" + row["name"]
    rec = {"test": name, "run": run + 1, "status": "FAIL", "note": ""}
    snd, rcv, _, to, bind, _ = placement(ctx.lab, row)
    port = 5201 + run % 100
    pin = (lambda role: ["-A", ctx.pin[role].split(",")[0]]) if ctx.pin else (lambda role: [])
    srv = bl.spawn(ctx.lab.prefix(rcv) + ["iperf3", "-s", "-1", "-p", str(port), "-B", bind] +
                   pin("recv"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.3)
        argv = ctx.lab.prefix(snd) + ["iperf3", "-c", to, "-p", str(port), "-P", str(row["n"]),
                                      "-t", "%g" % ctx.secs, "-J"] + (
                                          ["-C", ctx.lab.cc] if ctx.lab.cc else []) + pin("send")
        if run == 0:
            ctx.commands.append("%s\t%s" % (name, " ".join(argv)))
        r = subprocess.run(argv, capture_output=True, text=True, timeout=ctx.secs + 30)
        ctx.raw_write("tput-%s.%d.send.txt" % (name, run + 1), r.stdout + r.stderr)
        d = json.loads(r.stdout)
        end = d["end"]
        rec.update({"mbit": end["sum_sent"]["bits_per_second"] / 1e6,
                    "cpu_send": end["cpu_utilization_percent"]["host_total"] / 100,
                    "cpu_recv": end["cpu_utilization_percent"]["remote_total"] / 100,
                    "sent": end["sum_sent"]["bytes"], "recv": end["sum_received"]["bytes"]})
        rec["cpu_bound"] = "yes" if rec["cpu_send"] >= 0.9 or rec["cpu_recv"] >= 0.9 else "no"
        rec["status"] = "PASS" if r.returncode == 0 else "FAIL"
    except (subprocess.TimeoutExpired, ValueError, KeyError) as e:
        rec["note"] = "iperf3: %s" % e
    finally:
        bl.stop(srv, grace=1)
    return rec


# -- the suite ----------------------------------------------------------------------------

COLS = ["test", "run", "status", "mbit", "pps", "sent", "recv", "lost", "reordered",
        "cpu_send", "cpu_recv", "cpu_relay", "cpu_bound", "note"]


def write_rows(path, rows):
    with open(path, "w") as f:
        f.write("\t".join(COLS) + "\n")
        for r in rows:
            f.write("\t".join(str(r.get(c, "")).replace("\t", " ").replace("\n", " ")
                              for c in COLS) + "\n")


def read_rows(path):
    with open(path) as f:
        cols = next(f).rstrip("\n").split("\t")
        return [dict(zip(cols, l.rstrip("\n").split("\t"))) for l in f if l.strip()]


def parse_pin(spec):
    """--pin SEND/RECV[/RELAY]: CPU lists (0 or 0,1) for kb-stream's -A and iperf3's -A (its
    first CPU); the relay's default is the receiver's.  None for no pinning."""
    if not spec:
        return None
    parts = spec.split("/")
    ncpu = os.cpu_count() or 1
    if not 2 <= len(parts) <= 3 or not all(re.match(r"^\d+(,\d+)*$", p) for p in parts):
        raise TputError("--pin: SEND/RECV[/RELAY], each CPU numbers separated by commas "
                        "(0/1)")
    if any(int(c) >= ncpu for p in parts for c in p.split(",")):
        raise TputError("--pin %s: this machine has CPUs 0 to %d" % (spec, ncpu - 1))
    return {"send": parts[0], "recv": parts[1], "relay": parts[2 if len(parts) == 3 else 1]}


class Ctx:
    def __init__(self, out, tool, secs, lab, pin=None):
        self.out, self.tool, self.secs, self.lab, self.pin = out, tool, secs, lab, pin
        self.commands, self.rows = [], []
        os.makedirs(os.path.join(out, "raw"), exist_ok=True)

    def raw_write(self, name, text):
        with open(os.path.join(self.out, "raw", name), "w") as f:
            f.write(text)


def label_for(tuning):
    return "%s %s" % (os.uname().release, tuning)


def plan_of(rows, iperf3, run):
    """The order of one repetition: the rows; with iperf3, iperf3 beside every row it can
    run (iperf3_beside), after it in odd repetitions and before it in even ones, so that
    the pairs tputreport compares are side by side in time and neither tool always goes
    first; with no such row, iperf3 -P 1 and -P 15 on loopback at the end."""
    plan = []
    for r in rows:
        plan.append(("row", r))
        if iperf3 and iperf3_beside(r):
            plan.insert(len(plan) - 1 if run % 2 else len(plan), ("iperf3", r))
    if iperf3 and not any(k == "iperf3" for k, _ in plan):
        plan += [("iperf3", {"name": "tcp4-lo-n%d" % n, "proto": "tcp", "family": 4,
                             "topo": "lo", "n": n, "len": None}) for n in (1, 15)]
    return plan


def run_suite(out, suite, tool, runs=1, tuning="default", label=None, only=None,
              iperf3=False, quiet=False, secs=None, run_from=0, pin=None):
    """Measure every row of suite runs times (interleaved) with one tuning in a lab of its
    own; write out/throughput.tsv and throughput-meta.json; the rows.  run_from > 0 adds
    repetitions run_from+1.. to the rows already there (a sweep alternates its tunings
    so, one repetition of each at a time)."""
    rows = rows_for(suite, only)
    if not rows:
        raise TputError("--only %s: no test of the %s suite matches" % (only, suite))
    if not os.access(tool, os.X_OK):
        raise TputError("%s: not built (make)" % tool)
    if iperf3 and not bl.shutil.which("iperf3"):
        raise TputError("--iperf3: iperf3 is not installed (apt-get install iperf3)")
    os.makedirs(out, exist_ok=True)
    t0 = time.monotonic()
    pinning = parse_pin(pin)
    lab = Lab()
    ctx = Ctx(out, tool, secs or SECS[suite], lab, pinning)
    if run_from:
        ctx.rows = read_rows(os.path.join(out, "throughput.tsv"))
    try:
        apply_tuning(lab, tuning)
        for run in range(run_from, run_from + runs):
            for kind, what in plan_of(rows, iperf3, run):
                if not quiet:
                    bl.log("throughput: run %d of %d: %s" % (
                        run + 1, runs, what["name"] if kind == "row" else "iperf3 beside " +
                        what["name"]))
                rec = (run_row(ctx, what, run)[0] if kind == "row" else
                       run_iperf3(ctx, what, run))
                ctx.rows.append(rec)
                write_rows(os.path.join(out, "throughput.tsv"), ctx.rows)
    finally:
        bl.stop_all()
        lab.down()
    meta = bl.metadata({"suite": suite, "tuning": tuning, "label": label or label_for(tuning),
                        "release": os.uname().release, "runs": run_from + runs,
                        "seconds_per_row":
                        ctx.secs, "seconds": round(time.monotonic() - t0, 1),
                        "tunings": {tuning: TUNINGS[tuning]}, "pin": pin or "none"})
    bl.write_json(os.path.join(out, "throughput-meta.json"), meta)
    if ctx.commands:
        with open(os.path.join(out, "commands.txt"), "a") as f:
            f.write("# throughput %s, tuning %s\n%s\n" % (suite, tuning,
                                                            "\n".join(ctx.commands)))
    return ctx.rows
