"""Issue 52, finding 3: the -W supervisor (root) trusts nothing in the shared
memory the workers (-u nobody) write.  As an attacker holding a worker would,
the test overwrites every shared mapping of a worker with 0x41 bytes through
/proc/PID/mem, then kills the worker: the supervisor must survive, restart it,
go on serving and exit cleanly.  Before the fix it indexed the counters' table
by the `workers` word in that memory (and unmapped its `size` word) and died."""

import os
import signal
from conftest import fetch, make_docroot, assert_status, wait_for
from privtools import children, needs_root, open_dir, shared_mappings


def smash(pid):
    """Fill every MAP_SHARED anonymous mapping of pid with 0x41; how many."""
    maps = shared_mappings(pid)
    with open("/proc/%d/mem" % pid, "r+b", buffering=0) as mem:
        for lo, hi in maps:
            mem.seek(lo)
            mem.write(b"\x41" * (hi - lo))
    return len(maps)


@needs_root
def test_supervisor_survives_smashed_counters(gatling, tmp_path):
    root = open_dir(tmp_path, "www")
    make_docroot(root, {"f.txt": b"hello\n"})
    s = gatling(docroot=root, args=("-T", "10", "-S", "-W", "2", "-u", "nobody"))
    workers = wait_for(lambda: [p for p in children(s.pid) if p[1] != 0] or None, 10,
                       "the workers start")
    pid = workers[0][0]
    assert smash(pid) >= 1, "no shared mapping in worker %d" % pid
    os.kill(pid, signal.SIGKILL)
    # the supervisor reaps it, retires its counters and starts another
    def restarted():
        assert s.alive(), "the supervisor died (status %s): %s" % (s.process.returncode,
                                                                   s.stderr_text())
        return len([p for p in children(s.pid) if p[1] != 0 and p[0] != pid]) == 2
    wait_for(restarted, 10, "a new worker")
    for _ in range(4):
        assert_status(fetch(s.port, "/f.txt"), 200, "served after the smash")
    assert_status(fetch(s.port, "/metrics"), 200, "/metrics sums the smashed table")
    s.check_alive()
