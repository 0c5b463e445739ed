"""bench/slashdot's soak: tens of thousands of idle connections held by httpbench, bench
windows back to back on top for --soak-minutes, the server's RSS sampled meanwhile; its
plan fitted to the limits, its verdict, its plot (gnuplot) and its TSV."""
import json
import math
import os
import shutil
import signal
import subprocess
import threading
import time

from benchkit import servers as cs
from benchkit.slashdot.base import (BenchError, FD_SLACK, PLACE, RAMP_STALL, REUSEPORT_SKEW,
                                    Refused, SMALL, SOAK_RSS_EVERY, mib, fmt_int, log, median,
                                    ports_per_source, secs_arg)
from benchkit.slashdot.clients import bench_once, judge
from benchkit.slashdot.peers import Srv

# ---------------------------------------------------------------------------------------------
# The soak: idle connections held by httpbench, bench windows back to back, RSS sampled.

def soak_plan(ctx):
    """[(label, kind, workers, idle)] fitted to RLIMIT_NOFILE and the ports; raise Refused."""
    plan = [("gatling", "gatling", 1, ctx.soak_idle[0]),
            ("gatling -W 2", "gatling", 2, ctx.soak_idle[1])]
    if not ctx.no_nginx:
        plan.append(("nginx", "nginx", 1, ctx.soak_idle[0]))
    ports = ports_per_source()
    problems = []
    for label, kind, workers, idle in plan:
        per_proc = math.ceil((idle + ctx.conns) / workers
                             * (REUSEPORT_SKEW if workers > 1 else 1)) + FD_SLACK
        if per_proc > ctx.nofile:
            problems.append(f"{label}: {idle:,} idle + {ctx.conns} busy connections need about "
                            f"{per_proc:,} descriptors per process, the limit is "
                            f"{ctx.nofile:,}")
        if ports and math.ceil(idle / len(PLACE.sources)) > ports:
            problems.append(f"{label}: {idle:,} connections from {len(PLACE.sources)} source "
                            f"addresses need more than the {ports:,} ephemeral ports each")
    if problems:
        raise Refused("soak cannot run: " + "; ".join(problems)
                      + f" (RLIMIT_NOFILE hard limit read with getrlimit: {ctx.nofile:,})")
    return plan


def hb_procs(ctx, idle):
    return max(1, math.ceil(idle / (ctx.nofile - FD_SLACK)))


def soak_one(ctx, label, kind, workers, idle, out):
    """One soak on one server; its result is appended to out at once and filled in place (an
    interrupted soak is reported with what it measured)."""
    secs = ctx.soak_minutes * 60
    win = ctx.soak_window
    binary = ctx.gatling if kind == "gatling" else ctx.nginx
    res = {"scenario": "soak", "server": label, "round": 1, "idle_wanted": idle,
           "problems": [], "commands": [], "windows": [], "samples": []}
    out.append(res)
    # nginx keeps 1/16 of its worker_connections free by closing idle connections ("worker
    # connections are not enough, reusing connections"): to hold them all it needs 16/15 of
    # them as slots, more than the open-file limit (it warns and runs; the descriptors it
    # really uses stay below the limit)
    wc = math.ceil((idle + ctx.conns + 16) * 16 / 15) + 16 if kind == "nginx" else None
    srv = Srv(kind, label, binary, ctx, timeout=int(secs + 600), workers=workers, wc=wc)
    hb = None
    sampler_stop = threading.Event()
    try:
        srv.start()
        ctx.server_argv[("soak", label)] = srv.argv
        if kind == "nginx":
            ctx.nginx_confs["soak"] = srv.config_text()
        q = res["quiet"] = bench_once(ctx, srv, win)
        res["commands"].append(("bench quiet", q["command"]))
        log(f"  [soak {label}] quiet: {fmt_int(q.get('req_per_s'))} req/s, p99 "
            f"{(q.get('p99_us') or 0) / 1e3:.2f} ms, {q['errors']} errors")
        left = srv.settle(5)
        if left:
            res["problems"].append(f"{left} connections of the quiet run still open")
        res["rss_quiet"] = srv.memory()["rss"]
        procs = hb_procs(ctx, idle)
        hold = secs + 120
        argv = PLACE.argv("attacker", [
            "taskset", "-c", cs.CLIENT_CPU, ctx.httpbench, "-q", "-J", "-P", str(procs),
            "-c", str(idle), "-k", "-i", str(10 * idle), "-s", "1", "-n", "1",
            "-w", secs_arg(hold), "-d", secs_arg(round(hold + 60 + idle / 500)),
            "-b", PLACE.source_range(), f"http://{PLACE.host}:{srv.port}/{SMALL[0]}"])
        res["commands"].append(("httpbench (idle holder; SIGINT ends it)", " ".join(argv)))
        hb_out = os.path.join(ctx.tmp, "logs", f"soak-{label.replace(' ', '')}-httpbench.out")
        hb_err = hb_out[:-4] + ".err"
        os.makedirs(os.path.dirname(hb_out), exist_ok=True)
        with open(hb_out, "w") as fo, open(hb_err, "w") as fe:
            hb = cs.spawn(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
        t0 = time.monotonic()
        last, since, next_log = -1, t0, t0 + 3
        while True:
            held = srv.socks()
            now = time.monotonic()
            if held >= idle:
                break
            if hb.poll() is not None:
                raise BenchError(f"httpbench exited (status {hb.returncode}) with {held:,} of "
                                 f"{idle:,} held: {tail(hb_err)}")
            if held != last:
                last, since = held, now
            elif now - since > RAMP_STALL:
                raise BenchError(f"the server has held {held:,} of {idle:,} for {RAMP_STALL:g}"
                                 f" s without a new one: {tail(hb_err)}")
            if now > next_log:
                log(f"  [soak {label}] ramp: {held:,} of {idle:,} held")
                next_log = now + 3
            time.sleep(0.5)  # each count reads every socket link: keep the polling light
        res["ramp_s"] = round(time.monotonic() - t0, 1)
        time.sleep(0.5)
        res["idle_held"] = srv.socks()
        res["rss_idle"] = srv.memory()["rss"]
        log(f"  [soak {label}] {res['idle_held']:,} idle held after {res['ramp_s']} s, RSS "
            f"{res['rss_quiet'] / 2**20:.1f} -> {res['rss_idle'] / 2**20:.1f} MiB; load for "
            f"{secs:g} s in {win:g} s windows")

        t_load = time.monotonic()

        def sampler():
            while True:
                m = srv.memory()
                res["samples"].append({"t": round(time.monotonic() - t_load, 1),
                                       "rss": m["rss"], "anon": m["anon"],
                                       "held": srv.socks()})
                if sampler_stop.wait(SOAK_RSS_EVERY):
                    return

        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        cpu0, next_log = srv.cpu_ticks(), t_load + 30
        while True:
            left = secs - (time.monotonic() - t_load)
            if left < 0.5:
                break
            w0 = time.monotonic() - t_load
            r = bench_once(ctx, srv, min(win, left))
            w = {"t0": round(w0, 1), "t1": round(time.monotonic() - t_load, 1),
                 "req_per_s": r.get("req_per_s"), "p50_us": r.get("p50_us"),
                 "p99_us": r.get("p99_us"), "max_us": r.get("max_us"),
                 "responses": r.get("responses"), "seconds": r.get("seconds"),
                 "errors": r["errors"], "error_kinds": r.get("error_kinds"),
                 "server_cpu_pct": r.get("server_cpu_pct")}
            if r.get("problem"):
                w["problem"] = r["problem"]
            res["windows"].append(w)
            if not res["commands"][-1][0].startswith("bench window"):
                res["commands"].append(("bench window (repeated back to back)", r["command"]))
            if hb.poll() is not None:
                res["problems"].append(f"httpbench EXITED during the load ({hb.returncode})")
                break
            if srv.proc.poll() is not None:
                res["problems"].append(f"{label} DIED during the soak: {srv.log_tail()}")
                res["server_died"] = True
                break
            if time.monotonic() > next_log:
                s = res["samples"][-1] if res["samples"] else {}
                log(f"  [soak {label}] {w['t1']:.0f}/{secs:g} s: {fmt_int(w['req_per_s'])} "
                    f"req/s, p99 {(w['p99_us'] or 0) / 1e3:.2f} ms, RSS "
                    f"{s.get('rss', 0) / 2**20:.1f} MiB, held {s.get('held', 0):,}")
                next_log = time.monotonic() + 30
        load_s = time.monotonic() - t_load
        res["server_cpu_pct"] = 100 * (srv.cpu_ticks() - cpu0) / cs.CLK_TCK / load_s
        sampler_stop.set()
        th.join(10)
        res["held_after"] = srv.socks()
        res["rss_end"] = srv.memory()["rss"]
        if hb.poll() is None:
            os.kill(hb.pid, signal.SIGINT)
            try:
                hb.wait(30)
            except subprocess.TimeoutExpired:
                res["problems"].append("httpbench did not stop within 30 s of SIGINT")
        cs.stop(hb)
        res["httpbench_exit"] = hb.returncode
        res["httpbench"] = hb_summary(hb_out)
        if res["httpbench"] is None:
            res["problems"].append(f"httpbench printed no summary: {tail(hb_err)}")
    except BenchError as e:
        res["problems"].append(str(e))
        res["failed"] = str(e)
        log(f"  [soak {label}] FAILED: {e}")
    except KeyboardInterrupt:
        res["failed"] = "interrupted"
        raise
    finally:
        sampler_stop.set()
        if hb is not None:
            cs.stop(hb)
        srv.stop()
        judge_soak(res)
        log(f"  [soak {label}] {res['verdict']}")


def tail(path, n=3):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().strip().splitlines()
    except OSError:
        return "(no output)"
    return " | ".join(lines[-n:]) or "(no output)"


def hb_summary(path):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("type") == "summary":
            return j
    return None


def judge_soak(res):
    """The soak's figures as a scenario row: overall req/s (responses over the windows' time),
    the median window p99, errors of bench and httpbench, connections dropped."""
    ws = [w for w in res["windows"] if w.get("req_per_s") is not None]
    q = res.get("quiet", {})
    tot_s = sum(w["seconds"] or 0 for w in ws)
    a = {"req_per_s": (sum(w["req_per_s"] * w["seconds"] for w in ws) / tot_s) if tot_s else None,
         "p99_us": median(w["p99_us"] for w in ws),
         "p99_max_us": max((w["p99_us"] for w in ws), default=None),
         "errors": sum(w["errors"] for w in res["windows"]),
         "server_cpu_pct": res.get("server_cpu_pct"),
         "command": next((c for k, c in res["commands"] if k.startswith("bench window")), "")}
    res["attack"] = a
    if not q:
        res["quiet"] = q = {"errors": 0}
    s = res.get("httpbench") or {}
    dropped = s.get("dropped")
    hb_err = s.get("errors_total")
    res["dropped"] = dropped
    judge(res)
    extra = []
    if res.get("failed"):
        extra.append(res["failed"])
    if dropped or hb_err:
        extra.append(f"httpbench: {dropped} dropped, {hb_err} errors")
        res["errors"] += (dropped or 0) + (hb_err or 0)
    if res.get("idle_held", 0) < res["idle_wanted"] or not s:
        extra.append(f"held {res.get('idle_held', 0):,} of {res['idle_wanted']:,}")
    extra += [p for p in res["problems"] if "DIED" in p or "EXITED" in p]
    if extra:
        v = res["verdict"]
        res["verdict"] = ("FAIL (" + (v[6:-1] + ", " if v.startswith("FAIL (") else "")
                          + ", ".join(extra) + ")")
    smp = res["samples"]
    rss = [x["rss"] for x in smp]
    res["attack_text"] = (
        f"{res.get('idle_held', 0):,} idle held ({res['idle_wanted']:,} wanted), "
        f"{fmt_int(dropped)} dropped; RSS {mib(res.get('rss_quiet'))} -> "
        + (f"{rss[0] / 2**20:.1f} .. {max(rss) / 2**20:.1f} MiB (start .. peak), "
           f"{rss[-1] / 2**20:.1f} at end" if rss else "?")
        + (f"; p99 worst window {a['p99_max_us'] / 1e3:.2f} ms" if a["p99_max_us"] else ""))
    res["rss_attack"] = rss[-1] if rss else None
    res["attack_only_cpu_pct"] = None


def plot_soak(ctx, soaks, outdir):
    """slashdot-soak.gp (data inline) -> slashdot-soak.png; returns the PNG path or None."""
    blocks, rss_plots, p99_plots, rps_plots = [], [], [], []
    colors = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd"]
    for i, r in enumerate(soaks):
        name = f"s{i}"
        blocks.append(f"${name}rss << EOD")
        blocks += [f"{x['t'] / 60:.4f} {x['rss'] / 2**20:.2f}" for x in r["samples"]]
        blocks.append("EOD")
        blocks.append(f"${name}win << EOD")
        blocks += [f"{(w['t0'] + w['t1']) / 120:.4f} {w['p99_us'] / 1e3:.3f} {w['req_per_s']:.1f}"
                   for w in r["windows"] if w.get("p99_us") is not None]
        blocks.append("EOD")
        title = f"{r['server']}, {r.get('idle_held', 0):,} idle"
        c = colors[i % len(colors)]
        rss_plots.append(f"${name}rss using 1:2 with linespoints pt 7 ps 0.5 lc rgb '{c}' "
                         f"title '{title}'")
        p99_plots.append(f"${name}win using 1:2 with linespoints pt 7 ps 0.6 lc rgb '{c}' "
                         f"title '{title}'")
        q = (r.get("quiet") or {}).get("p99_us")
        if q:
            p99_plots.append(f"{2 * q / 1e3:.3f} with lines dt 2 lc rgb '{c}' "
                             f"title '2 x quiet p99, {r['server']}'")
        rps_plots.append(f"${name}win using 1:3 with linespoints pt 7 ps 0.6 lc rgb '{c}' "
                         f"title '{title}'")
    head = (f"bench/slashdot soak: {ctx.conns} keep-alive clients (bench, {ctx.soak_window:g} s "
            f"windows) on top of the idle connections; servers on CPU {cs.SERVER_CPU}, "
            f"clients on CPU {cs.CLIENT_CPU}")
    gp = blocks + [
        "set terminal pngcairo size 1400,1100 font ',10'",
        "set output 'slashdot-soak.png'",
        f"set multiplot layout 3,1 title '{head}'",
        "set grid", "set key outside right", "set xlabel 'minutes into the load'",
        f"set xrange [0:{max(ctx.soak_minutes, 0.1):g}]",
        "set ylabel 'server RSS, MiB'", "set yrange [0:*]",
        "plot " + ", \\\n     ".join(rss_plots),
        "set ylabel 'p99 latency per window, ms'", "set logscale y",
        "set yrange [*:*]",
        "plot " + ", \\\n     ".join(p99_plots),
        "unset logscale y", "set yrange [0:*]",
        "set ylabel 'requests/s per window'",
        "plot " + ", \\\n     ".join(rps_plots),
        "unset multiplot",
    ]
    path = os.path.join(outdir, "slashdot-soak.gp")
    with open(path, "w") as f:
        f.write("# written by bench/slashdot; run: gnuplot slashdot-soak.gp\n" + "\n".join(gp)
                + "\n")
    if not shutil.which("gnuplot"):
        log("slashdot: gnuplot not found: slashdot-soak.gp written, no PNG")
        return None
    r = subprocess.run(["gnuplot", "slashdot-soak.gp"], cwd=outdir, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        log(f"slashdot: gnuplot failed: {r.stderr.strip()[-500:]}")
        return None
    return os.path.join(outdir, "slashdot-soak.png")


def soak_tsv(soaks):
    out = ["server\tseries\tt_s\trss_kib\tanon_kib\tidle_held\tt1_s\treq_per_s\tp50_us\t"
           "p99_us\tmax_us\terrors"]
    for r in soaks:
        for x in r["samples"]:
            out.append(f"{r['server']}\trss\t{x['t']}\t{x['rss'] // 1024}\t{x['anon'] // 1024}"
                       f"\t{x['held']}\t\t\t\t\t\t")
        for w in r["windows"]:
            out.append(f"{r['server']}\twindow\t{w['t0']}\t\t\t\t{w['t1']}\t"
                       + "\t".join("" if w.get(k) is None else f"{w[k]:.0f}" for k in
                                   ("req_per_s", "p50_us", "p99_us", "max_us"))
                       + f"\t{w['errors']}")
    return out
