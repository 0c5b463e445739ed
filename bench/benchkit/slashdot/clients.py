"""bench/slashdot's normal clients: one bench run beside the server (BenchRun, bench_once),
and the verdict on what they got under attack against the same run quiet (judge)."""
import json
import resource
import subprocess
import time

from benchkit import servers as cs
from benchkit.slashdot.base import P99_TARGET, PLACE, SMALL, TPUT_TARGET, secs_arg

# ---------------------------------------------------------------------------------------------
# bench: the normal clients

class BenchRun:
    """One bench -c 50 -k run on CPU 1, with the server's CPU and the CPUs' busy time around it."""

    def __init__(self, ctx, srv, secs):
        self.srv, self.secs, self.timeout = srv, secs, ctx.timeout
        self.argv = ["taskset", "-c", cs.CLIENT_CPU, ctx.bench, "-q", "-J", "-c",
                     str(ctx.conns), "-k", "-d", secs_arg(secs), "-t", secs_arg(ctx.timeout)]
        if ctx.rate:  # open loop: a fixed offered rate, latency from each request's due time
            self.argv += ["-R", "%d" % ctx.rate]
        self.argv = PLACE.argv("client",
                               self.argv + [f"http://{PLACE.host}:{srv.port}/{SMALL[0]}"])
        self.p = None

    def start(self):
        self.cpu0, self.busy0 = self.srv.cpu_ticks(), cs.cpu_busy_ticks()
        self.ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.t0 = time.monotonic()
        self.p = cs.spawn(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
        return self

    def finish(self):
        r = {"command": " ".join(self.argv)}
        try:
            out, err = self.p.communicate(timeout=self.secs + 2 * self.timeout + 30)
        except subprocess.TimeoutExpired:
            cs.stop(self.p)
            return dict(r, problem=f"bench did not finish within "
                        f"{self.secs + 2 * self.timeout + 30:g} s",
                        errors=1, req_per_s=None, p99_us=None, p50_us=None)
        wall = time.monotonic() - self.t0
        cs.stop(self.p)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy1, cpu1 = cs.cpu_busy_ticks(), self.srv.cpu_ticks()
        try:
            j = json.loads(out)
        except ValueError:
            return dict(r, problem=f"bench (status {self.p.returncode}) printed no report: "
                        f"{(err.strip() or out.strip())[-300:]}", errors=1, req_per_s=None,
                        p99_us=None, p50_us=None)
        client = (ru1.ru_utime - self.ru0.ru_utime) + (ru1.ru_stime - self.ru0.ru_stime)
        server = (cpu1 - self.cpu0) / cs.CLK_TCK
        r.update(
            exit=self.p.returncode, fatal=j["fatal"], req_per_s=j["requests_per_s"],
            responses=j["responses"], p50_us=j["latency_us"]["p50"],
            p99_us=j["latency_us"]["p99"], max_us=j["latency_us"]["max"],
            errors=j["errors_total"] + (j["fatal"] is not None),
            error_kinds={k: v for k, v in j["errors"].items() if v},
            status=j["status"], seconds=j["seconds"], wall_s=wall,
            server_cpu_pct=100 * server / wall, bench_cpu_pct=100 * client / wall,
            cpu_busy_pct={c: 100 * (busy1[c] - self.busy0[c]) / cs.CLK_TCK / wall
                          for c in (cs.SERVER_CPU, cs.CLIENT_CPU)})
        if j["status"].get("4xx") or j["status"].get("5xx"):
            r["problem"] = f"status classes {j['status']}"
        return r


def bench_once(ctx, srv, secs):
    return BenchRun(ctx, srv, secs).start().finish()


def judge(res):
    """Ratios to quiet and the verdict against the targets."""
    q, a = res["quiet"], res["attack"]
    fails = []
    if q.get("req_per_s") and a.get("req_per_s") is not None:
        res["tput_ratio"] = a["req_per_s"] / q["req_per_s"]
        if res["tput_ratio"] < TPUT_TARGET:
            fails.append(f"req/s {res['tput_ratio']:.2f}x")
    else:
        fails.append("no req/s")
    if q.get("p99_us") and a.get("p99_us") is not None:
        res["p99_ratio"] = a["p99_us"] / q["p99_us"]
        if res["p99_ratio"] > P99_TARGET:
            fails.append(f"p99 {res['p99_ratio']:.1f}x")
    errs = res["errors"] = a["errors"] + q["errors"]
    if errs:
        fails.append(f"{errs:,} errors")
    if res.get("server_died"):
        fails.append("server died")
    res["verdict"] = "PASS" if not fails else "FAIL (" + ", ".join(fails) + ")"
