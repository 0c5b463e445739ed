"""bench/slashdot's attacks as the driver sees them: each started with its exact commands on
the attackers' CPU or host (slowhttptest for the slow ones, attackers.py for the rate and
the flood), its CPU, stopped into a summary; the newcomers' probe during the flood; what
the attacker saw, in a few words for the table."""
import http.client
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from benchkit import servers as cs
from benchkit.slashdot import attackers
from benchkit.slashdot.attackers import pct
from benchkit.slashdot.base import (ATTACK_NICE, AUTH_CONNS, AUTH_RATE, BIG, GZIP_CONNS, GZIP_FILES,
                                    GZIP_RATE, PLACE, SLOW_CONNS, SMALL, USER, basic, fmt_int, get)

# ---------------------------------------------------------------------------------------------
# Attacks as seen from the driver: start (with the exact commands), held count, stop -> summary.

def attack_argv(argv):
    """Attackers share the client CPU with bench, at nice 19: the attacker's own CPU use (a
    slowhttptest polls 1,000 sockets at about a third of a CPU) is the test rig's cost, not the
    server's, and must not slow the normal clients down.  What the attacker achieved is
    reported (rates, connections), so a starved attacker shows.  On the attackers' host with
    --netlab, on another CPU with --attacker-cpu."""
    cpu = cs.CLIENT_CPU if PLACE.attacker_cpu is None else str(PLACE.attacker_cpu)
    return PLACE.argv("attacker", ["taskset", "-c", cpu, "nice", "-n", str(ATTACK_NICE)]
                      + list(argv))


class Attack:
    def __init__(self, ctx, tag):
        self.ctx, self.tag, self.procs, self.commands, self.files = ctx, tag, [], [], []

    def spawn(self, argv, name):
        out = os.path.join(self.ctx.tmp, "logs", f"{self.tag}-{name}.out")
        err = os.path.join(self.ctx.tmp, "logs", f"{self.tag}-{name}.err")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as fo, open(err, "w") as fe:
            p = cs.spawn(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
        self.procs.append(p)
        self.files.append((out, err))
        self.commands.append(" ".join(argv))
        return p

    def alive(self):
        return any(p.poll() is None for p in self.procs)

    def cpu_ticks(self):
        """utime+stime of every process of the attack (its sessions) so far; a process that
        has ended counts with its last reading."""
        n = 0
        for p in list(self.procs):
            if p.poll() is None:
                p.last_ticks = sum((cs.proc_stat(pid) or (0, 0, 0))[2]
                                   for pid in cs.session_pids(p.pid))
            n += getattr(p, "last_ticks", 0)
        return n

    def stop(self, sig=signal.SIGTERM, grace=8.0):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            cs.stop(p)
        return self.summary()

    def summary(self):
        return {}

    @staticmethod
    def _json_out(path):
        try:
            with open(path, errors="replace") as f:
                lines = f.read().strip().splitlines()
            return json.loads(lines[-1]) if lines else None
        except (OSError, ValueError):
            return None


SLOW = {
    # name: (slowhttptest options, file)
    "slowloris": (["-H", "-i", "10", "-x", "24", "-t", "GET"], SMALL[0]),
    "slowbody": (["-B", "-i", "10", "-x", "10", "-s", "8192", "-t", "POST"], SMALL[0]),
    "slowread": (["-X", "-w", "512", "-y", "1024", "-n", "5", "-z", "32", "-k", "3"], BIG[0]),
    # -b 800: a 5.8 KB Range header of 801 ranges, inside both servers' limits (nginx: 8 KB a
    # line, gatling: 16 KB a head), so that the ranges are parsed, not refused as too long
    "range": (["-R", "-a", "10", "-b", "800", "-t", "GET"], BIG[0]),
}


class SlowAttack(Attack):
    """slowhttptest -c 1000 -r RATE -l SECS -g (per-second CSV), its screen output to a file.
    With repeat (the range attack: each connection makes one request and is done, so one run
    is over in c/r seconds), a new run starts as soon as the last one ends, until stopped."""

    def __init__(self, ctx, tag, srv, name, rate, secs, repeat=False):
        super().__init__(ctx, tag)
        opts, path = SLOW[name]
        self.csv = os.path.join(ctx.tmp, "logs", f"{tag}-slowhttptest")
        self.conns, self.rate, self.runs = SLOW_CONNS, rate, 0
        self.argv = attack_argv(
            ["slowhttptest"] + opts
            + ["-c", str(SLOW_CONNS), "-r", str(rate), "-l", str(int(math.ceil(secs))),
               "-p", "3", "-g", "-o", "CSV", "-u", f"http://{PLACE.host}:{srv.port}/{path}"])
        self._start_one()
        self.repeat = repeat
        if repeat:
            self.commands[0] += "   (run again as soon as it ends, until the measurement is over)"
            self.stop_ev, self.deadline = threading.Event(), time.monotonic() + secs
            self.th = threading.Thread(target=self._loop, daemon=True)
            self.th.start()

    def _start_one(self):
        self.runs += 1
        argv = [f"{self.csv}-{self.runs}" if x == "CSV" else x for x in self.argv]
        p = self.spawn(argv, f"slowhttptest-{self.runs}")
        if self.runs > 1:
            self.commands.pop()  # the same command again: recorded once
        return p

    def _loop(self):
        while not self.stop_ev.wait(0.05):
            if time.monotonic() > self.deadline:
                return
            if self.procs[-1].poll() is not None:
                self._start_one()

    def alive(self):
        return (self.repeat and self.th.is_alive()) or super().alive()

    def ramp_seconds(self):
        return 1.0 if self.repeat else self.conns / self.rate

    def stop(self, sig=signal.SIGINT, grace=8.0):
        if self.repeat:
            self.stop_ev.set()
            self.th.join(5)
        return super().stop(sig, grace)  # SIGINT: slowhttptest ends its test and writes the CSV

    def summary(self):
        s = {"runs": self.runs, "exit_status": {}, "exit": {}}
        tot_closed = tot_secs = 0
        for i in range(1, self.runs + 1):
            rows = []
            try:
                with open(f"{self.csv}-{i}.csv") as f:
                    for line in f.read().splitlines()[1:]:
                        v = line.split(",")
                        if len(v) == 5 and all(x.strip().lstrip("-").isdigit() for x in v):
                            rows.append([int(x) for x in v])
            except OSError:
                pass
            try:
                with open(self.files[i - 1][0], errors="replace") as f:
                    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", f.read())
            except OSError:
                text = ""
            m = re.findall(r"Exit status:\s*(.*)", text)
            k = m[-1].strip() if m else "none"
            s["exit_status"][k] = s["exit_status"].get(k, 0) + 1
            k = str(self.procs[i - 1].returncode)
            s["exit"][k] = s["exit"].get(k, 0) + 1
            if rows:
                tot_closed += rows[-1][1]
                tot_secs += rows[-1][0] + 1
                if i == 1:
                    s.update(max_connected=max(r[3] for r in rows), closed_at_end=rows[-1][1],
                             connected_at_end=rows[-1][3], seconds=rows[-1][0],
                             service_unavailable_s=sum(1 for r in rows if r[4] == 0))
        if self.repeat:
            s.update(closed_total=tot_closed, seconds_total=tot_secs)
        return s


class RateAttack(Attack):
    def __init__(self, ctx, tag, srv, kind, secs):
        super().__init__(ctx, tag)
        if kind == "auth":
            p = {"paths": ["/private/secret.txt"], "rate": AUTH_RATE, "conns": AUTH_CONNS,
                 "headers": {"Authorization": basic(USER, "not-the-password")}}
        else:
            p = {"paths": [f"/gz/t{i:02d}.txt" for i in range(GZIP_FILES)], "rate": GZIP_RATE,
                 "conns": GZIP_CONNS, "headers": {"Accept-Encoding": "gzip"},
                 "want_gzip": True}
        p.update(host=PLACE.host, port=srv.port, seconds=round(secs, 1))
        self.params = p
        self.argv = attack_argv([sys.executable, attackers.PATH, "rate",
                                 json.dumps(p, separators=(",", ":"))])
        self.spawn(self.argv, "rate")

    def summary(self):
        return self._json_out(self.files[0][0]) or {"problem": "the attacker printed nothing"}


class FloodAttack(Attack):
    """p processes of the flood helper, each with its share of the connections and all eight
    source addresses, p from RLIMIT_NOFILE."""

    def __init__(self, ctx, tag, srv, secs):
        super().__init__(ctx, tag)
        n, procs = ctx.flood_conns, ctx.flood_procs
        for i in range(procs):
            share = n // procs + (1 if i < n % procs else 0)
            p = {"host": PLACE.host, "port": srv.port, "conns": share,
                 "rate": ctx.flood_rate / procs, "sources": PLACE.sources,
                 "seconds": round(secs, 1)}
            argv = attack_argv([sys.executable, attackers.PATH, "flood",
                                json.dumps(p, separators=(",", ":"))])
            self.spawn(argv, f"flood{i}")

    def summary(self):
        tot = {}
        for out, _ in self.files:
            j = self._json_out(out)
            if not j:
                tot.setdefault("problems", []).append(f"{out}: no summary")
                continue
            for k, v in j.items():
                if isinstance(v, dict):
                    d = tot.setdefault(k, {})
                    for kk, vv in v.items():
                        d[kk] = d.get(kk, 0) + vv
                elif isinstance(v, (int, float)) and k != "seconds":
                    tot[k] = tot.get(k, 0) + v
                elif k == "seconds":
                    tot[k] = max(tot.get(k, 0), v)
        return tot


class NewcomerProbe:
    """During the flood: every 0.5 s a fresh connection asks for the small file (3 s timeout).
    What a new visitor gets: 200, 503 (with or without Retry-After), or nothing."""

    def __init__(self, port):
        self.port, self.res, self.stop_ev = port, {}, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_ev.wait(0.5):
            t0 = time.monotonic()
            try:
                st, h, _ = get(self.port, "/" + SMALL[0], timeout=3)
                k = str(st) + ("+Retry-After" if st == 503 and "retry-after" in h else "")
            except socket.timeout:
                k = "timeout"
            except (OSError, http.client.HTTPException) as e:
                k = type(e).__name__
            self.res[k] = self.res.get(k, 0) + 1
            self.res.setdefault("ms", []).append(round(1e3 * (time.monotonic() - t0), 1))

    def stop(self):
        self.stop_ev.set()
        self.t.join(5)
        ms = self.res.pop("ms", [])
        return dict(self.res, p50_ms=pct(ms, 0.5), max_ms=max(ms or [0]))


def attack_text(name, s, held):
    """What the attacker saw, in a few words, for the table."""
    if s is None:
        return "-"
    if name in SLOW:
        if "max_connected" not in s:
            return f"slowhttptest: {s.get('exit_status') or 'no CSV'}"
        if "closed_total" in s:
            return (f"slowhttptest run {s['runs']} times back to back: {s['closed_total']:,} "
                    f"connections done in {s['seconds_total']} s "
                    f"(~{s['closed_total'] / max(1, s['seconds_total']):.0f}/s)")
        return (f"server held {fmt_int(held)}; slowhttptest: {s['max_connected']:,} connected "
                f"max, {s['connected_at_end']:,} at end")
    if name in ("auth", "gzip"):
        if "answered_per_s" not in s:
            return s.get("problem", "-")
        st = ", ".join(f"{k}: {v:,}" for k, v in sorted(s["status"].items()))
        extra = f", {s['not_gzip']:,} not gzip" if name == "gzip" and s["not_gzip"] else ""
        errs = sum(s["errors"].values())
        return (f"{s['answered_per_s']:g}/s answered of {s['scheduled'] / s['seconds']:.0f}/s "
                f"({st}{extra}), p50 {s['lat_ms']['p50'] or 0:.0f} ms"
                + (f", {errs:,} failed" if errs else ""))
    if name == "flood":
        st = ", ".join(f"{k}: {v:,}" for k, v in sorted(s.get("status", {}).items()))
        nc = s.get("newcomers", {})
        ncs = ", ".join(f"{k} {v}" for k, v in sorted(nc.items()) if not k.endswith("_ms"))
        return (f"server held {fmt_int(held)}; flood open {s.get('open_at_end', 0):,} "
                f"(+{s.get('connecting_at_end', 0):,} connecting), answers {st or 'none'}, "
                f"Retry-After {s.get('retry_after', 0):,}, silent closes "
                f"{s.get('closed_silent', 0):,}, ctimeouts {s.get('ctimeout', 0):,}; "
                f"newcomers: {ncs or '-'}")
    return "-"
