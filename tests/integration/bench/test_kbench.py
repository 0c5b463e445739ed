"""The kernel benchmark suite: each micro-benchmark's output and its stop at a
limit (lowered here), bench's open-loop mode, and bench/run quick --tiny end
to end (every tool's output well formed, the report written), then compare.
The kb-* tools do not use io/: one build is enough (the first one built)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BENCH, BUILD_DIR, BUILDS, copies_for_others, ROOT, figure

PLAIN = [b for b in BUILDS if not b.endswith("-san")] or BUILDS
BDIR = os.path.join(BUILD_DIR, PLAIN[0]) if PLAIN else None
TOOLS = ["socket", "bind", "accept", "fork", "fork-static", "thread", "mmap", "manymap"]

pytestmark = pytest.mark.skipif(not BDIR or not os.access(os.path.join(BDIR, "kb-socket"),
                                                          os.X_OK),
                                reason="no build with the kb-* tools")


def kb(tool, *args, pre=(), timeout=120, path=None):
    return subprocess.run(list(pre) + [path or os.path.join(BDIR, "kb-" + tool)] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def samples(out):
    rows = [l.split("\t") for l in out.splitlines() if l and not l.startswith("#")]
    return [(int(r[0]), [float(x) for x in r[1:]]) for r in rows]


def columns(out):
    m = re.search(r"^# columns: N\t(.*)$", out, re.M)
    return m.group(1).split("\t") if m else None


@pytest.mark.parametrize("tool", TOOLS)
def test_output_is_well_formed(tool, tmp_path):
    args = ["-n", "300", "-i", "50"] + (["-d", str(tmp_path)] if "map" in tool else [])
    r = kb(tool, *args)
    assert r.returncode == 0, (r.returncode, r.stderr)
    cols = columns(r.stdout)
    rows = samples(r.stdout)
    assert cols, r.stdout
    assert [n for n, _ in rows] == [1, 50, 100, 150, 200, 250, 300], rows
    assert all(len(v) == len(cols) and all(x >= 0 for x in v) for _, v in rows), rows
    assert re.search(r"^# done: N=300 in [0-9.]+ s$", r.stdout, re.M), r.stdout
    assert os.listdir(tmp_path) == [], "temporary files left: %s" % os.listdir(tmp_path)


def test_cycles_option():
    r = kb("socket", "-n", "100", "-C")
    if r.returncode == 2 and "no usable cycle counter" in r.stderr:
        pytest.skip("no TSC")
    assert r.returncode == 0 and "unit: cycles" in r.stdout
    assert all(v[0] == int(v[0]) for _, v in samples(r.stdout))


@pytest.mark.parametrize("args", [["-n", "0"], ["-n", "x"], ["-i", "-3"], ["-z"], ["extra"],
                                  ["-n", "100000001"]])
def test_bad_options(args):
    r = kb("socket", *args)
    assert r.returncode == 2 and r.stderr.strip(), (r.returncode, r.stderr)


def test_help():
    for t in TOOLS:
        r = kb(t, "-h")
        assert r.returncode == 0 and "usage: kb-" + t in r.stdout and "kbench(1)" in r.stdout


def assert_limit(r, limit_text, max_n):
    assert r.returncode == 3, (r.returncode, r.stdout[-500:], r.stderr)
    assert limit_text in r.stderr, r.stderr
    m = re.search(r"^# stopped at N=(\d+): .*%s" % re.escape(limit_text), r.stdout, re.M)
    assert m and int(m.group(1)) <= max_n, r.stdout[-500:]
    assert re.search(r"^# done: N=%s " % m.group(1), r.stdout, re.M), r.stdout[-300:]
    ns = [n for n, _ in samples(r.stdout)]
    assert ns and ns[-1] <= int(m.group(1)), "a sample past the limit"


@pytest.mark.parametrize("tool", ["socket", "bind", "accept"])
def test_descriptor_limit(tool):
    r = kb(tool, "-n", "1000", pre=["prlimit", "--nofile=150"])
    assert_limit(r, "RLIMIT_NOFILE (150)", 150)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="RLIMIT_NPROC binds only a user without CAP_SYS_RESOURCE: needs "
                           "root to become nobody")
@pytest.mark.parametrize("tool", ["fork", "fork-static", "thread"])
def test_process_limit(tool):
    # nobody runs a copy: the clone may be where nobody cannot reach (root's home)
    with copies_for_others(os.path.join(BDIR, "kb-" + tool)) as (path,):
        r = kb(tool, "-n", "500", path=path, pre=["setpriv", "--reuid=nobody",
                                                  "--regid=nogroup", "--clear-groups",
                                                  "prlimit", "--nproc=30"])
    assert_limit(r, "RLIMIT_NPROC (30)", 30)
    # every child was reaped: nobody's processes are gone
    left = subprocess.run(["pgrep", "-u", "nobody", "-f", "kb-fork"], capture_output=True)
    assert left.returncode == 1, left.stdout


@pytest.mark.parametrize("tool", ["mmap", "manymap"])
def test_address_space_limit(tool, tmp_path):
    r = kb(tool, "-n", "40000", "-d", str(tmp_path), pre=["prlimit", "--as=80000000"])
    assert_limit(r, "RLIMIT_AS (80000000 bytes", 40000)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
                    reason="a network namespace with a small port range needs root")
def test_port_range_limit():
    sh = ('ip link set lo up && echo "40000 40039" > /proc/sys/net/ipv4/ip_local_port_range '
          '&& exec "$0" -n 200')
    r = subprocess.run(["unshare", "-n", "sh", "-c", sh, os.path.join(BDIR, "kb-bind")],
                       capture_output=True, text=True, timeout=60)
    assert_limit(r, "ip_local_port_range (40000-40039)", 40)


def test_interrupt_cleans_up(tmp_path):
    import signal
    import time
    p = subprocess.Popen([os.path.join(BDIR, "kb-manymap"), "-n", "5000000", "-d",
                          str(tmp_path)], stdout=subprocess.PIPE, text=True)
    # the header is flushed once the handler is set (kb.c): a fixed 0.5 s
    # could end before that on a busy machine, and SIGINT would kill it
    head = []
    for line in p.stdout:
        head.append(line)
        if line.startswith("# RLIMIT_AS"):
            break
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    out = "".join(head) + out
    assert p.returncode == 1 and "# interrupted at N=" in out, (p.returncode, out[-300:])
    assert os.listdir(tmp_path) == [], "left behind: %d entries" % len(os.listdir(tmp_path))


# Run kb-fork under a subreaper: a child kb-fork left behind would be re-parented
# here (and show up, alive or a zombie) instead of vanishing into init.
FORK_WATCH = r"""
import ctypes, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
p = subprocess.Popen([sys.argv[1], "-n", "100000", "-i", "10"], stdout=subprocess.PIPE,
                     text=True)
def kids():
    out = []
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                if d.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == p.pid:
                    out.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return out
lines = []
for line in p.stdout:
    lines.append(line)
    if line[:1].isdigit() and int(line.split()[0]) >= 100:
        break
live = kids()
p.send_signal(signal.SIGINT)
rest = p.stdout.read()
p.wait()
time.sleep(0.2)
left = [d for d in os.listdir("/proc") if d.isdigit() and int(d) in live]
print(p.returncode, len(live), len(left))
print("".join(lines[-2:]) + rest)
"""


def test_fork_interrupt_reaps_children():
    """SIGINT in the middle of kb-fork: every child killed and reaped by kb-fork."""
    r = subprocess.run([sys.executable, "-c", FORK_WATCH, os.path.join(BDIR, "kb-fork")],
                       capture_output=True, text=True, timeout=120)
    head, _, out = r.stdout.partition("\n")
    rc, live, left = (int(x) for x in head.split())
    assert rc == 1 and "# interrupted at N=" in out, r.stdout + r.stderr
    assert live >= 100, "children seen before the signal: %d" % live
    assert left == 0, "%d of %d children left behind" % (left, live)


def listening_port(g):
    """The port of gatling's "listening on" line: lines before it (the warning of a
    root without -u, as the tests run) are passed over; at most 10."""
    for _ in range(10):
        line = g.stderr.readline()
        m = re.search(rb"listening on \S+ port (\d+)", line)
        if m or not line:
            break
    assert m, "gatling printed no listening line: %r" % line
    return int(m.group(1))


@pytest.mark.serial
def test_bench_open_loop_rate(tmp_path):
    """bench -R holds the offered rate and times from the due time.

    A rate in wall-clock time: serial (in make check's busy first phase the
    responses of 2 s at 500/s came in at 385/s).  50 connections, 100 ms of
    slack each for a response, so that a late wakeup is caught up."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "f.txt").write_text("x" * 100)
    os.chmod(root / "f.txt", 0o644)
    g = subprocess.Popen([os.path.join(BDIR, "gatling"), "-i", "127.0.0.1", "-p", "0", "-n"],
                         cwd=str(root), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        port = listening_port(g)
        r = subprocess.run([os.path.join(BDIR, "bench"), "-q", "-J", "-k", "-c", "50", "-R",
                            "500", "-d", "2", "http://127.0.0.1:%d/f.txt" % port],
                           capture_output=True, text=True, timeout=30)
        d = json.loads(r.stdout)
        assert r.returncode == 0 and d["errors_total"] == 0, r.stdout
        assert d["open_loop_rate"] == 500
        figure("open loop at 500/s", d["requests_per_s"], "req/s", lo=450, hi=550,  # not the max
               kind=BENCH)
        assert "stdev" in d["latency_us"]
        bad = subprocess.run([os.path.join(BDIR, "bench"), "-R", "100", "-k", "-p", "4",
                              "http://127.0.0.1:%d/" % port], capture_output=True, text=True)
        assert bad.returncode == 2 and "-R" in bad.stderr
    finally:
        g.terminate()
        g.wait(5)


def start_gatling(root):
    root.mkdir()
    (root / "1k.bin").write_text("x" * 1024)
    os.chmod(root / "1k.bin", 0o644)
    g = subprocess.Popen([os.path.join(BDIR, "gatling"), "-i", "127.0.0.1", "-p", "0", "-n"],
                         cwd=str(root), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    port = listening_port(g)
    return g, "http://127.0.0.1:%d/1k.bin" % port


@pytest.mark.parametrize("only_url", [False, True])
def test_suite_url_is_a_second_series(tmp_path, only_url):
    """--url NAME=URL: short-lived and open-loop load that server too (a second series
    in the same plots); --no-gatling: only it.  Two client processes at every level."""
    g, url = start_gatling(tmp_path / "www")
    out = str(tmp_path / "run")
    try:
        r = subprocess.run([os.path.join(ROOT, "bench", "run"), "quick", "--tiny", "-q",
                            "--runs", "1", "--backend", os.path.basename(BDIR), "--only",
                            "short-lived,open-loop", "--url", "other2=" + url, "-o", out]
                           + (["--no-gatling"] if only_url else []),
                           capture_output=True, text=True, timeout=300)
    finally:
        g.terminate()
        g.wait(5)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "samples.tsv")) as f:
        benches = {l.split("\t")[0] for l in list(f)[1:]}
    want = {"short-lived@other2", "open-loop@other2"}
    assert benches == (want if only_url else want | {"short-lived", "open-loop"}), benches
    cmds = open(os.path.join(out, "commands.txt")).read()
    assert re.search(r"^short-lived@other2 c=200\t.* -P 2 .*-b 127\.0\.0\.2-127\.0\.0\.9 " +
                     re.escape(url), cmds, re.M), cmds
    # one plot per value, both servers in it
    dat = open(os.path.join(out, "plots", "short-lived.req_per_s.dat")).read()
    assert dat.count("\n\n\n") == (1 if only_url else 2), dat
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert "open-loop@other2 R=1000 achieved_per_s" in summary, sorted(summary)


def test_suite_quick_tiny_and_compare(tmp_path):
    """make check's run of the suite: every tool's output well formed (the driver
    checks and exits 1 on a problem), report and plots written; then compare
    the run with itself: every verdict 'same'."""
    out = str(tmp_path / "run")
    backend = os.path.basename(BDIR)
    r = subprocess.run([os.path.join(ROOT, "bench", "run"), "quick", "--tiny", "-q", "--runs",
                        "3", "--backend", backend, "-o", out], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ("samples.tsv", "summary.json", "meta.json", "commands.txt", "report.html"):
        assert os.path.getsize(os.path.join(out, f)) > 0, f
    with open(os.path.join(out, "samples.tsv")) as f:
        benches = {l.split("\t")[0] for l in list(f)[1:]}
    want = {"socket", "socket6", "bind", "accept", "fork", "fork-static", "thread", "mmap",
            "manymap", "http-idle", "short-lived", "open-loop"}
    assert want <= benches, want - benches
    meta = json.load(open(os.path.join(out, "meta.json")))
    for k in ("kernel", "cpu", "cores", "rlimits", "sysctls", "backend", "build", "date"):
        assert k in meta, k
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert summary["socket socket"]["fit"]["class"] in ("O(1)", "O(n)")
    assert len(summary["fork fork+run"]["per_run_median"]) == 3
    html = open(os.path.join(out, "report.html")).read()
    assert "<table class=lead>" in html and "RLIMIT_NOFILE" in html
    assert "http" not in re.sub(r"https?://www\.w3\.org[^\"']*", "", html).replace(
        "http-idle", ""), "the report must not load anything from outside"
    # plots are part of the report: no gnuplot is a failure here, not a skip
    # (tests/setup.sh installs gnuplot-nox)
    assert shutil.which("gnuplot"), "gnuplot is not installed: the report has no plots"
    assert "Warning" not in html and "WARNING" not in r.stderr, r.stderr
    for f in ("socket.socket.png", "socket.socket-log.png", "socket.socket.svg",
              "socket.socket-log.svg"):
        assert os.path.exists(os.path.join(out, "plots", f)), f
    # linear and log scale, both inline
    assert html.count("<svg") >= 40 and html.count("log scale (xy)") >= 15, html.count("<svg")
    c = subprocess.run([os.path.join(ROOT, "bench", "run"), "compare", out, out, "-o",
                        str(tmp_path / "cmp")], capture_output=True, text=True, timeout=300)
    assert c.returncode == 0, c.stderr
    rows = [l for l in c.stdout.splitlines()[1:] if l.strip()]
    assert " same " in c.stdout and not re.search(r"\b(better|worse)\b", c.stdout), c.stdout
    chtml = open(str(tmp_path / "cmp" / "report.html")).read()
    assert chtml.count("<svg") >= 40 and "log scale (xy)" in chtml, chtml.count("<svg")
    # levels are compared like with like: one row per connection count and offered rate
    assert any(re.match(r"short-lived +200 ", l) for l in rows), c.stdout
    assert any(re.match(r"open-loop +1,000 ", l) for l in rows), c.stdout
    # without gnuplot: the numbers, and a warning on stderr and in the report
    bare = tmp_path / "nopath"
    bare.mkdir()
    shutil.copytree(out, str(tmp_path / "again"))
    n = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run"), "report",
                        str(tmp_path / "again")], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PATH=str(bare)))
    assert n.returncode == 0, n.stderr
    assert "WARNING: gnuplot is not installed" in n.stderr, n.stderr
    again = open(str(tmp_path / "again" / "report.html")).read()
    assert "<p class=warn>" in again and "gnuplot is not installed" in again


@pytest.mark.parametrize("workers", [1, 2])
def test_benchlib_start_gatling(tmp_path, workers):
    """benchlib.start_gatling (every driver's way to start gatling) finds the port in
    either start-up line (one process, or -W workers), and stop_session leaves no
    worker behind."""
    import socket
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from benchkit import benchlib as bl
    p, port, backend = bl.start_gatling(
        [os.path.join(BDIR, "gatling"), "-i", "127.0.0.1", "-p", "0", "-n", "-W", str(workers)],
        str(tmp_path / "gatling.err"), cwd=str(tmp_path))
    try:
        assert backend == os.path.basename(BDIR).replace("-san", "")
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert len(bl.session_pids(p.pid)) == (workers + 1 if workers > 1 else 1)
    finally:
        bl.stop_session(p)
    assert bl.session_pids(p.pid) == [] and p not in bl.CHILDREN
