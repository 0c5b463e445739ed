"""The throughput rows' tables and graphs (bench/run throughput, bench/run compare): any number
of run directories, each a column, as OpenBSD's perform shows its runs:

  - the regress table: a row per test, a column per run: PASS (every repetition completed
    and reached its floor), FAIL, NOEXIT (a tool had to be killed: a hang);
  - the throughput table: the median Mbit/s (UDP: received payload; 0-byte payloads:
    thousand datagrams/s received) per test and run, the ratio to the first column,
    the generator's CPU, loss;
  - a bar graph per protocol (tcp4, tcp6, udp4, udp6, iperf3): a bar per run per test,
    a failed or hung test marked on its bar (gnuplot, SVG inline and PNG beside it).
"""
import html
import json
import os
import time

from . import benchlib as bl
from . import runreport as rr
from . import tput

TERM_PNG = "pngcairo noenhanced size 900,420 font 'sans,10'"
TERM_SVG = "svg size 900,420 dynamic noenhanced font 'sans,11'"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#17becf"]


def has_rows(d):
    return os.path.exists(os.path.join(d, "throughput.tsv"))


def load(d):
    """(label, rows, meta) of a run directory."""
    meta = {}
    for f in ("throughput-meta.json", "meta.json"):
        try:
            with open(os.path.join(d, f)) as fh:
                meta = json.load(fh)
            break
        except (OSError, ValueError):
            continue
    label = meta.get("label") or os.path.basename(os.path.normpath(d))
    return label, tput.read_rows(os.path.join(d, "throughput.tsv")), meta


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def cells(rows):
    """{test: {"status", "value", "unit", "cpu", "lost_pct", "runs"}}: the repetitions of a
    test in one directory together: NOEXIT if any hung, else FAIL if any failed; the value
    is the median over the repetitions that passed."""
    by = {}
    for r in rows:
        by.setdefault(r["test"], []).append(r)
    out = {}
    for test, rs in by.items():
        st = [r["status"] for r in rs]
        status = "NOEXIT" if "NOEXIT" in st else "FAIL" if "FAIL" in st else "PASS"
        ok = [r for r in rs if r["status"] == "PASS"] or rs
        zero = test.startswith("udp") and test.endswith("-l0")
        vals = [(num(r.get("pps")) or 0) / 1000 if zero else num(r.get("mbit")) or 0 for r in ok]
        sent = sum(num(r.get("sent")) or 0 for r in ok)
        lost = sum(num(r.get("lost")) or 0 for r in ok)
        cpu = [max(num(r.get("cpu_send")) or 0, num(r.get("cpu_recv")) or 0) for r in ok]
        out[test] = {"status": status, "value": bl.median(vals), "unit": "kpps" if zero
                     else "Mbit/s", "cpu": bl.median(cpu), "runs": len(rs),
                     "bound": any(r.get("cpu_bound") == "yes" for r in ok),
                     "lost_pct": 100 * lost / sent if test.startswith("udp") and sent else None,
                     "note": "; ".join(sorted({r["note"] for r in rs if r.get("note")}))}
    return out


def tests_in_order(columns):
    seen = []
    for _, c, _ in columns:
        for t in c:
            if t not in seen:
                seen.append(t)
    return seen


def protocol(test):
    """The graph a test's bar is in: tcp4, tcp6, udp4, udp6 (Mbit/s), udp4-empty and
    udp6-empty (0-byte payloads: thousand datagrams/s), iperf3."""
    if test.startswith("iperf3"):
        return "iperf3"
    return test.split("-")[0] + ("-empty" if test.endswith("-l0") else "")


def fmt(v):
    return "-" if v is None else rr.sig(v) if hasattr(rr, "sig") else "%.3g" % v


def tables_text(columns):
    """The regress and throughput tables as text (compare.txt, the terminal)."""
    tests = tests_in_order(columns)
    labels = [l for l, _, _ in columns]
    reg = [[t] + [c[t]["status"] if t in c else "-" for _, c, _ in columns] for t in tests]
    thr = []
    for t in tests:
        base = columns[0][1].get(t)
        row = [t, next(c[t]["unit"] for _, c, _ in columns if t in c)]
        for i, (_, c, _) in enumerate(columns):
            x = c.get(t)
            if not x:
                row.append("-")
                continue
            s = "%.1f" % x["value"]
            if i and base and base["value"]:
                s += " (%.2fx)" % (x["value"] / base["value"])
            if x["status"] != "PASS":
                s += " " + x["status"]
            row.append(s)
        thr.append(row)
    out = ["regress (PASS / FAIL / NOEXIT per test and run)"]
    out += rr.text_table(["test"] + labels, reg)
    out += ["", "throughput (median over the repetitions; ratio to the first column)"]
    out += rr.text_table(["test", "unit"] + labels, thr)
    return "\n".join(out)


def iperf3_pairs(rows):
    """kb-stream against iperf3 (bench/run throughput --iperf3): for each test iperf3 ran
    beside, the ratio of every repetition's kb-stream row to the iperf3 run next to it
    (side by side in time, so a change in the machine's load falls on both), and the
    median of those ratios: [(test, [ratios], median)]."""
    by = {(r["test"], r["run"]): r for r in rows}
    ratios = {}
    for (t, run), i in by.items():
        k = by.get((t[len("iperf3-"):], run)) if t.startswith("iperf3-") else None
        if k and k["status"] == i["status"] == "PASS" and num(i.get("mbit")):
            ratios.setdefault(t[len("iperf3-"):], []).append(num(k.get("mbit")) / num(i["mbit"]))
    return [(t, r, bl.median(r)) for t, r in ratios.items()]


def pairs_text(p):
    """iperf3_pairs' table as text lines (none without pairs)."""
    if not p:
        return []
    return ["", "kb-stream / iperf3, each repetition against the iperf3 run beside it"] + \
        rr.text_table(["test", "pairs", "median", "range"],
                      [[t, str(len(r)), "%.3f" % m, "%.3f-%.3f" % (min(r), max(r))]
                       for t, r, m in p])


def pairs_html(p):
    """iperf3_pairs' table for report.html ("" without pairs)."""
    if not p:
        return ""
    return ("<h2>kb-stream against iperf3</h2><p>Each repetition of a test divided by the "
            "iperf3 run beside it (the same streams, hosts and CPUs): a change in the "
            "machine's load falls on both halves of a pair.</p><table class=tput><tr>"
            "<th class=l>test</th><th>pairs</th><th>median ratio</th><th>range</th></tr>%s"
            "</table>" % "".join(
                "<tr><td class=l>%s</td><td class=n>%d</td><td class=n>%.3f</td>"
                "<td class=n>%.3f–%.3f</td></tr>" % (html.escape(t), len(r), m, min(r), max(r))
                for t, r, m in p))


def plot_protocol(outdir, proto, tests, columns):
    """A clustered bar graph: a cluster per test, a bar per run; FAIL / NOEXIT written on
    the bar.  The name drawn (plots/tput-PROTO), or None."""
    pdir = os.path.join(outdir, "plots")
    os.makedirs(pdir, exist_ok=True)
    name = "tput-" + proto
    m = len(columns)
    with open(os.path.join(pdir, name + ".dat"), "w") as f:
        for t in tests:
            vals, marks = [], []
            for _, c, _ in columns:
                x = c.get(t)
                vals.append("%r" % (x["value"] if x else 0))
                marks.append('"%s"' % (x["status"] if x and x["status"] != "PASS" else
                                       "" if x else "not run"))
            f.write('"%s" %s %s\n' % (t, " ".join(vals), " ".join(marks)))
    unit = "thousand datagrams/s received" if proto.endswith("-empty") else \
        "Mbit/s received" if proto.startswith("udp") else "Mbit/s"
    plots = ["'%s.dat' using %d:xtic(1) title '%s' lc rgb '%s'" % (
        name, i + 2, l.replace("'", ""), COLORS[i % len(COLORS)])
        for i, (l, _, _) in enumerate(columns)]
    plots += ["'%s.dat' using ($0+(%d-%g)/%d.0):(0):%d with labels rotate left offset 0,0.5 "
              "tc rgb '#b00000' notitle" % (name, i, (m - 1) / 2.0, m + 1, m + 2 + i)
              for i in range(m)]
    script = []
    for term, out in ((TERM_PNG, name + ".png"), (TERM_SVG, name + ".svg")):
        script += ["set terminal " + term, "set output '%s'" % out,
                   "set style data histograms", "set style histogram clustered gap 1",
                   "set style fill solid 0.85 border -1", "set boxwidth 0.9",
                   "set xtics rotate by -35 scale 0", "set rmargin 10", "set bmargin 7",
                   "set grid ytics", "set yrange [0:*]",
                   "set key outside top center horizontal",
                   "set ylabel '%s'" % unit, "set title '%s: a bar per run' noenhanced" % proto,
                   "plot " + ", ".join(plots), "unset output"]
    return name if bl.gnuplot("\n".join(script) + "\n", pdir) else None


def svg(outdir, name):
    try:
        with open(os.path.join(outdir, "plots", name + ".svg")) as f:
            s = f.read()
        return s[s.find("<svg"):]
    except OSError:
        return "<p>(no plot: %s)</p>" % ("gnuplot missing" if not bl.have_gnuplot()
                                         else "gnuplot failed")


def section_html(outdir, columns):
    """The throughput part of report.html: regress table, throughput table, a graph per
    protocol."""
    esc = html.escape
    tests = tests_in_order(columns)
    labels = [l for l, _, _ in columns]
    head = "".join("<th>%s</th>" % esc(l) for l in labels)
    reg = ["<table class=regress><tr><th class=l>test</th>%s</tr>" % head]
    for t in tests:
        reg.append("<tr data-test='%s'><td class=l>%s</td>%s</tr>" % (esc(t), esc(t), "".join(
            "<td class='st %s'>%s</td>" % ((c[t]["status"], c[t]["status"]) if t in c else
                                          ("none", "-")) for _, c, _ in columns)))
    reg.append("</table>")
    thr = ["<table class=tput><tr><th class=l>test</th><th class=l>unit</th>%s</tr>" % "".join(
        "<th>%s</th><th>CPU</th>" % esc(l) for l in labels)]
    for t in tests:
        base = columns[0][1].get(t)
        tds = []
        for i, (_, c, _) in enumerate(columns):
            x = c.get(t)
            if not x:
                tds.append("<td class=none>-</td><td class=none></td>")
                continue
            v = "%.1f" % x["value"] + (" (%.2f×)" % (x["value"] / base["value"])
                                       if i and base and base["value"] else "")
            if x["lost_pct"] is not None:
                v += ", lost %.2f%%" % x["lost_pct"]
            if x["status"] != "PASS":
                v += " <b>%s</b>" % x["status"]
            tds.append("<td class=n title='%s'>%s</td><td class=n>%.2f%s</td>" % (
                esc(x["note"]), v, x["cpu"], " <b>bound</b>" if x["bound"] else ""))
        unit = next(c[t]["unit"] for _, c, _ in columns if t in c)
        thr.append("<tr><td class=l>%s</td><td class=l>%s</td>%s</tr>" % (esc(t), unit,
                                                                         "".join(tds)))
    thr.append("</table>")
    graphs = []
    for proto in sorted({protocol(t) for t in tests}):
        name = plot_protocol(outdir, proto, [t for t in tests if protocol(t) == proto], columns)
        graphs.append("<h3>%s</h3><div class=plots><div>%s</div></div>" % (
            esc(proto), svg(outdir, name) if name else "<p>(no plot)</p>"))
    return ("<h2>Throughput: regress</h2><p>PASS: every repetition completed and reached its "
            "floor (above zero; TCP: the receiver counted every byte sent); FAIL; NOEXIT: a "
            "tool had to be killed.</p>%s<h2>Throughput</h2><p>Medians over the repetitions "
            "that passed; in brackets the ratio to the first column.  CPU: the busier of "
            "kb-stream's sender and receiver, in cores (getrusage over wall time); "
            "<b>bound</b>: a process of it was on a CPU 90%% of its time or more, so it may "
            "have been the limit.</p>%s<h2>Graphs</h2>%s" % (
                "\n".join(reg), "\n".join(thr), "\n".join(graphs)))


CSS = rr.CSS + "td.PASS{color:#080}td.FAIL,td.NOEXIT{color:#b00;font-weight:bold}"


def write(outdir, dirs):
    """compare.txt's throughput part and report.html for the directories dirs, each a
    column; the text."""
    columns, pairs, phtml = [], [], ""
    for d in dirs:
        label, rows, meta = load(d)
        columns.append((label, cells(rows), meta))
        if len(dirs) == 1:
            p = iperf3_pairs(rows)
            pairs, phtml = pairs_text(p), pairs_html(p)
    labels = [l for l, _, _ in columns]
    if len(set(labels)) < len(labels):  # two runs with one label: the directory names too
        columns = [("%s (%s)" % (l, os.path.basename(os.path.normpath(d))), c, m)
                   for (l, c, m), d in zip(columns, dirs)]
    os.makedirs(outdir, exist_ok=True)
    text = "\n".join([tables_text(columns)] + pairs)
    body = section_html(outdir, columns) + phtml
    metas = "".join("<h3>%s</h3><pre>%s</pre>" % (html.escape(l), html.escape(
        json.dumps(m, indent=1, sort_keys=True))) for l, _, m in columns)
    doc = ("<!doctype html><html><head><meta charset='utf-8'><title>bench/run throughput"
           "</title><style>%s</style></head><body><h1>bench/run throughput: %s</h1>%s%s"
           "<h2>The runs</h2>%s</body></html>\n" % (
               CSS, html.escape(", ".join(l for l, _, _ in columns)),
               "" if bl.have_gnuplot() else "<p class=warn><b>Warning:</b> %s.</p>" %
               html.escape(bl.GNUPLOT_MISSING), body, metas))
    return text, doc


def insert_or_write(outdir, doc, body_only):
    """report.html: the throughput document, or (a directory with the kernel suite's report
    already) its throughput sections put into that report before </body>."""
    path = os.path.join(outdir, "report.html")
    if body_only and os.path.exists(path):
        with open(path) as f:
            old = f.read()
        start = doc.index("<h2>Throughput: regress</h2>")
        part = doc[start:doc.index("</body>")]
        old = old.split("<!-- throughput -->")[0].replace("</body></html>", "").rstrip()
        doc = old + "\n<!-- throughput -->\n<style>%s</style>\n%s</body></html>\n" % (
            "td.PASS{color:#080}td.FAIL,td.NOEXIT{color:#b00;font-weight:bold}", part)
    with open(path, "w") as f:
        f.write(doc)
    return path


def compare(dirs, outdir, kernel_report=False):
    """bench/run compare's throughput part: compare.txt (or its throughput part) and
    report.html with a column per directory."""
    text, doc = write(outdir, dirs)
    path = os.path.join(outdir, "compare.txt")
    mode = "a" if kernel_report and os.path.exists(path) else "w"
    with open(path, mode) as f:
        f.write("# bench/run compare %s: throughput\n%s\n" % (" ".join(dirs), text))
    insert_or_write(outdir, doc, kernel_report)
    return text


def cli(argv, tool):
    """bench/run throughput [quick|full] ...: measure, write the rows and the report."""
    import argparse
    ap = argparse.ArgumentParser(prog="bench/run throughput", description="the throughput "
                                 "rows (kb-stream) in a lab of network namespaces (root): "
                                 "bench/doc/throughput.md")
    ap.add_argument("suite", nargs="?", default="quick", choices=["quick", "full", "tiny"])
    ap.add_argument("-o", dest="outdir", help="the run directory (default: bench-run-"
                    "throughput-SUITE-DATE); rows are added to a kernel suite's directory")
    ap.add_argument("--runs", type=int, default=None, help="repetitions (quick 1, full 3)")
    ap.add_argument("--label", help="the column's name (default: kernel release and tuning)")
    ap.add_argument("--tuning", default="default", help="one of: " + ", ".join(tput.TUNINGS))
    ap.add_argument("--sweep", help="tunings, comma-separated: a run directory each under -o "
                    "and their comparison, a column each")
    ap.add_argument("--only", help="tests, comma-separated, * matches anything "
                    "(tcp4-lo-*,udp4-veth-n1-l0)")
    ap.add_argument("--iperf3", action="store_true", help="iperf3 -P 1 and -P 15 on loopback "
                    "beside kb-stream's rows")
    ap.add_argument("--secs", type=float, help="seconds per row (quick 1, full 5)")
    ap.add_argument("--pin", metavar="SEND/RECV[/RELAY]", help="CPUs of the sender, receiver "
                    "and relay (kb-stream -A, iperf3 -A), e.g. 0/1: the scheduler does not "
                    "move them between rows")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.secs is not None and not 0.5 <= a.secs <= 600:
        ap.error("--secs: 0.5 to 600")
    runs = a.runs or (3 if a.suite == "full" else 1)
    if not 1 <= runs <= 20:
        ap.error("--runs: 1 to 20")
    try:
        tput.parse_pin(a.pin)
    except tput.TputError as e:
        ap.error(str(e))
    sweep = a.sweep.split(",") if a.sweep else None
    for t in sweep or [a.tuning]:
        if t not in tput.TUNINGS:
            ap.error("tuning %r: one of %s" % (t, ", ".join(tput.TUNINGS)))
    out = a.outdir or "bench-run-throughput-%s-%s" % (a.suite, time.strftime(
        "%Y%m%d-%H%M%S"))
    try:
        if not sweep:
            rows = tput.run_suite(out, a.suite, tool, runs, a.tuning, a.label, a.only, a.iperf3,
                                  a.quiet, a.secs, pin=a.pin)
            text, doc = write(out, [out])
            insert_or_write(out, doc, os.path.exists(os.path.join(out, "samples.tsv")))
        else:
            dirs = [os.path.join(out, t) for t in sweep]
            done = {}
            for run in range(runs):  # alternating: repetition 1 of every tuning, then 2, ...
                for t, d in zip(sweep, dirs):
                    done[t] = tput.run_suite(d, a.suite, tool, 1, t, None, a.only, a.iperf3,
                                             a.quiet, a.secs, run_from=run, pin=a.pin)
            rows = [r for rs in done.values() for r in rs]
            text = compare(dirs, out)
    except tput.TputError as e:
        bl.log("bench/run throughput: %s" % e)
        return 1
    print(text)
    bl.log("bench/run throughput: report %s" % os.path.join(out, "report.html"))
    return 0 if all(r["status"] == "PASS" for r in rows) else 3
