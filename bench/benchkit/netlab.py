"""netlab: "hosts" as network namespaces on one machine, or real hosts by ssh, for the drivers
that spread a server and its clients over several hosts (multihost, lb, run --netlab,
backend-latency --netlab, slashdot --netlab) and for bench/netlab, its command line.

A lab is N namespaces on a bridge in a namespace of its own, addresses from a free /24 of
198.18.0.0/15, optional shaping, each host's TCP limits raised, every name carrying its owner's
pid so that gc() (and the next up()) removes what a dead owner left.  Lab is a lab for the
length of a with block; a hosts file (read_hosts) names real machines and the prefix that runs a
command on each.  A Host runs a command through its prefix (argv); a lab's Host also puts the
calling thread inside its namespace (inside: the thread's sockets and the processes it
starts).  bench/netlab's docstring says the rest.  Root only; iproute2 (ip, tc).
"""
import contextlib
import ctypes
import fcntl
import ipaddress
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

STATE_DIR = "/run/netlab"
NS_RE = re.compile(r"^netlab-([a-z0-9]{1,12})-(\d+)(?:-([a-z0-9]{1,8}))?$")
NAME_RE = re.compile(r"^[a-z0-9]{1,8}$")
LAB_RE = re.compile(r"^[a-z0-9]{1,12}$")
RANGE = ipaddress.ip_network("198.18.0.0/15")
MAX_ADDRS = 15
SYSCTLS = (("net.ipv4.ip_local_port_range", "1024 65535"),
           ("net.core.somaxconn", "65535"),
           ("net.ipv4.tcp_max_syn_backlog", "65535"),
           ("net.ipv4.tcp_tw_reuse", "1"))


class LabError(Exception):
    """Something the lab cannot do: netlab says why and exits 1."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(argv, check=True, quiet=False):
    """Run a command (ip, tc); its stdout.  LabError with its stderr when it fails."""
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise LabError("%s: %s" % (" ".join(argv), r.stderr.strip() or "exit %d" % r.returncode))
    return r.stdout if not quiet else r


def require_root():
    if os.geteuid() != 0:
        raise LabError("must run as root: network namespaces, veth links and qdiscs need "
                       "CAP_NET_ADMIN and CAP_SYS_ADMIN")
    if subprocess.run(["ip", "-V"], capture_output=True).returncode != 0:
        raise LabError("ip (iproute2) is not installed")


CLONE_NEWNET = 0x40000000


def _setns(fd):
    """setns(2) of the calling thread into the network namespace open at fd (os.setns from
    Python 3.12 on; libc's before)."""
    if hasattr(os, "setns"):
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns(): %s" % os.strerror(e))


class Host:
    def __init__(self, name, addrs, prefix):
        self.name, self.addrs, self.prefix = name, list(addrs), list(prefix)

    def argv(self, cmd):
        """cmd (a list) as run on this host: prefix + cmd, or for ssh prefix + one word."""
        cmd = [str(c) for c in cmd]
        if self.prefix and os.path.basename(self.prefix[0]) == "ssh":
            return self.prefix + [" ".join(shlex.quote(c) for c in cmd)]
        return self.prefix + cmd

    @contextlib.contextmanager
    def inside(self):
        """This thread in the host's network namespace for the length of a with block: the
        sockets it opens there and the processes it starts (they inherit the thread's
        namespace) live on the host, as if `ip netns exec` ran them.  A lab's host only
        (LabError for an ssh one); the thread is back where it was afterwards."""
        if self.prefix[:3] != ["ip", "netns", "exec"]:
            raise LabError("%s is not a network namespace of this machine" % self.name)
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            with open("/run/netns/" + self.prefix[3]) as ns:
                _setns(ns.fileno())
            try:
                yield self
            finally:
                _setns(back)
        finally:
            os.close(back)

    def line(self):
        return "%-8s %-24s %s" % (self.name, ",".join(self.addrs),
                                  " ".join(shlex.quote(p) for p in self.prefix))

    def __repr__(self):
        return "Host(%s %s)" % (self.name, ",".join(self.addrs))


def read_hosts(path):
    """[Host] from a hosts file (# comments, blank lines ignored)."""
    hosts = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = shlex.split(line, comments=True)
            if not words:
                continue
            if len(words) < 2:
                raise LabError("%s:%d: NAME ADDRESSES [PREFIX...] expected" % (path, n))
            hosts.append(Host(words[0], words[1].split(","), words[2:]))
    return hosts


def proc_start(pid):
    """The start time of process pid (clock ticks since boot), or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def default_owner():
    """The caller's parent, past sudo/doas (which exit as soon as netlab does)."""
    pid = os.getppid()
    for _ in range(3):
        try:
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
            if comm not in ("sudo", "doas", "su"):
                break
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            break
    return pid


def ns_name(lab, owner, host=None):
    return "netlab-%s-%d" % (lab, owner) + ("-" + host if host else "")


def state_path(lab, owner):
    return os.path.join(STATE_DIR, "%s-%d.json" % (lab, owner))


def read_state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_state(st):
    os.makedirs(STATE_DIR, exist_ok=True)
    path = state_path(st["lab"], st["owner"])
    with open(path + ".tmp", "w") as f:
        json.dump(st, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def owner_alive(owner, start=None):
    now = proc_start(owner)
    return now is not None and (start is None or now == start)


def netns_list():
    """The names of all named network namespaces (ip netns list)."""
    return [l.split()[0] for l in run(["ip", "netns", "list"]).splitlines() if l.strip()]


def labs():
    """{(lab, owner): {"state": dict or None, "namespaces": [...]}} for every lab on the
    machine, from the namespace names and the state files (either may be missing after a
    crash at the wrong moment)."""
    found = {}
    for ns in netns_list():
        m = NS_RE.match(ns)
        if m:
            found.setdefault((m.group(1), int(m.group(2))), {"state": None, "namespaces": []})
            found[(m.group(1), int(m.group(2)))]["namespaces"].append(ns)
    if os.path.isdir(STATE_DIR):
        for fn in os.listdir(STATE_DIR):
            m = re.match(r"^([a-z0-9]{1,12})-(\d+)\.json$", fn)
            if m:
                key = (m.group(1), int(m.group(2)))
                found.setdefault(key, {"state": None, "namespaces": []})
                found[key]["state"] = read_state(os.path.join(STATE_DIR, fn))
    return found


def lab_alive(key, info):
    st = info["state"] or {}
    return owner_alive(key[1], st.get("owner_start"))


def ns_pids(ns):
    r = run(["ip", "netns", "pids", ns], check=False, quiet=True)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def remove_lab(lab, owner, namespaces=None):
    """End every process inside the lab's namespaces (SIGTERM, then SIGKILL after 2 s),
    delete the namespaces (hosts first, then the switch) and the state file."""
    if namespaces is None:
        namespaces = [ns for ns in netns_list() if ns == ns_name(lab, owner)
                      or ns.startswith(ns_name(lab, owner) + "-")]
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        pids = [p for ns in namespaces for p in ns_pids(ns)]
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if proc_start(p) is not None and not zombie(p)]
            time.sleep(0.05)
        if not pids:
            break
    for ns in sorted(namespaces, key=lambda n: -len(n)):  # hosts before the switch
        run(["ip", "netns", "del", ns], check=False)
    for path in (state_path(lab, owner), os.path.join(STATE_DIR, "%s-%d.hosts" % (lab, owner))):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def gc(quiet=False):
    """Remove every lab whose owner is gone; the (lab, owner) pairs removed."""
    gone = []
    for key, info in sorted(labs().items()):
        if not lab_alive(key, info):
            if not quiet:
                log("netlab: removing lab %s of dead owner %d (%d namespaces)"
                    % (key[0], key[1], len(info["namespaces"])))
            remove_lab(key[0], key[1], info["namespaces"])
            gone.append(key)
    return gone


def caps():
    """{"veth": bool, "bridge": bool, "tbf": bool, "htb": bool, "netem": bool, "notes": {}},
    probed in a scratch namespace (netlab-probe-PID, removed again; gc takes it if we die)."""
    ns = ns_name("probe", os.getpid())
    res = {"notes": {}}
    run(["ip", "netns", "add", ns])
    try:
        r = run(["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
                check=False, quiet=True)
        res["veth"] = r.returncode == 0
        if not res["veth"]:
            res["notes"]["veth"] = r.stderr.strip()
        r = run(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"], check=False, quiet=True)
        res["bridge"] = r.returncode == 0
        if not res["bridge"]:
            res["notes"]["bridge"] = r.stderr.strip()
        tries = {"tbf": ["tbf", "rate", "1gbit", "burst", "128k", "latency", "20ms"],
                 "htb": ["handle", "1:", "htb", "default", "1"],
                 "netem": ["netem", "delay", "1ms"]}
        for kind, args in tries.items():
            if not res["veth"]:
                res[kind] = False
                continue
            r = run(["tc", "-n", ns, "qdisc", "add", "dev", "p0", "root"] + args,
                    check=False, quiet=True)
            res[kind] = r.returncode == 0
            if r.returncode:
                res["notes"][kind] = r.stderr.strip()
            run(["tc", "-n", ns, "qdisc", "del", "dev", "p0", "root"], check=False, quiet=True)
    finally:
        run(["ip", "netns", "del", ns], check=False)
    return res


def caps_text(c):
    lines = []
    for k, what in (("veth", "veth links"), ("bridge", "bridges"),
                    ("tbf", "tbf: bandwidth shaping (--shape tbf)"),
                    ("htb", "htb: bandwidth shaping (--shape htb)"),
                    ("netem", "netem: delay and loss (--delay, --loss)")):
        lines.append("%-4s %s%s" % ("yes" if c.get(k) else "NO", what,
                                    "" if c.get(k) else ": " + c["notes"].get(k, "")))
    if not c.get("netem"):
        lines.append("     without netem this kernel cannot emulate delay or loss: the lab's "
                     "links are as fast as veth")
    return "\n".join(lines)


def used_networks():
    """Every IPv4 network that an address or route of any namespace on the machine covers,
    and the subnets of the labs already up."""
    nets = []
    spaces = [None] + netns_list()
    for ns in spaces:
        pre = ["ip"] + (["-n", ns] if ns else [])
        for line in run(pre + ["-o", "-4", "addr", "show"], check=False).splitlines():
            m = re.search(r"\binet (\S+)", line)
            if m:
                nets.append(ipaddress.ip_interface(m.group(1)).network)
        for line in run(pre + ["-4", "route", "show", "table", "all"], check=False).splitlines():
            w = line.split()
            for word in w[:2]:
                if word == "default":
                    continue  # the default route covers everything and owns nothing
                try:
                    nets.append(ipaddress.ip_network(word, strict=False))
                    break
                except ValueError:
                    continue
    for info in labs().values():
        if info["state"] and info["state"].get("subnet"):
            nets.append(ipaddress.ip_network(info["state"]["subnet"]))
    return nets


def pick_subnet(want=None):
    """A /24 in 198.18.0.0/15 that overlaps nothing in use (or want, if it is free)."""
    used = used_networks()
    cands = [ipaddress.ip_network(want)] if want else RANGE.subnets(new_prefix=24)
    for net in cands:
        clash = [u for u in used if u.overlaps(net) and u.prefixlen > 0]
        if not clash:
            return net
        if want:
            raise LabError("subnet %s is in use here (%s)" % (want, ", ".join(map(str, clash))))
    raise LabError("no free /24 left in %s" % RANGE)


def host_addrs(net, i, k):
    base = int(net.network_address) + 16 * i + 1
    return [str(ipaddress.ip_address(base + j)) for j in range(k)]


def tc_shape(ns, dev, rate, shape):
    """Egress shaping of one end of a link: tbf, or htb with one class."""
    bits = parse_rate(rate)
    # a burst of 10 ms at the rate, and never below two 64 KiB GSO packets, which veth sends
    burst = max(bits // 8 // 100, 131072)
    if shape == "tbf":
        run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
             "burst", str(burst), "latency", "50ms"])
    else:
        run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb",
             "default", "1"])
        run(["tc", "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1",
             "htb", "rate", rate, "ceil", rate, "burst", str(burst), "cburst", str(burst)])


def parse_rate(rate):
    m = re.match(r"^(\d+(?:\.\d+)?)([kmg]?)(bit|bps)$", rate.lower())
    if not m:
        raise LabError("rate %r: a number and kbit, mbit, gbit (or kbps, ...), as tc takes it"
                       % rate)
    v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return int(v * (8 if m.group(3) == "bps" else 1))


def up(lab, names, owner, addrs=1, rates=None, shape="tbf", delay=None, loss=None,
       subnet=None, quiet=False):
    """Build a lab; its state dict.  rates: {host or "*": tc rate}.  On any failure what
    was built is removed again."""
    require_root()
    if not LAB_RE.match(lab):
        raise LabError("lab name %r: 1-12 of a-z and 0-9" % lab)
    for n in names:
        if not NAME_RE.match(n):
            raise LabError("host name %r: 1-8 of a-z and 0-9" % n)
    if len(set(names)) != len(names) or not 1 <= len(names) <= 16:
        raise LabError("1 to 16 distinct host names, please")
    if not 1 <= addrs <= MAX_ADDRS:
        raise LabError("--addrs: 1 to %d addresses per host" % MAX_ADDRS)
    start = proc_start(owner)
    if start is None:
        raise LabError("owner %d is not a running process" % owner)
    rates = rates or {}
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(os.path.join(STATE_DIR, ".lock"), "w") as lock:
        # two labs built at once must not pick the same subnet: the pick and the state
        # file that claims it happen under one lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        st = _claim(lab, owner, start, rates, shape, delay, loss, subnet, quiet)
    return _build(st, names, addrs, rates, shape, delay, loss)


def _claim(lab, owner, start, rates, shape, delay, loss, subnet, quiet):
    """Collect dead labs, check the kernel, pick a subnet and write the state that claims
    it (status "building"); the state dict."""
    gc(quiet=quiet)
    if (lab, owner) in labs():
        raise LabError("lab %s of owner %d is already up (netlab down --lab %s-%d)"
                       % (lab, owner, lab, owner))
    need = set(["bridge", "veth"]) | ({shape} if rates else set())
    if delay or loss:
        need.add("netem")
    c = caps()
    missing = [k for k in sorted(need) if not c.get(k)]
    if missing:
        raise LabError("this kernel lacks %s (%s)" % (", ".join(missing), "; ".join(
            "%s: %s" % (k, c["notes"].get(k, "?")) for k in missing)) +
            ("; delay and loss cannot be emulated here" if "netem" in missing else ""))
    net = pick_subnet(subnet)
    sw = ns_name(lab, owner)
    st = {"lab": lab, "owner": owner, "owner_start": start, "subnet": str(net),
          "switch": sw, "status": "building", "caps": c, "shape": shape if rates else None,
          "delay_ms": delay, "loss_pct": loss, "created": time.time(), "hosts": []}
    write_state(st)  # first, so that a crash from here on leaves something gc finds
    return st


def _build(st, names, addrs, rates, shape, delay, loss):
    """Create the namespaces, links, addresses, sysctls and qdiscs of a claimed lab; on
    any failure remove what was built."""
    lab, owner, sw = st["lab"], st["owner"], st["switch"]
    net = ipaddress.ip_network(st["subnet"])
    try:
        run(["ip", "netns", "add", sw])
        run(["ip", "-n", sw, "link", "set", "lo", "up"])
        run(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", sw, "link", "set", "br0", "up"])
        for i, name in enumerate(names):
            ns = ns_name(lab, owner, name)
            a = host_addrs(net, i, addrs)
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", sw, "link", "add", "p-" + name, "type", "veth", "peer", "name",
                 "eth0", "netns", ns])
            run(["ip", "-n", sw, "link", "set", "p-" + name, "master", "br0", "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            for addr in a:
                run(["ip", "-n", ns, "addr", "add", "%s/%d" % (addr, net.prefixlen), "dev",
                     "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w"] +
                ["%s=%s" % kv for kv in SYSCTLS])
            rate = rates.get(name, rates.get("*"))
            if rate:
                tc_shape(ns, "eth0", rate, shape)        # the host's upload
                tc_shape(sw, "p-" + name, rate, shape)   # its download
            if delay or loss:
                args = (["delay", "%gms" % delay] if delay else []) + \
                       (["loss", "%g%%" % loss] if loss else [])
                run(["tc", "-n", ns, "qdisc", "replace", "dev", "eth0", "root", "netem"] + args)
            st["hosts"].append({"name": name, "netns": ns, "addrs": a, "rate": rate,
                                "prefix": ["ip", "netns", "exec", ns]})
            write_state(st)
        st["status"] = "up"
        write_state(st)
        with open(os.path.join(STATE_DIR, "%s-%d.hosts" % (lab, owner)), "w") as f:
            f.write(hosts_text(st))
    except BaseException:
        remove_lab(lab, owner)
        raise
    return st


def lab_hosts(st):
    return [Host(h["name"], h["addrs"], h["prefix"]) for h in st["hosts"]]


def hosts_text(st):
    return ("# netlab %s of owner %d, subnet %s: NAME ADDRESSES PREFIX...\n"
            % (st["lab"], st["owner"], st["subnet"]) +
            "".join(h.line() + "\n" for h in lab_hosts(st)))


def host_sysctls(ns):
    out = run(["ip", "netns", "exec", ns, "sysctl", "-n"] + [k for k, _ in SYSCTLS],
              check=False)
    return dict(zip([k for k, _ in SYSCTLS], [" ".join(l.split()) for l in out.splitlines()]))


def find_lab(spec):
    """(key, info) of the one lab that spec (NAME or NAME-PID; None: the only lab) names."""
    all_labs = labs()
    if spec and re.match(r"^[a-z0-9]+-\d+$", spec):
        lab, pid = spec.rsplit("-", 1)
        hits = [k for k in all_labs if k == (lab, int(pid))]
    else:
        hits = [k for k in all_labs if spec is None or k[0] == spec]
    if len(hits) != 1:
        raise LabError("%s lab%s %s: %s" % ("no" if not hits else "more than one",
                                            "" if not hits else "s",
                                            "named " + spec if spec else "up",
                                            ", ".join("%s-%d" % k for k in hits) or
                                            "netlab up first"))
    return hits[0], all_labs[hits[0]]


class Lab:
    """A lab owned by this process (the owner is os.getpid()), for drivers: with Lab(...) as
    lab: lab.hosts ... ; removed on exit, and by the next gc if this process dies first."""

    def __init__(self, names, lab="lab", **kw):
        self.st = up(lab, names, os.getpid(), **kw)
        self.hosts = lab_hosts(self.st)

    def host(self, name):
        return next(h for h in self.hosts if h.name == name)

    def down(self):
        if self.st:
            remove_lab(self.st["lab"], self.st["owner"])
            self.st = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()
