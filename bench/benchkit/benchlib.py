"""benchlib: what every driver of bench/ shares (the bottom of bench/benchkit): logging, the
CPU split between server and client, starting and stopping child processes
(a gatling among them), a free port, the alternating-rounds order,
statistics, tool versions, the machine's metadata, gnuplot, the merge of
bench -J reports from several hosts (histograms added, percentiles read off
the sum by lg_hist's rule), the CPUs' busy share from /proc/stat (multihost,
lb) and log-like text that gzips about 2.2:1 (slashdot, compress-load).

Python 3 standard library only.  The drivers are scripts without a .py
suffix in bench/; they import it as `from benchkit import benchlib as bl`.
"""
import ctypes
import datetime
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Server on CPU 0, clients on CPU 1 (the last CPU on bigger machines).
SERVER_CPU = "0"
CLIENT_CPU = str(max(1, (os.cpu_count() or 2) - 1))


class BenchError(Exception):
    """A measurement that cannot be made: the driver says why and exits 1."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def secs_type(x):
    """argparse type: a positive number of seconds, at most a day."""
    import argparse
    try:
        v = float(x)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % x)
    if not 0 < v <= 86400:
        raise argparse.ArgumentTypeError("%r: between 0 and 86400 seconds, please" % x)
    return v


def secs_str(x):
    """Seconds as a tool's argument: 10.0 -> '10', 0.5 -> '0.5'."""
    return f"{x:g}"


def tool_version(argv):
    """The first line a tool prints (escape sequences removed), or None."""
    import re
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", r.stdout + r.stderr)
        return (text.strip().splitlines() or [""])[0][:200]
    except (OSError, subprocess.SubprocessError):
        return None


def pinned(cpu, argv):
    """argv run on one CPU (taskset), when taskset exists."""
    return (["taskset", "-c", cpu] + list(argv)) if shutil.which("taskset") else list(argv)


# -- child processes ----------------------------------------------------------
# Every child is started in a session of its own (a Ctrl-C reaches the driver only, which
# then stops its children in order) and remembered, so that cleanup ends exactly the
# processes the driver started, by id.

CHILDREN = []  # Popen objects started by spawn() and not yet stopped


def _child_setup(cpu, deathsig):
    def setup():
        # best effort if the driver is SIGKILLed: the kernel then signals the direct child
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, deathsig)  # PR_SET_PDEATHSIG
        except Exception:
            pass
        if cpu is not None:
            os.sched_setaffinity(0, {int(cpu)})
    return setup


def spawn(argv, cpu=None, deathsig=signal.SIGTERM, **kw):
    """Popen(argv, **kw) in a new session, remembered in CHILDREN; deathsig is what the
    kernel sends it if the driver dies; cpu (None: any) pins it with sched_setaffinity
    (pinned() does it with taskset, visible in the command line)."""
    p = subprocess.Popen(argv, start_new_session=True, preexec_fn=_child_setup(cpu, deathsig),
                         **kw)
    CHILDREN.append(p)
    return p


def forget(p):
    """p was reaped by its caller: no longer a child to stop."""
    if p in CHILDREN:
        CHILDREN.remove(p)


def stop(p, sig=signal.SIGTERM, grace=5.0):
    """Signal a Popen (its pid only), wait up to grace seconds, then kill it.  Its exit
    code (None for no process)."""
    if p is None:
        return None
    if p.poll() is None:
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    forget(p)
    return p.returncode


def proc_stat(pid):
    """(ppid, session, utime+stime ticks) of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(rest[1]), int(rest[3]), int(rest[11]) + int(rest[12])


def task_ns(pid):
    """Nanoseconds every live thread of pid has run (/proc/PID/task/TID/schedstat's
    first field: utime + stime without the 10 ms ticks of /proc/PID/stat); 0 for a
    process gone, None where schedstat cannot be read (a kernel without it)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            continue  # the thread or process ended
        except (OSError, ValueError, IndexError):
            return None
    return total


def session_pids(sid):
    """All live processes of session sid (a child started by spawn() and all it forked)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st and st[1] == sid:
                pids.append(int(name))
    return pids


def _is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stop_session(p, grace=3.0):
    """End child p (started by spawn()) and every process left in its session (a server's
    workers); reap p."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + grace
    while True:
        left = [pid for pid in session_pids(p.pid) if not _is_zombie(pid)]
        if p.poll() is None:
            left.append(p.pid)
        if not left:
            break
        if time.monotonic() > deadline:
            for pid in set(left):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.05)
        if time.monotonic() > deadline + 5:
            log(f"warning: processes {sorted(set(left))} of session {p.pid} would not die")
            break
    try:
        p.wait(1)
    except subprocess.TimeoutExpired:
        pass
    forget(p)


def stop_all(session=True, grace=2.0):
    """Stop every child spawn() started that is still remembered (cleanup on any exit):
    with its session (stop_session), or only itself (stop)."""
    for p in list(CHILDREN):
        if session:
            stop_session(p, grace=grace)
        else:
            stop(p, grace=grace)


def free_port(host="127.0.0.1"):
    """A TCP port that was free a moment ago (for servers that cannot be told port 0),
    below the ephemeral range: a port from that range can be taken meanwhile by any
    outgoing connection (a client of the run itself), and the server's bind() then fails."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    for _ in range(100 if low > 11024 else 0):
        port = rng.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind((host, port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# "gatling 0.1 (epoll): listening on 127.0.0.1 port 8000" or, with -W,
# "gatling 0.1 (epoll): 2 workers listening on 127.0.0.1 port 8000"
LISTENING = re.compile(r"\((\w+)\): (?:\d+ workers )?listening on \S+ port (\d+)")


def listening_port(text):
    """(IO backend, port) from gatling's start-up line on stderr, or None."""
    m = LISTENING.search(text)
    return (m.group(1), int(m.group(2))) if m else None


def start_gatling(argv, errfile, name="gatling", timeout=10.0, cpu=None, **kw):
    """Start gatling (argv with -p 0: it picks a port and says which; argv may begin with
    taskset) with stderr to errfile, and wait until it listens.  (Popen, port, backend);
    BenchError if it exits or stays silent for timeout seconds (then it is stopped)."""
    with open(errfile, "wb") as err:
        p = spawn(argv, cpu=cpu, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                  stderr=err, **kw)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(errfile, "rb") as f:
            text = f.read().decode(errors="replace")
        got = listening_port(text)
        if got:
            return p, got[1], got[0]
        if p.poll() is not None:
            forget(p)
            raise BenchError(f"{name} exited with {p.returncode}: {text.strip()}")
        time.sleep(0.02)
    stop(p)
    raise BenchError(f"{name} printed no 'listening on' line within {timeout:g} s ({errfile})")


# -- alternating rounds ---------------------------------------------------------

def round_order(items, rnd, alternate=False):
    """The items in round rnd (from 0): as given, or, with alternate, reversed in every
    other round (so that no item always goes first)."""
    items = list(items)
    return items[::-1] if alternate and rnd % 2 else items


def rounds(n, items, alternate=False):
    """(round, item) for n rounds of all items: round 1 of every item, then round 2, ...,
    so that drift on the machine (other tenants, heat) spreads over all items instead of
    landing on one."""
    for rnd in range(n):
        for item in round_order(items, rnd, alternate):
            yield rnd, item


# -- statistics ---------------------------------------------------------------

def median(xs):
    """The median of the values that are not None; None if there are none."""
    xs = sorted(x for x in xs if x is not None)
    n = len(xs)
    if not n:
        return None
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def pct(sorted_vals, p):
    """Nearest-rank percentile of a sorted list (p in 0..100)."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(math.ceil(p / 100.0 * len(sorted_vals))) - 1))
    return sorted_vals[k]


def linear_fit(xs, ys):
    """Least squares y = a + b*x: (a, b)."""
    n = len(xs)
    if n < 2:
        return (ys[0] if ys else float("nan")), 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


# -- the machine --------------------------------------------------------------

def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_model():
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


SYSCTLS = ("fs/file-max", "fs/nr_open", "kernel/pid_max", "kernel/threads-max",
           "vm/max_map_count", "net/core/somaxconn", "net/ipv4/ip_local_port_range",
           "net/ipv4/tcp_max_syn_backlog", "net/ipv4/tcp_tw_reuse",
           "kernel/perf_event_paranoid")


def metadata(extra=None):
    """Kernel, CPU, cores, RLIMITs, the sysctls that matter, the date: a dict."""
    lim = {}
    for name in ("NOFILE", "NPROC", "AS", "STACK", "MEMLOCK"):
        soft, hard = resource.getrlimit(getattr(resource, "RLIMIT_" + name))
        lim["RLIMIT_" + name] = [None if v == resource.RLIM_INFINITY else v for v in (soft, hard)]
    u = os.uname()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "host": u.nodename,
        "kernel": "%s %s %s" % (u.sysname, u.release, u.machine),
        "kernel_version": u.version,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "rlimits": lim,
        "sysctls": {k.replace("/", "."): (_read("/proc/sys/" + k) or "?").replace("\t", " ")
                    for k in SYSCTLS},
        "memory_kib": next((int(l.split()[1]) for l in (_read("/proc/meminfo") or "").splitlines()
                            if l.startswith("MemTotal:")), None),
        "load_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
    }
    if extra:
        meta.update(extra)
    return meta


# -- progress -----------------------------------------------------------------

class Progress:
    """A progress bar with an ETA on stderr (a line per step when not a tty)."""

    def __init__(self, total_weight, quiet=False):
        self.total = max(total_weight, 1e-9)
        self.done = 0.0
        self.t0 = time.monotonic()
        self.quiet = quiet
        self.tty = sys.stderr.isatty()

    def step(self, weight, what):
        self.done += weight
        self.show(what)

    def show(self, what):
        if self.quiet:
            return
        frac = min(1.0, self.done / self.total)
        el = time.monotonic() - self.t0
        eta = el / frac - el if frac > 0.02 else float("nan")
        bar = "#" * int(frac * 30)
        eta_s = "?" if math.isnan(eta) else "%d:%02d" % (eta // 60, eta % 60)
        line = "[%-30s] %3d%%  %d:%02d elapsed, ETA %s  %s" % (bar, frac * 100, el // 60, el % 60,
                                                            eta_s, what)
        if self.tty:
            sys.stderr.write("\r\033[K" + line[:160])
            sys.stderr.flush()
        elif time.monotonic() - getattr(self, "last", 0) >= 10 or frac >= 1:
            self.last = time.monotonic()  # a log file gets a line every 10 s
            log(line)

    def finish(self):
        if self.tty and not self.quiet:
            sys.stderr.write("\n")


# -- gnuplot ------------------------------------------------------------------

GNUPLOT_MISSING = ("gnuplot is not installed: no plots were drawn "
                   "(apt-get install gnuplot-nox, then bench/run report DIR)")


def have_gnuplot():
    return shutil.which("gnuplot") is not None


def gnuplot(script, cwd):
    """Run a gnuplot script; False when gnuplot is missing (the caller warns, see
    GNUPLOT_MISSING) or fails (with a message)."""
    if not have_gnuplot():
        return False
    r = subprocess.run(["gnuplot"], input=script, text=True, cwd=cwd, capture_output=True,
                       timeout=120)
    if r.returncode != 0:
        log("gnuplot failed: " + r.stderr.strip()[-500:])
        return False
    return True


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


# -- merging bench reports from several processes or hosts ------------------------
# Percentiles cannot be averaged: bench -J carries each histogram's nonzero buckets
# ("hist": count, sum, exact min and max, [[highest value, count], ...]; lg_hist_json in
# bench/lg/lg_hist.c), the buckets are added, and the quantile is read off the sum by the
# same rule as lg_hist_quantile, so a merged p99 is what one bench would have printed had
# it made all the requests itself.

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99_9", 0.999))


def hist_merge(hists):
    """The sum of lg_hist JSON histograms (dicts as bench -J prints them under "hist"):
    the same shape; None entries are skipped."""
    buckets, out = {}, {"count": 0, "sum": 0, "min": 0, "max": 0}
    mins = []
    for h in hists:
        if not h or not h.get("count"):
            continue
        out["count"] += h["count"]
        out["sum"] += h["sum"]
        mins.append(h["min"])
        out["max"] = max(out["max"], h["max"])
        for hi, n in h["buckets"]:
            buckets[hi] = buckets.get(hi, 0) + n
    out["min"] = min(mins) if mins else 0
    out["buckets"] = [[hi, buckets[hi]] for hi in sorted(buckets)]
    return out


def hist_quantile(h, q):
    """lg_hist_quantile's rule on a JSON histogram: the highest value of the bucket that
    holds the ceil(q * count)-th smallest value, clamped to the exact [min, max]; q >= 1
    is the max; 0 when empty."""
    if not h or not h["count"]:
        return 0
    if q >= 1.0:
        return h["max"]
    want = q * float(h["count"])  # a C double, as in lg_hist.c
    rank = int(want)
    if rank < want:
        rank += 1
    rank = max(rank, 1)
    seen = 0
    for hi, n in h["buckets"]:
        seen += n
        if seen >= rank:
            return max(min(hi, h["max"]), h["min"])
    return h["max"]


HIST_SUB_BITS = 7  # LG_HIST_SUB_BITS in bench/lg/lg_hist.h
HIST_SUB = 1 << HIST_SUB_BITS


def hist_bucket(hi):
    """(lowest value, width) of the lg_hist bucket whose highest value is hi."""
    i = hi if hi < HIST_SUB else \
        (hi.bit_length() - 1 - HIST_SUB_BITS) * HIST_SUB + (hi >> (hi.bit_length() - 1 -
                                                                  HIST_SUB_BITS))
    if i < 2 * HIST_SUB:
        return i, 1
    shift = i // HIST_SUB - 1
    return (i - shift * HIST_SUB) << shift, 1 << shift


def hist_stdev(h):
    """lg_hist_stdev's estimate: the standard deviation from the buckets' middles."""
    n = h["count"] if h else 0
    if n < 2:
        return 0.0
    mean, acc = h["sum"] / n, 0.0
    for hi, c in h["buckets"]:
        low, width = hist_bucket(hi)
        acc += c * (low + (width - 1) / 2 - mean) ** 2
    return math.sqrt(acc / (n - 1))


def hist_summary(h):
    """p50, p90, p99, p99_9, min, max, mean, stdev, count (as in bench -J) and the hist."""
    s = {name: hist_quantile(h, q) for name, q in QUANTILES}
    n = h["count"] if h else 0
    s.update(min=h["min"] if n else 0, max=h["max"] if n else 0,
             mean=round(h["sum"] / n, 1) if n else 0.0, stdev=round(hist_stdev(h), 1),
             count=n, hist=h)
    return s


MERGE_SUM = ("processes", "connections", "requests", "responses", "lost", "attempts",
             "connects", "bytes", "body_bytes", "requests_per_s", "bytes_per_s",
             "connects_per_s", "errors_total", "open_loop_rate")


def merge_bench_reports(reports):
    """One bench -J report from several run at the same time (hosts or separate runs over
    the same window): counts and rates added (each rate is its own run's measured window;
    the runs overlap, so the rates add), errors and status classes added by kind,
    histograms merged bucket by bucket, seconds the longest, fatal the list of the runs'
    fatal texts (None if none), exit the worst."""
    reports = [r for r in reports if r]
    if not reports:
        raise BenchError("no bench report to merge")
    m = {"tool": "bench", "merged": len(reports)}
    for k in MERGE_SUM:
        vals = [r[k] for r in reports if r.get(k) is not None]
        if vals:
            m[k] = round(sum(vals), 1) if any(isinstance(v, float) for v in vals) else sum(vals)
    for k in ("seconds", "ramp_seconds", "drain_seconds"):
        m[k] = max(r.get(k, 0) for r in reports)
    for k in ("mode", "pipeline", "io", "target"):
        vals = sorted({str(r.get(k)) for r in reports})
        m[k] = reports[0].get(k) if len(vals) == 1 else ",".join(vals)
    for k in ("errors", "status"):
        m[k] = {}
        for r in reports:
            for kind, n in (r.get(k) or {}).items():
                m[k][kind] = m[k].get(kind, 0) + n
    for k in ("latency_us", "connect_us", "handshake_us"):
        hs = [r[k].get("hist") for r in reports if k in r]
        if hs and all(hs):
            m[k] = hist_summary(hist_merge(hs))
        elif hs:
            raise BenchError(f"a report has {k} without its histogram (a bench before "
                             "lg_hist_json): percentiles cannot be merged")
    fatals = [r["fatal"] for r in reports if r.get("fatal")]
    m["fatal"] = fatals or None
    m["exit"] = max(r.get("exit", 0) for r in reports)
    return m


def cpu_times():
    """{cpu: (busy, total)} jiffies from /proc/stat; busy = user+nice+system+irq+softirq."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            w = line.split()
            if w[0].startswith("cpu") and w[0] != "cpu":
                v = [int(x) for x in w[1:9]]
                out[w[0][3:]] = (v[0] + v[1] + v[2] + v[5] + v[6], sum(v))
    return out


def cpu_busy(a, b):
    """{cpu: busy fraction} between two cpu_times() readings."""
    return {c: round((b[c][0] - a[c][0]) / max(1, b[c][1] - a[c][1]), 3) for c in b if c in a}


def split(total, k):
    """total as k near-equal parts."""
    return [total // k + (1 if i < total % k else 0) for i in range(k)]


WORDS = ("api static img css js user users item items cart order orders search login logout "
         "feed news blog post posts tag tags page assets media video thumb avatar").split()


def make_text(size, seed):
    """Log-like text that gzips about 2.2:1 (level 6): 40 such files of 1 MiB give ~18.5 MiB of
    gzip bodies, more than gatling's 16 MiB cache, so a round-robin reader misses every time."""
    rnd = random.Random(seed)
    hx = rnd.randbytes(size).hex()
    nums = rnd.randbytes(size // 8)
    out, n, i, k = [], 0, 0, 0
    while n < size:
        b = nums[k % (len(nums) - 8):k % (len(nums) - 8) + 6]
        k += 6
        line = (f"2026-11-{b[0] % 28 + 1:02d}T{b[1] % 24:02d}:{b[2] % 60:02d}:{b[3] % 60:02d}."
                f"{hx[i:i + 6]}Z host{b[4] % 250} GET /{WORDS[b[5] % len(WORDS)]}/"
                f"{WORDS[b[0] % len(WORDS)]}/{hx[i + 6:i + 18]} "
                f"{(200, 200, 200, 304, 404, 500)[b[1] % 6]} {int(hx[i + 18:i + 23], 16)} "
                f"req={hx[i + 23:i + 55]} sess={hx[i + 55:i + 71]}\n")
        i += 71
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:size]
