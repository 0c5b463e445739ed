"""wrk: throughput runs under wrk (a Lua done() that prints wrk's exact counters), made
robust for a server under development (measure(): a dead server restarted, a failed run a
flagged sample), and the table of medians with gatling's advantage per peer ("vs X") and its
notes that compare-servers, compare-static and validate-loadgen print.
"""
import resource
import re
import statistics
import subprocess

from . import benchlib as bl
from . import servers as cs
from .servers import CLK_TCK, spawn, stop, cpu_busy_ticks

SERVER_CPU, CLIENT_CPU = bl.SERVER_CPU, bl.CLIENT_CPU
log, BenchError = bl.log, bl.BenchError

# wrk calls done() once at the end; defining only done() keeps wrk on its fast path (no per-request
# Lua).  It prints the exact counters that wrk's human output rounds.
DONE_LUA = """done = function(s, latency, requests)
  local e = s.errors
  io.write(string.format("RESULT requests=%d bytes=%d duration_us=%d connect=%d read=%d "
    .. "write=%d status=%d timeout=%d p50_us=%d p99_us=%d\\n", s.requests, s.bytes, s.duration,
    e.connect, e.read, e.write, e.status, e.timeout, latency:percentile(50),
    latency:percentile(99)))
end
"""


def run_wrk(server, path, conns, duration, lua, wrk_args=()):
    """One wrk run against server; wrk_args go before the URL (bench/fastpath: a header)."""
    url = f"http://{cs.HOST}:{server.port}/{path}"  # cs.HOST: slashdot --netlab sets it
    cmd = bl.pinned(CLIENT_CPU, ["wrk", "-t1", f"-c{conns}", f"-d{duration}s",
                                 "-s", lua, *wrk_args, url])
    cpu0, sys0 = server.cpu_ticks(), server.kernel_ticks()
    busy0 = cpu_busy_ticks()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=duration + 60)
    except subprocess.TimeoutExpired:
        stop(p)
        raise BenchError(f"wrk did not finish: {' '.join(cmd)}")
    bl.forget(p)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1 = cpu_busy_ticks()
    cpu1, sys1 = server.cpu_ticks(), server.kernel_ticks()
    m = re.search(r"^RESULT (.*)$", out, re.M)
    if p.returncode != 0 or not m:
        raise BenchError(f"wrk failed (status {p.returncode}): {err.strip() or out.strip()}")
    r = {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    secs = r["duration_us"] / 1e6
    r["errors"] = r["connect"] + r["read"] + r["write"] + r["status"] + r["timeout"]
    r["req_per_s"] = r["requests"] / secs
    r["mb_per_s"] = r["bytes"] / secs / 1e6
    r["server_cpu_s"] = (cpu1 - cpu0) / CLK_TCK
    r["server_kernel_s"] = (sys1 - sys0) / CLK_TCK  # of server_cpu_s, in the kernel
    r["server_cpu_pct"] = 100 * r["server_cpu_s"] / secs
    r["cpu_us_per_req"] = 1e6 * r["server_cpu_s"] / r["requests"] if r["requests"] else None
    wrk_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    r["wrk_cpu_pct"] = 100 * wrk_cpu / secs
    # noise: what else ran on the two CPUs meanwhile (other tenants of a shared machine)
    r["other_cpu_pct"] = {
        "server_cpu": 100 * ((busy1[SERVER_CPU] - busy0[SERVER_CPU]) / CLK_TCK
                             - r["server_cpu_s"]) / secs,
        "client_cpu": 100 * ((busy1[CLIENT_CPU] - busy0[CLIENT_CPU]) / CLK_TCK - wrk_cpu) / secs}
    r["other_cpu_max_pct"] = max(0.0, *r["other_cpu_pct"].values())
    r["command"] = " ".join(cmd)
    return r


def measure(server, path, conns, duration, lua):
    """run_wrk, made robust for a server under development: a dead server is restarted first, a
    failed run becomes a flagged sample (errors, no figures) with its reason in "problem"."""
    problem = None
    if server.proc is None or server.proc.poll() is not None:
        tail = server.log_tail() if server.proc else ""
        try:
            server.stop()
            server.start()
            server.verify()
            problem = f"the server had died ({tail}); restarted for this run"
        except BenchError as e:
            return _failed_sample(f"the server is down and did not restart: {e}")
    try:
        r = run_wrk(server, path, conns, duration, lua)
    except BenchError as e:
        r = _failed_sample(str(e))
    if server.proc.poll() is not None:
        r["errors"] += 1
        problem = f"the server died during this run: {server.log_tail()}"
    if problem:
        r["problem"] = problem
    return r


def _failed_sample(why):
    r = dict.fromkeys(("requests", "bytes", "duration_us", "connect", "read", "write", "status",
                       "timeout"), 0)
    r.update(dict.fromkeys(("req_per_s", "mb_per_s", "server_cpu_s", "server_cpu_pct",
                            "cpu_us_per_req", "wrk_cpu_pct", "command")))
    r.update(errors=1, other_cpu_pct={}, other_cpu_max_pct=0.0, problem=why)
    return r


median = bl.median


def spread(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2 or not statistics.median(xs):
        return None
    return 100 * (max(xs) - min(xs)) / 2 / abs(statistics.median(xs))


def advantage(row, server):
    """How many times better gatling is than server on this row (>1: gatling better)."""
    g, o = row["values"].get("gatling"), row["values"].get(server)
    if not row["better"] or not g or not o or not g[0] or not o[0]:
        return None
    if g[0] <= 0 or o[0] <= 0:
        return None
    return g[0] / o[0] if row["better"] == "higher" else o[0] / g[0]


def render(rows, servers, rounds):
    others = [s for s in servers if s != "gatling"] if "gatling" in servers else []
    w0 = max(len(r["label"]) for r in rows) + 1
    head = f"{'measurement':<{w0}} {'unit':<5}" + "".join(f"{s:>15}" for s in servers)
    if others:
        head += "  " + "".join(f"{'vs ' + s:>12}" for s in others)
    lines = [f"median of {rounds} round(s); ±x% = half the min-max range; "
             "! = wrk errors or connections not held (see notes)"]
    if others:
        lines.append("vs X = gatling advantage: gatling/X where higher is better, X/gatling where "
                     "lower is better; >1 means gatling is better")
    lines += [head, "-" * len(head)]
    for r in rows:
        line = f"{r['label']:<{w0}} {r['unit']:<5}"
        for s in servers:
            v = r["values"].get(s)
            if not v or v[0] is None:
                cell = "-"
            else:
                cell = r["fmt"].format(v[0])
                if v[1] is not None and r["better"]:
                    cell += f" ±{v[1]:.0f}%"
                if v[2]:
                    cell += " !"
            line += f"{cell:>15}"
        if others:
            line += "  "
            for s in others:
                a = advantage(r, s)
                line += f"{(f'{a:.2f}x' if a else ''):>12}"
        lines.append(line.rstrip())
    return "\n".join(lines)


def _idle_short(r):
    return (r["server_held"] < r["wanted"] or r["seq_failed"] or r["burst_failed"]
            or r["seq_server_held"] < r["server_held"] or r["burst_server_held"] < r["server_held"])


def _why(err):
    return f": {err}" if err else ""


def notes_for(servers, samples, idle, skipped):
    out = [f"  {s}: not run: {why}" for s, why in skipped.items()]  # also failed idle rounds
    for (test, s), rs in sorted(samples.items()):
        for i, r in enumerate(rs):
            if r.get("problem"):
                out.append(f"  {s} {test} round {i + 1}: {r['problem']}")
            if r["errors"] and r["requests"]:
                out.append(f"  {s} {test} round {i + 1}: wrk errors: connect {r['connect']}, "
                           f"read {r['read']}, write {r['write']}, timeout {r['timeout']}, "
                           f"non-2xx/3xx {r['status']} (of {r['requests']:,} requests)")
    for s, rs in idle.items():
        for i, r in enumerate(rs):
            if _idle_short(r):
                out.append(f"  {s} idle round {i + 1}: wanted {r['wanted']}, client opened "
                           f"{r['opened']} ({r['connect_failed']} failed"
                           f"{_why(r['connect_error'])}), server held {r['server_held']}"
                           + "".join(f"; {ph}: {r[ph + '_answered']} answered, "
                                     f"{r[ph + '_failed']} failed{_why(r[ph + '_error'])}, "
                                     f"server held {r[ph + '_server_held']}"
                                     for ph in ("seq", "burst")))
    other = [r["other_cpu_max_pct"] for rs in samples.values() for r in rs]
    if other and max(other) >= 10:
        out.append(f"  noise: other processes took up to {max(other):.0f}% of CPU {SERVER_CPU} or "
                   f"{CLIENT_CPU} during a run (median {median(other):.0f}%): ratios of the "
                   "throughput rows are unreliable, CPU/request holds up better")
    for (test, s), rs in sorted(samples.items()):
        hot = median(r["wrk_cpu_pct"] for r in rs)
        if hot is not None and hot >= 95:
            out.append(f"  {s} {test}: wrk at {hot:.0f}% CPU: client-bound, the server may be "
                       "faster than measured")
    return ["notes:"] + (out or ["  none"])
