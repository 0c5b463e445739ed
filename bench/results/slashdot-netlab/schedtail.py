#!/usr/bin/env python3
"""schedtail.py PERF.DATA CPU BENCH-PID: from `perf sched timehist --state`, how long bench
was runnable but not running on CPU, and who held the CPU meanwhile.

Runnable and waiting: after bench was preempted (state R), its whole time off the CPU; after it
slept, the time from its wakeup.  Prints the distribution of these waits, the share of the
waits over 1 ms that each other task filled, and the run lengths of every task on that CPU
(how long one keeps the CPU once it has it)."""
import collections
import subprocess
import sys

data, cpu, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = subprocess.run(["perf", "sched", "timehist", "--state", "-i", data, "-C", str(cpu)],
                     capture_output=True, text=True).stdout
segs = []  # (start, end, comm, runnable wait before start)
prev_state = None  # how our bench left the CPU last time: R = preempted, S/D = it slept
for line in out.splitlines():
    w = line.split()
    if len(w) < 7 or not w[0][0].isdigit() or not w[1].startswith("["):
        continue
    try:
        end, run = float(w[0]), float(w[-2]) / 1e3
        wait, delay = float(w[-4]) / 1e3, float(w[-3]) / 1e3
    except ValueError:
        continue
    task = " ".join(w[2:-4])
    ours = task.endswith(f"[{pid}]")
    comm = "bench (ours)" if ours else task.rsplit("[", 1)[0]
    if ours:
        # preempted: it was runnable for the whole time off the CPU; woken: from the wakeup
        delay = wait if prev_state == "R" else delay
        prev_state = w[-1]
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
print(f"bench {pid} on CPU {cpu}: {n} times switched in; runnable but waiting before:")
for b in bins:
    lab = f"<= {b * 1e3:g} ms" if b != float("inf") else "> 8 ms"
    print(f"  {lab:>10}: {hist[b]:6d}  ({100 * hist[b] / max(n, 1):5.1f}%)")
waits = [d for _, _, c, d in segs if c == "bench (ours)"]
print(f"  longest: {1e3 * max(waits or [0]):.2f} ms")
tot = sum(filled.values())
print(f"waits over 1 ms: {sum(hist[b] for b in bins[2:])}, filled by (share of their time):")
for c, t in filled.most_common(8):
    print(f"  {c:20} {100 * t / max(tot, 1e-9):5.1f}%  ({t * 1e3:.1f} ms)")
runs = collections.defaultdict(list)
for s, e, c, _ in segs:
    runs[c].append(e - s)
print("run lengths on the CPU (ms): task, segments, p50, p99, max, share of the CPU")
span = (segs[-1][1] - segs[0][0]) if segs else 1
for c, r in sorted(runs.items(), key=lambda kv: -sum(kv[1]))[:6]:
    r.sort()
    print(f"  {c:20} {len(r):6d}  {1e3 * r[len(r) // 2]:6.3f}  {1e3 * r[int(len(r) * .99)]:6.3f}"
          f"  {1e3 * r[-1]:6.3f}  {100 * sum(r) / span:5.1f}%")
