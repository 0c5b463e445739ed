#!/usr/bin/env python3
"""schedtail.py PERF.DATA CPU BENCH-PID: from `perf sched timehist`, how long bench waited between its
wakeup and running on CPU (default 1), and who held the CPU meanwhile.

Prints the distribution of bench's scheduling delays (wakeup -> on CPU), the share of the waits
over 1 ms that each other task filled, and the run lengths of every task on that CPU (how long
one keeps the CPU once it has it)."""
import collections
import subprocess
import sys

data, cpu, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = subprocess.run(["perf", "sched", "timehist", "-i", data, "-C", str(cpu)],
                     capture_output=True, text=True).stdout
segs = []  # (start, end, comm, sch_delay)
for line in out.splitlines():
    w = line.split()
    if len(w) < 6 or not w[0][0].isdigit() or not w[1].startswith("["):
        continue
    try:
        end, run, delay = float(w[0]), float(w[-1]) / 1e3, float(w[-2]) / 1e3
    except ValueError:
        continue
    task = " ".join(w[2:-3])
    comm = "bench (ours)" if task.endswith(f"[{pid}]") else task.rsplit("[", 1)[0]
    segs.append((end - run, end, comm, delay))
bins = [0.0001, 0.001, 0.002, 0.003, 0.004, 0.005, 0.008, float("inf")]
hist, filled, n = collections.Counter(), collections.Counter(), 0
for i, (start, end, comm, d) in enumerate(segs):
    if comm != "bench (ours)":
        continue
    n += 1
    hist[next(b for b in bins if d <= b)] += 1
    if d > 0.001:
        t0 = start - d
        j = i - 1
        while j >= 0 and segs[j][1] > t0:
            s, e, c, _ = segs[j]
            filled[c] += min(e, start) - max(s, t0)
            j -= 1
print(f"bench {pid} on CPU {cpu}: {n} times switched in; delay from wakeup to running:")
for b in bins:
    lab = f"<= {b * 1e3:g} ms" if b != float("inf") else "> 8 ms"
    print(f"  {lab:>10}: {hist[b]:6d}  ({100 * hist[b] / max(n, 1):5.1f}%)")
tot = sum(filled.values())
print(f"waits over 1 ms: {sum(hist[b] for b in bins[2:])}, filled by (share of their time):")
for c, t in filled.most_common(8):
    print(f"  {c:20} {100 * t / max(tot, 1e-9):5.1f}%  ({t * 1e3:.1f} ms)")
runs = collections.defaultdict(list)
for s, e, c, _ in segs:
    runs[c].append(e - s)
print("run lengths on the CPU (ms): task, segments, p50, p99, max, share of the CPU")
span = (segs[-1][1] - segs[0][0]) if segs else 1
for c, r in sorted(runs.items(), key=lambda kv: -sum(kv[1]))[:8]:
    r.sort()
    print(f"  {c:20} {len(r):6d}  {1e3 * r[len(r) // 2]:6.3f}  {1e3 * r[int(len(r) * .99)]:6.3f}"
          f"  {1e3 * r[-1]:6.3f}  {100 * sum(r) / span:5.1f}%")
