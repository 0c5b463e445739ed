#!/usr/bin/env python3
"""A/B of the server's CPU per FTP download (1 KiB, bench -k -c 20): old and new gatling
side by side, alternating rounds, server on CPU 0, bench on CPU 1."""
import json, os, socket, subprocess, sys, tempfile, time
OLD, NEW, BENCH = sys.argv[1], sys.argv[2], sys.argv[3]
ROUNDS, SECS = int(sys.argv[4]), int(sys.argv[5])
TICK = os.sysconf("SC_CLK_TCK")
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK
with tempfile.TemporaryDirectory() as d:
    os.chmod(d, 0o755)
    open(os.path.join(d, "1k.bin"), "wb").write(os.urandom(1024)); os.chmod(os.path.join(d, "1k.bin"), 0o644)
    srv = {}
    for name, b in (("old", OLD), ("new", NEW)):
        fp = free_port()
        p = subprocess.Popen(["taskset", "-c", "0", b, "-i", "127.0.0.1", "-p", "0", "-f", str(fp), "-n",
                              "-E", "-H", "-T", "600"], cwd=d, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", fp), timeout=0.2).close(); break
            except OSError:
                time.sleep(0.05)
        srv[name] = (p, fp)
    res = {"old": [], "new": []}
    try:
        for r in range(ROUNDS):
            for name in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
                p, fp = srv[name]
                c0 = cpu(p.pid)
                j = json.loads(subprocess.run(["taskset", "-c", "1", BENCH, "-k", "-c", "20", "-d", str(SECS), "-J",
                    "ftp://127.0.0.1:%d/1k.bin" % fp], stdout=subprocess.PIPE, text=True).stdout)
                c1 = cpu(p.pid)
                n = j["responses"]; e = sum(j.get("errors", {}).values())
                res[name].append((c1 - c0) * 1e6 / n)
                print("round %d %s: %d downloads, errors %d, %.2f us CPU/download" % (r + 1, name, n, e, res[name][-1]), flush=True)
    finally:
        for p, _ in srv.values(): p.terminate()
    ratios = sorted(n / o for o, n in zip(res["old"], res["new"]))
    med = {k: sorted(v)[len(v) // 2] for k, v in res.items()}
    print("median us/download: old %.2f new %.2f; new/old per round %s, median %.3f" %
          (med["old"], med["new"], " ".join("%.3f" % x for x in ratios), ratios[len(ratios) // 2]))
