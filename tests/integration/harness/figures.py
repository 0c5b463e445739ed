"""The figures the serial tests measure (issue 67: timing is the benchmarks' business).

A serial test measures a time, a rate or a cost and compares it with a bound.  Each such
figure goes through figure(), which appends it to $GATLING_FIGURES (tests/run-check sets
build/check/figures.jsonl; phase 2 prints them as a table at its end) and judges it by its
kind, which the test names:

  COUNT    what the code does whatever the machine's speed: system calls per request, bytes
           held per connection, requests that failed.  Over its bound is a failure.
  MARGIN   a time or a rate whose bound holds with a margin of at least 3x over what it
           measures on the 2-core machine beside two busy loops (the test's docstring or
           tests/README's table gives the figures).  Over its bound is a failure.
  BENCH    a time or a rate without that margin on a shared machine: a benchmark result.
           Recorded and printed, flagged "over" in the table when outside its bound, never
           a failure: a busy neighbour moves it, and a failure would teach the reader to
           rerun the check.

figure() returns the value, so that a test reads as before:
    took = figure("listing of 10,000 files", dt, "s", hi=1.0, kind=BENCH)
"""
import json
import os

COUNT, MARGIN, BENCH = "count", "margin", "bench"


def _current_test():
    t = os.environ.get("PYTEST_CURRENT_TEST", "")
    return t.rsplit(" (", 1)[0]  # "path::name[param] (call)"


def figure(what, value, unit, lo=None, hi=None, kind=BENCH):
    """Record value (in unit) with its bounds [lo, hi] (either may be None);
    assert it within them unless kind is BENCH.  Returns value."""
    inside = (lo is None or value >= lo) and (hi is None or value <= hi)
    row = {"test": _current_test(), "what": what, "value": value, "unit": unit,
           "lo": lo, "hi": hi, "kind": kind, "inside": inside}
    path = os.environ.get("GATLING_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
    if kind != BENCH:
        assert inside, "%s: %s %s, outside [%s, %s] (%s)" % (
            what, value, unit, "-" if lo is None else lo, "-" if hi is None else hi, kind)
    return value


def table(path):
    """Phase 2's table of the figures in path: one line each."""
    try:
        rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    except OSError:
        return []
    out = []
    for r in rows:
        b = "%s..%s" % ("" if r["lo"] is None else r["lo"], "" if r["hi"] is None else r["hi"])
        v = r["value"]
        vs = ("%.3g" % v) if isinstance(v, float) else str(v)
        out.append("%-6s %-5s %10s %-6s in %-14s %s: %s" % (
            r["kind"], "ok" if r["inside"] else "OVER", vs, r["unit"], b,
            r["test"].split("::")[-1], r["what"]))
    return out
