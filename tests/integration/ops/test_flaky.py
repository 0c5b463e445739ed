"""run-check's second look and flake ledger (issue 91), on planted tests in a
tree of their own (a copy of tests/run-check, a tests/flaky.tsv and one
planted module; build/check/ under tmp_path):
  - a test that fails only under load (while the check has another process
    busy on a CPU) is not waved through: its second look runs beside busy
    loops, as its pass ran beside other jobs, and it fails again;
  - a test that fails once and then passes (FLAKY) fails the check unless
    tests/flaky.tsv holds it, and fails it when it was FLAKY in the last run
    too (build/check/flaky-history), ledger or not;
  - a ledger line that is not four fields is an error; the check says how
    many tests the ledger holds.
Each run-check runs two jobs at once (-j 2): the planted pytest, and a shell
job (--job) that keeps a CPU busy until the planted test has looked.
Seconds each, no server."""
import os
import shutil
import subprocess
import sys
import textwrap

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

PLANTED = textwrap.dedent('''
    import os
    import time

    PLANT = os.environ["PLANT"]


    def cpu(pid):
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[1]), int(v[11]) + int(v[12])  # ppid, utime + stime (ticks)


    def busy_beside_me():
        """The processes the check runs beside this pytest (the descendants of
        its parent, run-check, but this one) that used a CPU in a second."""
        def table():
            out = {}
            for d in os.listdir("/proc"):
                if d.isdigit():
                    try:
                        out[int(d)] = cpu(int(d))
                    except (OSError, IndexError, ValueError):
                        pass
            return out
        t0 = table()
        time.sleep(1)
        t1 = table()
        kids, todo = set(), [os.getppid()]
        while todo:
            p = todo.pop()
            for q, (pp, _) in t1.items():
                if pp == p and q not in kids and q != os.getpid():
                    kids.add(q)
                    todo.append(q)
        # 2 ticks (0.02 s): a loaded machine gives a busy loop little, a sleeper none
        return [q for q in kids if q in t0 and t1[q][1] - t0[q][1] >= 2]


    def test_fails_only_under_load():
        # a load-only bug's stand-in: fails while the check keeps a CPU busy beside it
        try:
            assert not busy_beside_me(), "a busy CPU beside me"
        finally:
            open(os.path.join(PLANT, "looked"), "a").close()  # the burn job ends


    def test_fails_once():
        # a flake's stand-in: fails the first time, passes after
        mark = os.path.join(PLANT, "failed-once")
        if not os.path.exists(mark):
            open(mark, "w").close()
            open(os.path.join(PLANT, "looked"), "a").close()
            assert False, "the first time"
''')

ID = "tests/integration/plant/test_planted.py::"
BURN = ("burn=%s -c \"import os, time\nt = time.time() + 60\n"
        "while time.time() < t and not os.path.exists('$PLANT/looked'): pass\"")


def tree(tmp_path, ledger=""):
    """A tree of its own: tests/run-check, tests/flaky.tsv (ledger), the planted module."""
    t = tmp_path / "tree"
    (t / "tests" / "integration" / "plant").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "tests", "run-check"), str(t / "tests" / "run-check"))
    (t / "tests" / "integration" / "plant" / "test_planted.py").write_text(PLANTED)
    (t / "tests" / "flaky.tsv").write_text("# test\tcause\tdate\tmend\n" + ledger)
    return t


def run_check(t, plant, test, *more, strict=False):
    """run-check on the planted tree, pytest narrowed to one planted test by
    the module's own -k (PLANT_K, read below), with the burn job beside it."""
    shutil.rmtree(str(plant), ignore_errors=True)
    plant.mkdir()
    env = dict(os.environ, PLANT=str(plant))
    env.pop("PYTEST_ARGS", None)
    env.pop("CHECK_FLAKES", None)
    if strict:
        env["CHECK_FLAKES"] = "strict"
    # one test of the module: the other is deselected by a conftest of the planted folder
    (t / "tests" / "integration" / "plant" / "conftest.py").write_text(
        "def pytest_collection_modifyitems(config, items):\n"
        "    items[:] = [i for i in items if i.name == %r]\n" % test)
    return subprocess.run([sys.executable, str(t / "tests" / "run-check"), "-j", "2",
                           "--no-once", "--no-serial", "--job", BURN % sys.executable,
                           *more, "plant"],
                          cwd=str(t), env=env, capture_output=True, text=True, timeout=300)


def test_a_test_that_fails_only_under_load_fails_again(tmp_path):
    """Its pass ran beside the burn job: failed.  Run again alone (the second
    look before issue 91) it passed and the check passed, FLAKY; beside one
    busy loop (the other job of -j 2) it fails again."""
    t = tree(tmp_path, ledger="%stest_fails_only_under_load\tplanted\t2026-11-29\tnone\n" % ID)
    r = run_check(t, tmp_path / "plant", "test_fails_only_under_load")
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "second look at http plant's 1 beside 1 busy loops: FAILED again" in out, out
    assert "FLAKY" not in out, out
    # the control: with no load beside it, the second look passes it (FLAKY, in the ledger)
    r = run_check(t, tmp_path / "plant", "test_fails_only_under_load",
                  "--second-look-load", "0")
    assert "beside 0 busy loops: passed" in r.stdout and r.returncode == 0, r.stdout


def test_flaky_passes_only_in_the_ledger_and_not_twice_in_a_row(tmp_path):
    t = tree(tmp_path)
    r = run_check(t, tmp_path / "plant", "test_fails_once", strict=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("FLAKY (failed in its pass, passed when run again): http plant: %stest_fails_once: "
            "not in the ledger" % ID) in r.stdout, r.stdout
    assert "ledger (tests/flaky.tsv) holds 0 tests" in r.stdout, r.stdout
    assert (t / "build" / "check" / "flaky.txt").read_text() == ID + "test_fails_once\n"
    # without CHECK_FLAKES=strict, a first sighting is named and kept, not a failure
    (t / "build" / "check" / "flaky-history").unlink()
    r = run_check(t, tmp_path / "plant", "test_fails_once")
    assert r.returncode == 0 and "not in the ledger" in r.stdout, r.stdout + r.stderr

    # listed (by its id without a [param]): FLAKY, and the check passes
    (t / "tests" / "flaky.tsv").write_text("%stest_fails_once\tplanted\t2026-11-29\tissue 91\n"
                                           % ID)
    (t / "build" / "check" / "flaky-history").unlink()  # a first run
    r = run_check(t, tmp_path / "plant", "test_fails_once")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test_fails_once (in the ledger)" in r.stdout, r.stdout
    assert "ledger (tests/flaky.tsv) holds 1 test, each an issue to mend; 1 FLAKY" in r.stdout
    assert "check: passed" in r.stdout, r.stdout

    # FLAKY again in the next run: a failure, ledger or not
    r = run_check(t, tmp_path / "plant", "test_fails_once")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "test_fails_once: FLAKY in the last run too" in r.stdout, r.stdout
    assert len((t / "build" / "check" / "flaky-history").read_text().splitlines()) == 2


def test_a_ledger_line_that_does_not_read_is_an_error(tmp_path):
    t = tree(tmp_path, ledger="%stest_fails_once\tno date or mend\n" % ID)
    r = run_check(t, tmp_path / "plant", "test_fails_once")
    assert r.returncode == 2 and "flaky.tsv:2: not four tab-separated fields" in r.stderr, r


def test_the_trees_ledger_reads():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("run_check",
                                                  os.path.join(ROOT, "tests", "run-check"))
    rc = importlib.util.module_from_spec(importlib.util.spec_from_loader("run_check", loader))
    loader.exec_module(rc)
    ledger = rc.read_ledger()
    for nid in ledger:
        path = nid.split("::", 1)[0]
        assert os.path.exists(os.path.join(ROOT, path)), "flaky.tsv names %s" % nid
