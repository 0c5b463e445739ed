"""What the privilege tests share: root only, a directory every user may
search, a process's children and its shared mappings."""

import os
import stat

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="the privilege tests run as root with -u nobody")


def open_dir(tmp_path, name):
    """A directory below tmp_path that nobody can reach: pytest's own are 0700
    (its ancestors too), so make them searchable by all."""
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    p = d
    while str(p) not in ("/", "/tmp"):
        os.chmod(p, os.stat(p).st_mode | stat.S_IXOTH | stat.S_IROTH)
        p = p.parent
    return str(d)


def proc_status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == key:
                return v.split()
    return None


def children(pid):
    """(pid, real uid) of pid's children."""
    out = []
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                for c in f.read().split():
                    try:
                        out.append((int(c), int(proc_status(int(c), "Uid")[0])))
                    except (OSError, TypeError):
                        pass
        except OSError:
            pass
    return out


def shared_mappings(pid):
    """[(start, end)] of pid's writable MAP_SHARED anonymous mappings."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[1] == "rw-s" and parts[5].startswith("/dev/zero"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi))
    return out
