#!/usr/bin/env python3
"""(Made for issue 80's run; it expects /tmp/perfwt/env: compare-h2's docroot, assets.txt, a
dist/mkcert.sh KEY=ec pki and the driver's openssl.cnf, made by hand.)
A/B of two gatling binaries on the surge row: alternating rounds, bench --surge RATE -d D,
server CPU per visitor from /proc/PID/task/*/schedstat; prints per-round ratios new/base."""
import json, os, subprocess, sys, time, statistics, glob
base, new, rounds, rate, dur = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
env = dict(os.environ, OPENSSL_CONF="/tmp/perfwt/env/openssl.cnf")
B = "/work/wt-perf/build/epoll/bench"
def cpu(pid):
    t = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        t += int(open(f).read().split()[0])
    return t
def one(binary, port):
    p = subprocess.Popen(["taskset", "-c", "0", binary, "-i", "127.0.0.1", "-p", str(port + 1000), "-e", str(port),
                          "-n", "-C", "/tmp/perfwt/env/pki/certs", "-T", "600", "-s", "600", "-O",
                          "TLS_AES_128_GCM_SHA256", "-R", "0"], cwd="/tmp/perfwt/env/docroot", env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.7)
    subprocess.run(["curl", "-sk", "--http2", "-o", "/dev/null", f"https://127.0.0.1:{port}/index.html"], env=env)
    c0 = cpu(p.pid)
    r = subprocess.run(["taskset", "-c", "1", B, "-J", "-q", "--surge", rate, "-d", dur, "-t", "3", "--assets",
                        "/tmp/perfwt/env/assets.txt", f"https://127.0.0.1:{port}/index.html"],
                       env=env, capture_output=True, text=True)
    c1 = cpu(p.pid)
    p.terminate(); p.wait()
    j = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
    assert j["pages"] == j["visitors"] and not j["errors_total"], j
    return (c1 - c0) / 1e3 / j["visitors"]
ratios = []; a = []; b = []
for i in range(rounds):
    order = [(base, "base"), (new, "new")] if i % 2 == 0 else [(new, "new"), (base, "base")]
    res = {}
    for k, (binary, name) in enumerate(order):
        res[name] = one(binary, 19600 + 10 * i + k)
    a.append(res["base"]); b.append(res["new"]); ratios.append(res["new"] / res["base"])
    print(f"round {i+1}: base {res['base']:.0f} us/visitor, new {res['new']:.0f}, new/base {ratios[-1]:.3f}", flush=True)
print(f"median base {statistics.median(a):.0f} new {statistics.median(b):.0f} us/visitor; new/base per round median "
      f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
