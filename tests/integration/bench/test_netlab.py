"""bench/netlab and bench/multihost: the lab of network namespaces, its cleanup after a
crash, and the merge of several hosts' bench reports.

The merge tests run anywhere; the lab tests need root and network namespaces (skipped
otherwise).  The lab is not tied to an IO backend: one build is enough (the first plain one).
Every lab made here is owned by this process or a child, named netlab-LAB-PID-*, and removed
by the test (or, if the test dies, by the next `netlab gc`).  A `netlab gc` (or an `up`, which
collects dead labs first) in another pytest would remove the dead lab a crash test here is
still looking at: run-check runs the lab tests of this module and test_throughput.py in one
pytest, its `once` job (run-check's LAB), one test at a time, and nothing else in phase 1
builds a lab (test_lb.py and test_slashdot.py, which time what they measure, are serial).
Nothing here judges a speed (counts, merges, what is left behind), so the lab tests are not
serial: they were ~40 s of the serial phase for a reason the one job gives.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD_DIR, BUILDS, copies_for_others, ROOT

PLAIN = [b for b in BUILDS if not b.endswith("-san")] or BUILDS
BDIR = os.path.join(BUILD_DIR, PLAIN[0]) if PLAIN else None
NETLAB = os.path.join(ROOT, "bench", "netlab")
MULTIHOST = os.path.join(ROOT, "bench", "multihost")
sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchkit import benchlib as bl  # noqa: E402

needs_build = pytest.mark.skipif(not BDIR or not os.access(os.path.join(BDIR, "bench"), os.X_OK),
                                 reason="no build with bench and gatling")


def _can_netns():
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["ip", "netns", "list"], capture_output=True)
    return r.returncode == 0


def run_driver(argv, timeout=300):
    """Run a bench driver to its end (killed past timeout): the finished Popen
    (its pid names the labs it owned), its stdout and its stderr."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p, out, err


def needs_root(f):
    return pytest.mark.skipif(not _can_netns(), reason="needs root and ip netns")(f)


def netlab(*args, check=True, timeout=60, **kw):
    r = subprocess.run([NETLAB] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, **kw)
    if check:
        assert r.returncode == 0, (args, r.returncode, r.stderr)
    return r


def netns_of(pid):
    """The network namespaces whose names carry pid as a lab owner."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines()
            if l.strip() and "-%d" % pid in l.split()[0] and l.startswith("netlab-")]


def root_links():
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return sorted(l.split(":")[1].strip() for l in out.splitlines())


# -- merging reports (no root) ----------------------------------------------------------

@pytest.fixture(scope="module")
def loopback_gatling(tmp_path_factory):
    if not BDIR:
        pytest.skip("no build")
    root = tmp_path_factory.mktemp("www")
    (root / "1k.html").write_bytes(b"x" * 1024)
    err = root / "gatling.err"
    p, port, _ = bl.start_gatling([os.path.join(BDIR, "gatling"), "-i", "127.0.0.1", "-p", "0",
                                   "-n", "-H"], str(err), cwd=str(root))
    yield "http://127.0.0.1:%d/1k.html" % port
    bl.stop_session(p)


def bench_json(*args):
    r = subprocess.run([os.path.join(BDIR, "bench"), "-q", "-J"] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@needs_build
def test_hist_is_in_the_json_and_adds_up(loopback_gatling):
    rep = bench_json("-c", 8, "-n", 3000, "-P", 2, loopback_gatling)
    for key in ("latency_us", "connect_us"):
        h = rep[key]["hist"]
        assert h["count"] == rep[key]["count"] == sum(n for _, n in h["buckets"])
        assert h["min"] == rep[key]["min"] and h["max"] == rep[key]["max"]
        highs = [hi for hi, _ in h["buckets"]]
        assert highs == sorted(set(highs)), "buckets ascending, each once"
        assert highs[0] >= h["min"] and h["buckets"][-1][0] >= h["max"]


@needs_build
@pytest.mark.parametrize("args", [("-c", 4, "-n", 2000), ("-c", 16, "-k", "-n", 20000, "-P", 2)])
def test_merging_one_host_gives_its_own_percentiles(loopback_gatling, args):
    rep = bench_json(*args, loopback_gatling)
    m = bl.merge_bench_reports([rep])
    for key in ("latency_us", "connect_us"):
        for f in ("p50", "p90", "p99", "p99_9", "min", "max", "count", "mean"):
            assert m[key][f] == rep[key][f], (key, f, m[key][f], rep[key][f])
        assert abs(m[key]["stdev"] - rep[key]["stdev"]) <= 0.1, (key, m[key], rep[key])
    for f in ("requests", "responses", "lost", "connects", "errors_total"):
        assert m[f] == rep[f]
    assert m["errors"] == rep["errors"]


@needs_build
def test_merging_adds_counts_and_reads_percentiles_off_the_sum(loopback_gatling):
    a = bench_json("-c", 4, "-n", 1500, loopback_gatling)
    b = bench_json("-c", 30, "-n", 3000, loopback_gatling)
    m = bl.merge_bench_reports([a, b])
    assert m["requests"] == a["requests"] + b["requests"]
    assert m["connections"] == 34 and m["merged"] == 2
    assert m["latency_us"]["count"] == a["latency_us"]["count"] + b["latency_us"]["count"]
    assert m["latency_us"]["max"] == max(a["latency_us"]["max"], b["latency_us"]["max"])
    lo, hi = sorted((a["latency_us"]["p50"], b["latency_us"]["p50"]))
    assert lo <= m["latency_us"]["p50"] <= hi
    # a report merged with itself: the same distribution, so the same percentiles
    twice = bl.merge_bench_reports([a, a])
    assert all(twice["latency_us"][q] == a["latency_us"][q] for q, _ in bl.QUANTILES)


def test_quantile_rule_on_a_known_histogram():
    h = {"count": 10, "sum": 0, "min": 3, "max": 900,
         "buckets": [[3, 5], [10, 4], [1023, 1]]}
    assert [bl.hist_quantile(h, q) for q in (0.5, 0.9, 0.99, 1.0)] == [3, 10, 900, 900]
    assert bl.hist_quantile({"count": 0, "sum": 0, "min": 0, "max": 0, "buckets": []}, 0.5) == 0


def test_hosts_file_and_the_ssh_prefix(tmp_path):
    from benchkit import netlab as netlab_mod
    f = tmp_path / "hosts"
    f.write_text("# comment\n\nsrv 10.9.0.1 ip netns exec netlab-x-1-srv\n"
                 "c1 10.9.0.2,10.9.0.3 ssh -o BatchMode=yes 'bench@c1.example'\n"
                 "me 127.0.0.1\n")
    srv, c1, me = netlab_mod.read_hosts(str(f))
    assert srv.argv(["bench", "-c", 5]) == ["ip", "netns", "exec", "netlab-x-1-srv",
                                            "bench", "-c", "5"]
    assert c1.addrs == ["10.9.0.2", "10.9.0.3"]
    # ssh hands the remote shell one line: the command arrives as one quoted word
    assert c1.argv(["sh", "-c", "echo $HOME; ls 'a b'"]) == [
        "ssh", "-o", "BatchMode=yes", "bench@c1.example",
        "sh -c 'echo $HOME; ls '\"'\"'a b'\"'\"''"]
    assert me.argv(["true"]) == ["true"]


# -- the lab (root) ---------------------------------------------------------------------------

@needs_root
def test_not_root_is_refused():
    # nobody runs copies: the clone may be where nobody cannot reach (root's home)
    with copies_for_others(NETLAB, os.path.join(ROOT, "bench", "benchkit")) as (netlab, _):
        r = subprocess.run([netlab, "status"], capture_output=True, text=True, timeout=30, cwd="/",
                           preexec_fn=lambda: (os.setgroups([]), os.setgid(65534),
                                               os.setuid(65534)))
    assert r.returncode == 1 and "must run as root" in r.stderr, r.stderr


@needs_root
def test_caps_say_what_the_kernel_has():
    r = netlab("caps")
    assert "tbf" in r.stdout and "htb" in r.stdout and "netem" in r.stdout
    line = next(l for l in r.stdout.splitlines() if "netem" in l)
    if line.startswith("NO"):
        # then asking for delay must fail, saying so, and leave nothing behind
        before = root_links()
        u = netlab("up", "-n", 2, "--lab", "nodelay", "--owner", os.getpid(), "--delay", 5,
                   check=False)
        assert u.returncode == 1 and "netem" in u.stderr and "delay" in u.stderr, u.stderr
        assert netns_of(os.getpid()) == [] and root_links() == before
    else:
        assert line.startswith("yes")


@needs_root
@needs_build
@pytest.mark.parametrize("shape", ["tbf", "htb"])
def test_up_exec_status_down(tmp_path, shape):
    before = root_links()
    me = os.getpid()
    netlab("up", "--hosts", "srv,cli", "--lab", "t", "--owner", me, "--addrs", 3,
           "--rate", "cli=200mbit", "--shape", shape)
    try:
        st = json.loads(netlab("status", "--json").stdout)
        lab = next(e for e in st if e["lab"] == "t" and e["owner"] == me)
        assert lab["owner_alive"] and lab["status"] == "up" and lab["shape"] == shape
        srv, cli = lab["hosts"]
        assert len(cli["addrs"]) == 3 and cli["rate"] == "200mbit"
        assert srv["addrs"][0].startswith("198.1") and lab["subnet"].endswith("/24")
        for h in lab["hosts"]:
            assert h["sysctls"]["net.ipv4.ip_local_port_range"] == "1024 65535"
            assert h["sysctls"]["net.core.somaxconn"] == "65535"
            assert h["sysctls"]["net.ipv4.tcp_tw_reuse"] == "1"
        # the root namespace is untouched: no new link, no lab address
        assert root_links() == before
        ra = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        assert srv["addrs"][0] + "/" not in ra
        # gatling on srv, bench on cli from all three of its addresses
        (tmp_path / "1k.html").write_bytes(b"y" * 1024)
        hosts = tmp_path / "hosts"
        hosts.write_text(netlab("hosts", "--lab", "t-%d" % me).stdout)
        p, port, _ = bl.start_gatling(
            [NETLAB, "exec", "--hosts-file", str(hosts), "srv", os.path.join(BDIR, "gatling"),
             "-i", srv["addrs"][0], "-p", "0", "-n", "-H"], str(tmp_path / "g.err"),
            cwd=str(tmp_path))
        try:
            r = netlab("exec", "--lab", "t-%d" % me, "cli", os.path.join(BDIR, "bench"), "-q",
                       "-J", "-c", 30, "-n", 600, "-b", ",".join(cli["addrs"]),
                       "http://%s:%d/1k.html" % (srv["addrs"][0], port))
            rep = json.loads(r.stdout)
            assert rep["responses"] == 600 and rep["errors_total"] == 0
            # the shaping: 200 Mbit/s is 25 MB/s; unshaped, veth moves a few GB/s
            (tmp_path / "big.bin").write_bytes(b"z" * (1 << 20))
            r = netlab("exec", "--lab", "t", "cli", os.path.join(BDIR, "bench"), "-q", "-J",
                       "-k", "-c", 4, "-d", 2, "http://%s:%d/big.bin" % (srv["addrs"][0], port))
            big = json.loads(r.stdout)
            assert big["errors_total"] == 0 and 5e6 < big["bytes_per_s"] < 25e6 * 1.1, big
            ss = netlab("exec", "--lab", "t", "srv", "ss", "-Htn", "state", "time-wait").stdout
            peers = {l.split()[-1].rsplit(":", 1)[0] for l in ss.splitlines() if l.strip()}
            assert peers <= set(cli["addrs"]) and len(peers) >= 2, ss
        finally:
            bl.stop_session(p)
    finally:
        netlab("down", "--lab", "t-%d" % me)
    assert netns_of(me) == [] and root_links() == before
    assert not os.path.exists("/run/netlab/t-%d.json" % me)


CRASHER = r"""
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from benchkit import netlab
lab = netlab.Lab(["a", "b", "c"], lab="crash", rates={"b": "100mbit"})
# a process in a host that outlives us: not our session, no death signal
p = subprocess.Popen(lab.host("b").argv(["sleep", "300"]), start_new_session=True)
print(p.pid, flush=True)
time.sleep(300)
"""


@needs_root
def test_kill9_of_the_owner_leaves_nothing_after_gc():
    before = root_links()
    c = subprocess.Popen([sys.executable, "-c", CRASHER, os.path.join(ROOT, "bench")],
                         stdout=subprocess.PIPE, text=True)
    try:
        sleeper = int(c.stdout.readline())
        assert len(netns_of(c.pid)) == 4, "switch and three hosts"
        assert os.path.exists("/run/netlab/crash-%d.json" % c.pid)
    finally:
        c.kill()
        c.wait()
    assert len(netns_of(c.pid)) == 4, "a SIGKILLed owner cleans nothing itself"
    st = json.loads(netlab("status", "--json").stdout)
    assert any(e["owner"] == c.pid and not e["owner_alive"] for e in st)
    r = netlab("gc")
    assert "removed" in r.stderr
    assert netns_of(c.pid) == []
    assert root_links() == before
    assert not os.path.exists("/run/netlab/crash-%d.json" % c.pid)
    assert not os.path.exists("/run/netlab/crash-%d.hosts" % c.pid)
    for _ in range(50):  # the process left inside the lab was ended with it
        if not os.path.exists("/proc/%d" % sleeper):
            break
        time.sleep(0.05)
    assert not os.path.exists("/proc/%d" % sleeper)


@needs_root
def test_up_after_a_crash_collects_the_dead_lab_first():
    c = subprocess.Popen([sys.executable, "-c", CRASHER, os.path.join(ROOT, "bench")],
                         stdout=subprocess.PIPE, text=True)
    c.stdout.readline()
    c.send_signal(signal.SIGKILL)
    c.wait()
    me = os.getpid()
    r = netlab("up", "-n", 1, "--lab", "after", "--owner", me)
    try:
        assert "removing lab crash of dead owner %d" % c.pid in r.stderr
        assert netns_of(c.pid) == []
    finally:
        netlab("down", "--lab", "after-%d" % me)
    assert netns_of(me) == []


@needs_root
@needs_build
def test_multihost_merges_hosts(tmp_path):
    out = tmp_path / "mh"
    p, _, err = run_driver([MULTIHOST, "--netlab", "3", "--addrs", "2", "-c", "60,300", "-n", "3000",
                            "-W", "1", "--gatling", os.path.join(BDIR, "gatling"),
                            "--bench", os.path.join(BDIR, "bench"), "-o", str(out)])
    assert p.returncode == 0, err
    res = json.loads((out / "multihost.json").read_text())
    assert [lv["connections"] for lv in res["levels"]] == [60, 300]
    for lv in res["levels"]:
        hosts, m = lv["hosts"], lv["merged"]
        assert [h["host"] for h in hosts] == ["c1", "c2", "c3"]
        assert m["requests"] == sum(h["requests"] for h in hosts) == 3000
        assert m["connections"] == lv["connections"] and m["errors_total"] == 0
        assert m["latency_us"]["count"] == 3000
        raw = [json.loads((out / "raw" / ("c%d.%s.json" % (lv["connections"], h))).read_text())
               for h in ("c1", "c2", "c3")]
        assert bl.merge_bench_reports(raw)["latency_us"]["p99"] == m["latency_us"]["p99"]
    md = (out / "multihost.md").read_text()
    assert "| **merged** | 300 |" in md and "| c2 | 100 |" in md
    assert "c=300 c3:" in (out / "commands.txt").read_text()
    if shutil.which("gnuplot"):
        assert (out / "multihost.png").stat().st_size > 1000
    assert netns_of(p.pid) == [], "the lab it built is gone"


@needs_root
@needs_build
@pytest.mark.skipif(not os.access("/usr/sbin/nginx", os.X_OK), reason="no nginx")
def test_multihost_drives_nginx_too(tmp_path):
    out = tmp_path / "mh"
    r = subprocess.run([MULTIHOST, "--netlab", "2", "--httpd", "nginx", "-c", "40", "-n", "800",
                        "--bench", os.path.join(BDIR, "bench"), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lv = json.loads((out / "multihost.json").read_text())["levels"][0]
    assert lv["merged"]["responses"] == 800 and lv["merged"]["errors_total"] == 0
    assert "# multihost: nginx -W 2" in (out / "multihost.md").read_text()


@needs_root
@needs_build
def test_backend_latency_in_the_lab(tmp_path):
    """The idle-latency driver with its server, holder and measurer on three lab hosts."""
    out = tmp_path / "bl"
    p, _, err = run_driver([os.path.join(ROOT, "bench", "backend-latency"), "--netlab",
                            "--no-build", "--client", PLAIN[0], "--backends", PLAIN[0],
                            "--counts", "0,300", "--samples", "6", "--chunk", "3", "-o", str(out)])
    assert p.returncode == 0, err
    run = json.loads((out / "run.json").read_text())
    lab = run["netlab"]
    assert [h["name"] for h in lab["hosts"]] == ["srv", "hold", "meas"]
    rows = [l.split("\t") for l in (out / "results.tsv").read_text().splitlines()
            if l and not l.startswith(("#", "backend"))]
    assert [int(r[1]) for r in rows] == [0, 300], rows
    assert netns_of(p.pid) == []


FAKE_SSH = """#!/bin/sh
# a stand-in for ssh: drops the options and the host, runs the one remote line as ssh would
while [ $# -gt 1 ]; do shift; done
exec sh -c "$1"
"""


@needs_build
def test_multihost_through_an_ssh_prefix(tmp_path):
    """A hosts file whose prefixes are ssh (here a stand-in that runs the remote line
    locally): every command must survive being one shell-quoted word."""
    ssh = tmp_path / "bin" / "ssh"
    ssh.parent.mkdir()
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    (tmp_path / "hosts").write_text(
        "srv 127.0.0.1 %s -o BatchMode=yes srv.example\n"
        "c1 127.0.0.2,127.0.0.3 %s c1.example\n"
        "c2 127.0.0.4 %s -p 22 c2.example\n" % (ssh, ssh, ssh))
    out = tmp_path / "out dir"  # a space in every path the remote lines carry
    r = subprocess.run([MULTIHOST, "--hosts-file", str(tmp_path / "hosts"), "--no-pin",
                        "-W", "1", "-c", "20", "-n", "400",
                        "--gatling", os.path.join(BDIR, "gatling"),
                        "--bench", os.path.join(BDIR, "bench"), "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lv = json.loads((out / "multihost.json").read_text())["levels"][0]
    assert [h["host"] for h in lv["hosts"]] == ["c1", "c2"]
    assert lv["merged"]["responses"] == 400 and lv["merged"]["errors_total"] == 0
    cmds = (out / "commands.txt").read_text()
    assert "c1.example '" in cmds and "-b 127.0.0.2,127.0.0.3" in cmds


@needs_root
@needs_build
def test_bench_run_across_the_lab(tmp_path):
    """bench/run --netlab: short-lived and open-loop from two lab hosts, merged figures in
    samples.tsv, each host's in hosts.tsv and meta.json, a row per host in the report."""
    out = tmp_path / "run"
    p, so, err = run_driver([os.path.join(ROOT, "bench", "run"), "quick", "--tiny", "--runs", "1",
                             "--only", "short-lived,open-loop", "--netlab", "2", "-q",
                             "--backend", PLAIN[0], "--client", PLAIN[0], "-o", str(out)])
    assert p.returncode == 0, err
    meta = json.loads((out / "meta.json").read_text())
    assert [(h["name"], h["role"]) for h in meta["hosts"]] == [
        ("srv", "server"), ("c1", "client"), ("c2", "client")]
    rows = [l.split("\t") for l in (out / "hosts.tsv").read_text().splitlines()[1:]]
    per_host = {}
    for bench, run, n, host, metric, v in rows:
        if bench == "short-lived" and metric == "req_per_s":
            per_host[host] = float(v)
    assert set(per_host) == {"c1", "c2"}
    merged = [float(l.split("\t")[4]) for l in (out / "samples.tsv").read_text().splitlines()
              if l.startswith("short-lived\t") and "\treq_per_s\t" in l]
    assert merged and abs(merged[0] - sum(per_host.values())) < 1.0, (merged, per_host)
    assert "host c1" in so and "load from 2 hosts" in so
    assert "netlab-run-" in (out / "commands.txt").read_text()
    assert netns_of(p.pid) == []
