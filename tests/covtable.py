#!/usr/bin/env python3
"""make coverage's table: line and branch coverage per folder of gatling/ and
io/ (and bench/ apart), from gcovr's JSON summary.

  tests/covtable.py build/coverage/summary.json [--min-lines PCT --min-branches PCT]

Prints the table (tests/README holds the last one); with --min-*, exits 1
when gatling/ and io/ together fall below (a floor: coverage is
deterministic for the same tests)."""
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("--min-lines", type=float)
    ap.add_argument("--min-branches", type=float)
    a = ap.parse_args()
    with open(a.summary) as f:
        files = json.load(f)["files"]
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
