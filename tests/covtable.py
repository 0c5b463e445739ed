#!/usr/bin/env python3
"""make coverage's table: line and branch coverage per folder of gatling/ and
io/ (and bench/ apart), from gcovr's JSON summary.

  tests/covtable.py build/coverage/summary.json [--min-lines PCT --min-branches PCT]
  tests/covtable.py build/obj-parsecov/summary.json --floors tests/coverage-floors

Prints the table (tests/README holds the last one); with --min-*, exits 1
when gatling/ and io/ together fall below (a floor: coverage is
deterministic for the same tests).  With --floors, a table per file instead,
each file of the floors file found by its name alone (a file that moves to
another folder keeps its floor), and exits 1 when one falls below its floor
or is not in the summary (make coverage-parsers)."""
import argparse
import json
import os
import sys


def folder(path):
    parts = path.split("/")
    if parts[0] in ("gatling", "bench"):
        return "/".join(parts[:2]) + "/" if len(parts) > 2 else parts[0] + "/ (top)"
    return parts[0] + "/"


def pct(a, b):
    return "%5.1f%%" % (100.0 * a / b) if b else "    -"


def read_floors(path):
    """[(file name, lines %, branches %)] from a floors file: one file a line,
    '#' to the end of a line is a comment."""
    floors = []
    with open(path) as f:
        for ln in f:
            w = ln.split("#", 1)[0].split()
            if w:
                floors.append((w[0], float(w[1]), float(w[2])))
    return floors


def check_floors(files, floors):
    """Print each floored file's coverage; return the complaints."""
    by_name = {}
    for fi in files:
        by_name.setdefault(os.path.basename(fi["filename"]), []).append(fi)
    fmt = "  %-28s %6s %7s %6s %9s %7s %6s"
    print(fmt % ("file", "lines", "", "floor", "branches", "", "floor"))
    bad = []
    for name, min_l, min_b in floors:
        found = by_name.get(name, [])
        if len(found) != 1:
            bad.append("%s: %s in the summary" % (name, "not" if not found else "twice"))
            continue
        fi = found[0]
        lp = 100.0 * fi["line_covered"] / max(1, fi["line_total"])
        bp = 100.0 * fi["branch_covered"] / max(1, fi["branch_total"])
        print(fmt % (os.path.normpath(fi["filename"]), fi["line_total"], "%.1f%%" % lp,
                     "%.1f" % min_l, fi["branch_total"], "%.1f%%" % bp, "%.1f" % min_b))
        if lp + 1e-9 < min_l:
            bad.append("%s: lines %.1f%% below the floor %.1f%%" % (name, lp, min_l))
        if bp + 1e-9 < min_b:
            bad.append("%s: branches %.1f%% below the floor %.1f%%" % (name, bp, min_b))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("--min-lines", type=float)
    ap.add_argument("--min-branches", type=float)
    ap.add_argument("--floors", metavar="FILE", help="per-file floors (tests/coverage-floors)")
    a = ap.parse_args()
    with open(a.summary) as f:
        files = json.load(f)["files"]
    if a.floors:
        bad = check_floors(files, read_floors(a.floors))
        for b in bad:
            print("coverage: " + b, file=sys.stderr)
        return 1 if bad else 0
    rows = {}
    for fi in files:
        name = os.path.normpath(fi["filename"])
        if not name.startswith(("gatling/", "io/", "bench/")):
            continue
        r = rows.setdefault(folder(name), [0, 0, 0, 0, 0])
        r[0] += fi["line_covered"]
        r[1] += fi["line_total"]
        r[2] += fi["branch_covered"]
        r[3] += fi["branch_total"]
        r[4] += 1
    fmt = "  %-22s %5s %8s %6s %9s %6s"
    print(fmt % ("folder", "files", "lines", "", "branches", ""))
    total = [0, 0, 0, 0, 0]
    for group in ("gatling/ and io/", "bench/"):
        sub = [0, 0, 0, 0, 0]
        for k in sorted(k for k in rows if k.startswith("bench") == (group == "bench/")):
            r = rows[k]
            print(fmt % (k, r[4], r[1], pct(r[0], r[1]), r[3], pct(r[2], r[3])))
            sub = [x + y for x, y in zip(sub, r)]
        print(fmt % (group, sub[4], sub[1], pct(sub[0], sub[1]), sub[3], pct(sub[2], sub[3])))
        if group != "bench/":
            total = sub
    bad = []
    if a.min_lines is not None and 100.0 * total[0] / max(1, total[1]) < a.min_lines:
        bad.append("lines below %.1f%%" % a.min_lines)
    if a.min_branches is not None and 100.0 * total[2] / max(1, total[3]) < a.min_branches:
        bad.append("branches below %.1f%%" % a.min_branches)
    if bad:
        print("coverage: gatling/ and io/: " + ", ".join(bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
