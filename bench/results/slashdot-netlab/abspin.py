#!/usr/bin/env python3
"""abspin.py SPIN-BENCH NAP-BENCH ROUNDS [OUT.json] [--netlab]: bench -R 10000 built two ways,
alternating, quiet and under slowloris, against one gatling on CPU 0 (loopback; with --netlab,
gatling, bench and the attacker each on a host of a bench/netlab lab, CPUs unchanged).

SPIN-BENCH is bench before the fix (open loop: gio_wait(0) in a loop while the next request is
due within the millisecond), NAP-BENCH after it (nanosleep of at most 50 us instead).  The
attacker is slashdot's: slowhttptest -H, 1,000 connections, taskset -c 1 nice -n 19, beside
bench.  Per run: p50, p99, max, the share of requests at 4 ms or more (one tick at HZ=250),
bench's CPU time and its voluntary / involuntary context switches (wait4's rusage)."""
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

args = [a for a in sys.argv[1:] if a != "--netlab"]
spin, nap, rounds = args[0], args[1], int(args[2])
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
sys.path.insert(0, os.path.join(repo, "bench"))
place, host, lab = {}, "127.0.0.1", None
if "--netlab" in sys.argv:
    import benchlib
    lab = benchlib.load_driver("netlab").Lab(["srv", "cli", "atk"], lab="abspin")
    place = {n: lab.host(n) for n in ("srv", "cli", "atk")}
    host = place["srv"].addrs[0]


def on(role, argv):
    return place[role].argv(argv) if role in place else argv


root = tempfile.mkdtemp(prefix="abspin.")
os.chmod(root, 0o755)
with open(os.path.join(root, "1k.bin"), "wb") as f:
    f.write(os.urandom(1024))
port = 19000 + os.getpid() % 500
srv = subprocess.Popen(on("srv", ["taskset", "-c", "0", os.path.join(repo, "gatling", "gatling"),
                                  "-i", host, "-p", str(port), "-n", "-T", "600", "-s", "600",
                                  "-c", root]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       start_new_session=True)
url = f"http://{host}:{port}/1k.bin"
time.sleep(0.5)


def run(binary):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(on("cli", ["taskset", "-c", "1", binary, "-q", "-J", "-c", "50", "-k",
                                  "-R", "10000", "-d", "5", "-t", "10", url]),
                       capture_output=True, text=True, timeout=60)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    j = json.loads(p.stdout)
    lat = j["latency_us"]
    n = lat["hist"]["count"]
    slow = sum(c for hi, c in lat["hist"]["buckets"] if hi >= 4000)
    return {"p50_ms": lat["p50"] / 1e3, "p99_ms": lat["p99"] / 1e3, "max_ms": lat["max"] / 1e3,
            "ge4ms_pct": 100 * slow / n, "req_per_s": j["requests_per_s"],
            "cpu_s": round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 2),
            "nvcsw": r1.ru_nvcsw - r0.ru_nvcsw, "nivcsw": r1.ru_nivcsw - r0.ru_nivcsw}


res = []
atk = None
try:
    for phase in ("quiet", "slowloris"):
        if phase == "slowloris":
            atk = subprocess.Popen(on("atk", ["taskset", "-c", "1", "nice", "-n", "19",
                                              "slowhttptest", "-H", "-i", "10", "-x", "24", "-t",
                                              "GET", "-c", "1000", "-r", "500", "-p", "3", "-l",
                                              "300", "-u", url]),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
            time.sleep(4)
        for rnd in range(rounds):
            for name, b in ((("spin", spin), ("nap", nap)) if rnd % 2 == 0
                            else (("nap", nap), ("spin", spin))):
                r = dict(run(b), phase=phase, bench=name, round=rnd + 1)
                res.append(r)
                print(f"{phase:9} {name:4} r{rnd + 1}: p50 {r['p50_ms']:7.2f}  p99 "
                      f"{r['p99_ms']:7.2f}  max {r['max_ms']:7.1f} ms  >=4ms "
                      f"{r['ge4ms_pct']:5.2f}%  cpu {r['cpu_s']:4.2f} s  vol/invol cs "
                      f"{r['nvcsw']}/{r['nivcsw']}", flush=True)
finally:
    if atk:
        os.kill(atk.pid, signal.SIGINT)
        try:
            atk.wait(10)
        except subprocess.TimeoutExpired:
            atk.kill()
    srv.terminate()
    srv.wait(5)
    subprocess.run(["rm", "-rf", root])
    if lab:
        lab.down()
if len(args) > 3:
    with open(args[3], "w") as f:
        json.dump(res, f, indent=1)
