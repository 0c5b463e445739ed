"""benchlib: what bench/'s Python drivers share (run, compare-servers,
compare-static, validate-loadgen, backend-latency, slashdot): logging, the
CPU split between server and client, stopping processes, statistics, tool
versions, the machine's metadata, and gnuplot.

Python 3 standard library only.  The drivers are scripts without a .py
suffix; they import this module from their own directory.
"""
import datetime
import json
import math
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def load_driver(name):
    """Another driver (a script without .py) as a module: compare-servers' Server, ..."""
    import importlib.machinery
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    modname = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(modname, path)
    spec = importlib.util.spec_from_loader(modname, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def pinned(cpu, argv):
    """argv run on one CPU (taskset), when taskset exists."""
    return (["taskset", "-c", cpu] + list(argv)) if shutil.which("taskset") else list(argv)


def stop(p, sig=signal.SIGTERM, grace=5.0):
    """Signal a Popen, wait up to grace seconds, then kill it.  Its exit code."""
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
    return p.returncode


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
