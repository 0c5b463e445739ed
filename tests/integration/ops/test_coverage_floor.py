"""make coverage-parsers' verdict (tests/covtable.py --floors, issue 55): a
parser under its floor, in lines or in branches, or missing from the
summary, fails the run and is named; one at or above its floor passes, found
by its file's name in whatever folder the summary puts it.  The floors
themselves are make check's parsecov job."""
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COVTABLE = os.path.join(ROOT, "tests", "covtable.py")


def run(tmp_path, files, floors):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"files": [
        {"filename": name, "line_covered": lc, "line_total": lt,
         "branch_covered": bc, "branch_total": bt} for name, lc, lt, bc, bt in files]}))
    fl = tmp_path / "floors"
    fl.write_text("# a comment line\n" + "".join("%s %s %s  # why\n" % f for f in floors))
    return subprocess.run([sys.executable, COVTABLE, str(summary), "--floors", str(fl)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)


def test_at_the_floor_passes_wherever_the_file_moved(tmp_path):
    p = run(tmp_path, [("gatling/h1/proxyproto.c", 90, 100, 45, 50)],
            [("proxyproto.c", 90.0, 90.0)])
    assert p.returncode == 0, p.stderr
    assert "gatling/h1/proxyproto.c" in p.stdout and "90.0%" in p.stdout


def test_below_a_floor_fails_naming_the_file_and_the_measure(tmp_path):
    files = [("gatling/http/http_parse.c", 95, 100, 80, 100),
             ("gatling/http/cachectl.c", 89, 100, 90, 100)]
    p = run(tmp_path, files, [("http_parse.c", 90.0, 81.0), ("cachectl.c", 90.0, 90.0)])
    assert p.returncode == 1
    assert "http_parse.c: branches 80.0% below the floor 81.0%" in p.stderr
    assert "cachectl.c: lines 89.0% below the floor 90.0%" in p.stderr
    assert "http_parse.c: lines" not in p.stderr and "cachectl.c: branches" not in p.stderr


def test_a_parser_missing_from_the_summary_fails(tmp_path):
    p = run(tmp_path, [("gatling/http/http_parse.c", 95, 100, 95, 100)],
            [("http_parse.c", 90.0, 90.0), ("ftp_parse.c", 0.0, 0.0)])
    assert p.returncode == 1 and "ftp_parse.c: not in the summary" in p.stderr


def test_the_tree_has_a_floor_for_every_parser_make_check_measures():
    """tests.mk's PARSERS and tests/coverage-floors name the same files, so a
    parser added to one is not left unguarded by the other."""
    with open(os.path.join(ROOT, "tests", "tests.mk")) as f:
        line = next(ln for ln in f if ln.startswith("PARSERS ?="))
    parsers = {w + ".c" for w in line.split("=", 1)[1].split()}
    with open(os.path.join(ROOT, "tests", "coverage-floors")) as f:
        floored = {ln.split()[0] for ln in f if ln.split() and not ln.startswith("#")}
    assert parsers == floored
