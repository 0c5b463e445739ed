#!/usr/bin/env python3
"""A/B of the front server's CPU per proxied request: old and new gatling, the same
backend (the new gatling serving a 1 KiB file), alternating rounds, the front on
CPU 0, the backend and bench on CPU 1.  CPU from /proc/PID/stat (utime+stime).
A sixth argument "cache" puts the response cache in front (.cache ttl 60, --cache 64M):
then every request after the first is a cache hit.
    ab_proxy.py OLD NEW BENCH ROUNDS SECONDS [cache]"""
import json, os, re, socket, subprocess, sys, tempfile, time
OLD, NEW, BENCH = sys.argv[1], sys.argv[2], sys.argv[3]
ROUNDS, SECS = int(sys.argv[4]), int(sys.argv[5])
CACHE = sys.argv[6:7] == ["cache"]
TICK = os.sysconf("SC_CLK_TCK")

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(binary, cwd, port, cpu, extra):
    p = subprocess.Popen(["taskset", "-c", cpu, binary, "-i", "127.0.0.1", "-p", str(port), "-n",
                          "-E", "-H", "-T", "600"] + extra, cwd=cwd,
                         stdout=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); return p
        except OSError:
            time.sleep(0.05)
    raise SystemExit("%s did not start" % binary)

def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK

with tempfile.TemporaryDirectory() as d:
    back, front = os.path.join(d, "back"), os.path.join(d, "front")
    os.mkdir(back); os.mkdir(front)
    open(os.path.join(back, "1k.bin"), "wb").write(os.urandom(1024))
    open(os.path.join(front, ".proxy"), "w").close()
    if CACHE:
        open(os.path.join(front, ".cache"), "w").write("ttl 60\n")
        os.chmod(os.path.join(front, ".cache"), 0o644)
    for x in (back, front, d): os.chmod(x, 0o755)
    os.chmod(os.path.join(back, "1k.bin"), 0o644); os.chmod(os.path.join(front, ".proxy"), 0o644)
    bport = free_port()
    be = start(NEW, back, bport, "1", [])
    fronts = {}
    for name, binary in (("old", OLD), ("new", NEW)):
        port = free_port()
        fronts[name] = (start(binary, front, port, "0", ["-P", "127.0.0.1/%d/^/" % bport]
                              + (["--cache", "64M"] if CACHE else [])), port)
    res = {"old": [], "new": []}
    try:
        for r in range(ROUNDS):
            for name in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
                p, port = fronts[name]
                c0 = cpu(p.pid)
                out = subprocess.run(["taskset", "-c", "1", BENCH, "-k", "-c", "32", "-d", str(SECS),
                                      "-J", "http://127.0.0.1:%d/1k.bin" % port],
                                     stdout=subprocess.PIPE, text=True).stdout
                c1 = cpu(p.pid)
                j = json.loads(out)
                n = j.get("responses") or j.get("requests")
                errs = sum(j.get("errors", {}).values())
                res[name].append((c1 - c0) * 1e6 / n)
                print("round %d %s: %d responses, errors %d, %.2f us CPU/request" %
                      (r + 1, name, n, errs, res[name][-1]), flush=True)
    finally:
        for p, _ in fronts.values(): p.terminate()
        be.terminate()
    med = {k: sorted(v)[len(v) // 2] for k, v in res.items()}
    ratios = sorted(n / o for o, n in zip(res["old"], res["new"]))
    print("median us/request: old %.2f new %.2f; new/old per round %s, median %.3f" %
          (med["old"], med["new"], " ".join("%.3f" % x for x in ratios), ratios[len(ratios) // 2]))
