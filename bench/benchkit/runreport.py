"""runreport: what bench/run's report says, in the terminal and in report.html.

bench/run measures and plots; this module turns its summary (summarize() in
bench/run: {key: {median, p99, per_run_median, bench, metric, level, fit}}) into
tables a kernel engineer reads: first one row per benchmark and value (class,
slope, step, the limit that stopped it), then the short-lived levels as one
small table, the open-loop sweep with its knee, per-host rows in a multi-host
run, and the same for `bench/run compare`.  Numbers carry their units (ns, µs,
ms, s chosen by magnitude; req/s with thousands separators), never e-notation.

Pure functions over dicts and lists, Python 3 standard library only; the
report's wording of every rule (the knee, the classes) is here and in
bench/doc/run.md.
"""
import html
import json
import math
import re

# -- numbers with units ---------------------------------------------------------


def sig(v, digits=3):
    """v to `digits` significant digits, thousands separated, never e-notation:
    14694 -> '14,700', 23.485 -> '23.5', 0.0043 -> '0.0043'; None or NaN -> '-'."""
    if v is None or v != v:
        return "-"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return "0"
    for _ in range(2):  # again when rounding reaches the next power of ten (9.996 -> 10.0)
        dec = digits - 1 - int(math.floor(math.log10(abs(v))))
        r = round(v, dec)
        if r == 0 or int(math.floor(math.log10(abs(r)))) == digits - 1 - dec:
            break
        v = r
    text = "{:,.{}f}".format(r, max(0, dec))
    return text.replace("-", "−") if text.startswith("-") else text


def dur(us, sign=False):
    """A time given in µs, in the unit its magnitude asks for: '820 ns', '23.5 µs',
    '6.45 ms', '1.74 s'.  sign: '+' in front of positive values (a slope)."""
    if us is None or us != us:
        return "-"
    a = abs(us)
    if a == 0:
        text = "0 µs"
    elif a < 0.9995:  # thresholds where three digits round up to the next unit
        text = sig(us * 1000) + " ns"
    elif a < 999.5:
        text = sig(us) + " µs"
    elif a < 999500:
        text = sig(us / 1000) + " ms"
    else:
        text = sig(us / 1e6) + " s"
    return ("+" + text) if sign and us > 0 else text


def trim(text):
    """'10.0 ms' -> '10 ms', '2.50k' -> '2.5k': for axis tics, where digits mean nothing."""
    return re.sub(r"(\d+)\.(\d*?)0+(?!\d)",
                  lambda m: m.group(1) + ("." + m.group(2) if m.group(2) else ""), text)


def tic_dur(us):
    return trim(dur(us))


def rate(v):
    """Requests per second: '14,700 req/s' (three significant digits)."""
    return "-" if v is None or v != v else sig(v) + " req/s"


def count(n):
    """A whole number with thousands separators: 19000 -> '19,000'."""
    return "-" if n is None or n != n else "{:,}".format(int(round(n)))


def pct(x):
    """A fraction as a percentage: 0.873 -> '87%', 0.054 -> '5.4%'."""
    if x is None or x != x:
        return "-"
    return "%.0f%%" % (x * 100) if x >= 0.1 else "%.1f%%" % (x * 100)


def times(r):
    """A ratio: '1.02×', '191×', '0.0052×'."""
    return "-" if r is None or r != r else sig(r) + "×"


RATES = ("req_per_s", "achieved_per_s")


def value(metric, v):
    """A summary value with the unit its metric has (bench/run's values are µs)."""
    if metric in RATES:
        return rate(v)
    if metric == "errors":
        return count(v)
    return dur(v)


def noise(per_run):
    """Relative spread of the per-run medians: (max - min) / median."""
    xs = [x for x in per_run if x == x]
    if len(xs) < 2:
        return float("nan")
    xs.sort()
    m = xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
    return (max(xs) - min(xs)) / m if m else float("nan")


def span(lo, hi, fmt):
    """'a–b' in one unit, or one value when they print the same."""
    a, b = fmt(lo), fmt(hi)
    if a == b:
        return a
    unit_a, unit_b = a.rsplit(" ", 1)[-1], b.rsplit(" ", 1)[-1]
    if " " not in a and " " not in b:
        return "%s–%s" % (a, b)
    if " " in a and unit_a == unit_b:
        return "%s–%s" % (a.rsplit(" ", 1)[0], b)
    return "%s – %s" % (a, b)


# -- what the summary holds -------------------------------------------------------

LEVELS = {"short-lived": "c", "open-loop": "R"}
ORDER = ["socket", "socket6", "bind", "accept", "fork", "fork-static", "thread", "mmap",
         "manymap", "http-idle", "short-lived", "open-loop"]


def base(b):
    """'short-lived@nginx' -> 'short-lived'."""
    return b.split("@", 1)[0]


def bench_order(b):
    name = base(b)
    return (ORDER.index(name) if name in ORDER else len(ORDER), name, b)


def entries(summary):
    """The summary's entries (no '_' keys), as (key, entry)."""
    return [(k, s) for k, s in summary.items() if not k.startswith("_")]


def levels(summary, bench):
    """{level: {metric: entry}} of one per-level bench ('short-lived', 'open-loop@x')."""
    out = {}
    for _, s in entries(summary):
        if s["bench"] == bench and s.get("level") is not None:
            out.setdefault(s["level"], {})[s["metric"]] = s
    return dict(sorted(out.items()))


def level_benches(summary, kind):
    """The series of a per-level entry: 'short-lived', then 'short-lived@NAME', ..."""
    return sorted({s["bench"] for _, s in entries(summary) if base(s["bench"]) == kind},
                  key=bench_order)


def med(lv, metric):
    s = lv.get(metric)
    return s["median"] if s else None


# -- the limit that stopped a run ---------------------------------------------------

def limit_text(bench, summary):
    """What stopped a bench, short: 'RLIMIT_NOFILE (20,000) at N = 19,997, 5 of 5 runs',
    '' when every run went to its end."""
    st = summary.get("_status", {}).get(bench, [])
    notes = [x.get("note", "") for x in st]
    # the open loop's sweep says so when it never fell behind: not a limit
    stopped = [n for n in notes if n and not n.startswith("never saturated")]
    if not stopped:
        return ""
    first = stopped[0]
    runs = "%d of %d runs" % (len(stopped), len(notes))
    m = None
    for pat in (r"(RLIMIT_\w+)(?: \((\d+)\))?", r"(vm\.\w+)(?: \((\d+)\))?",
                r"(port range)()", r"([\w.]+ limit)()"):
        m = re.search(pat, first) if first.startswith("stopped at N=") else None
        if m:
            break
    if m and all(n.startswith("stopped at") for n in stopped):
        ns = sorted(int(re.match(r"stopped at N=(\d+)", n).group(1)) for n in stopped)
        what = m.group(1) + (" (%s)" % count(int(m.group(2))) if m.group(2) else "")
        at = count(ns[0]) if ns[0] == ns[-1] else "%s–%s" % (count(ns[0]), count(ns[-1]))
        return "%s at N = %s, %s" % (what, at, runs)
    m = re.match(r"saturated from R=(\d+)", first)
    if m:
        rs = sorted({int(re.match(r"saturated from R=(\d+)", n).group(1))
                     for n in stopped if n.startswith("saturated from")})
        return "fell behind from %s offered, %s" % (
            " / ".join(rate(r) for r in rs), runs)
    m = re.match(r"fell behind at the last rate, R=(\d+)", first)
    if m:
        return "fell behind only at the last rate, %s, %s" % (rate(int(m.group(1))), runs)
    return "%s (%s)" % (first[:120], runs)


# -- the knee of the open loop --------------------------------------------------------

KNEE_ACHIEVED = 0.95  # achieved at least this share of the offered rate
KNEE_P99 = 10         # p99 at most this many times the p99 at the lowest rate
KNEE_RULE = ("the knee is the highest offered rate up to which every rate was served: "
             "achieved at least %d%% of offered, no errors, and a p99 at most %d× the p99 at "
             "the lowest rate (medians over the runs)" % (KNEE_ACHIEVED * 100, KNEE_P99))


def knee(points):
    """points: [(offered, achieved, p99 µs, errors)], medians over the runs.  The knee
    (KNEE_RULE): {'rate', 'p99', 'next', 'why'}, where next is the first rate that
    failed and why says how ('p99 2.85 ms, 19× the lowest rate's'); None when even the
    lowest rate failed or there are no points."""
    pts = sorted(p for p in points if p[0])
    if not pts:
        return None
    p99_0 = pts[0][2]
    best = None
    for offered, achieved, p99, errors in pts:
        why = []
        if achieved is None or achieved < KNEE_ACHIEVED * offered:
            why.append("achieved %s of offered" % pct((achieved or 0) / offered))
        if errors:
            why.append("%s errors" % count(errors))
        if p99 is None or p99_0 is None or (p99_0 > 0 and p99 > KNEE_P99 * p99_0):
            why.append("p99 %s, %s the lowest rate's" % (
                dur(p99), times(p99 / p99_0) if p99 and p99_0 else "-"))
        if why:
            if best:
                best.update({"next": offered, "why": "; ".join(why)})
            return best
        best = {"rate": offered, "p99": p99, "achieved": achieved, "next": None,
                "why": "served every rate"}
    return best


def knee_of(summary, bench):
    """The knee of one open-loop series of a summary."""
    return knee([(lv, med(m, "achieved_per_s"), med(m, "latency_p99"), med(m, "errors"))
                 for lv, m in levels(summary, bench).items()])


def knee_text(k):
    if not k:
        return "no knee: even the lowest rate fell behind"
    text = "knee at %s offered (p99 %s)" % (rate(k["rate"]), dur(k["p99"]))
    if k.get("next"):
        text += "; at %s: %s" % (count(k["next"]), k["why"])
    return text


# -- the lead table: one row per benchmark and value ------------------------------------

LEAD_COLS = ["benchmark", "value", "median", "p99", "spread", "class", "slope / 1,000 N",
             "step", "stopped by"]


def step_text(fit):
    return "at N = %s: %s → %s" % (count(fit["step_at"]), dur(fit["before"]),
                                   dur(fit["after"]))


def lead_rows(summary, hosts=None):
    """[{'bench', 'value', 'cells': [...LEAD_COLS[2:]]} or {'bench', 'value', 'text'}]:
    the N-growing benchmarks one row per value, short-lived and open-loop one row per
    series with a sentence (their levels have tables of their own)."""
    rows = []
    growing = sorted([s for _, s in entries(summary) if s.get("level") is None],
                     key=lambda s: (bench_order(s["bench"]), s["metric"]))
    for s in growing:
        fit = s.get("fit") or {}
        step = fit.get("class") == "step"
        rows.append({"bench": s["bench"], "value": s["metric"], "cells": [
            dur(s["median"]), dur(s["p99"]), pct(noise(s["per_run_median"])),
            fit.get("class", "-"),
            "-" if step or not fit else dur(fit.get("slope_per_1000"), sign=True),
            step_text(fit) if step else "",
            limit_text(s["bench"], summary) or
            ("none: ran to N = %s" % count(fit["n_max"]) if fit.get("n_max") else "")]})
    for b in level_benches(summary, "short-lived"):
        rows.append({"bench": b, "value": "req/s, p99",
                     "text": short_lived_text(summary, b) + hosts_note(hosts, b)})
    for b in level_benches(summary, "open-loop"):
        k = knee_of(summary, b)
        lv = levels(summary, b)
        most = max(lv.items(), key=lambda x: med(x[1], "achieved_per_s") or 0) if lv else None
        text = knee_text(k)
        if most:
            text += "; most achieved %s (offered %s)" % (
                rate(med(most[1], "achieved_per_s")), count(most[0]))
        stop = limit_text(b, summary) or ("never fell behind, up to %s" % rate(max(lv))
                                          if lv else "")
        rows.append({"bench": b, "value": "latency vs rate",
                     "text": text + ("; " + stop if stop else "") + hosts_note(hosts, b)})
    return rows


def short_lived_text(summary, b):
    lv = levels(summary, b)
    if not lv:
        return "-"
    rs = [med(m, "req_per_s") for m in lv.values() if med(m, "req_per_s") is not None]
    ps = [med(m, "latency_p99") for m in lv.values() if med(m, "latency_p99") is not None]
    errs = sum(med(m, "errors") or 0 for m in lv.values())
    text = "%s at %s connections" % (span(min(rs), max(rs), rate) if rs else "-",
                                     span(min(lv), max(lv), count))
    if ps:
        text += "; p99 %s" % span(min(ps), max(ps), dur)
    return text + ("; no errors" if not errs else "; errors (median) %s" % count(errs))


# -- the per-level tables ---------------------------------------------------------------

SHORT_COLS = ["connections", "req/s", "spread", "latency mean", "p99", "errors"]
OPEN_COLS = ["offered", "achieved", "p50", "p90", "p99", "p99.9", "errors", ""]


def short_rows(summary, b, hosts=None):
    """[(label, cells, is_host)] per level, each level's hosts after it."""
    rows = []
    for lv, m in levels(summary, b).items():
        rows.append((count(lv), [rate(med(m, "req_per_s")),
                                 pct(noise(m["req_per_s"]["per_run_median"]))
                                 if "req_per_s" in m else "-",
                                 dur(med(m, "latency_mean")), dur(med(m, "latency_p99")),
                                 count(med(m, "errors"))], False))
        for host, hm in host_levels(hosts, b, lv):
            rows.append(("host " + host, [rate(hm.get("req_per_s")), "",
                                          dur(hm.get("latency_mean")),
                                          dur(hm.get("latency_p99")),
                                          count(hm.get("errors"))], True))
    return rows


def open_rows(summary, b, hosts=None):
    k = knee_of(summary, b)
    rows = []
    for lv, m in levels(summary, b).items():
        mark = "◀ knee" if k and k["rate"] == lv else ""
        rows.append((count(lv), [rate(med(m, "achieved_per_s")), dur(med(m, "latency_p50")),
                                 dur(med(m, "latency_p90")), dur(med(m, "latency_p99")),
                                 dur(med(m, "latency_p99_9")), count(med(m, "errors")), mark],
                     False))
        for host, hm in host_levels(hosts, b, lv):
            rows.append(("host " + host, [rate(hm.get("achieved_per_s")),
                                          dur(hm.get("latency_p50")), dur(hm.get("latency_p90")),
                                          dur(hm.get("latency_p99")),
                                          dur(hm.get("latency_p99_9")),
                                          count(hm.get("errors")), ""], True))
    return rows


# -- multi-host runs ----------------------------------------------------------------------
# A run whose load came from several hosts has, beside samples.tsv (the merged figures),
# hosts.tsv: bench, run, N (the level), host, metric, value -- each host's own bench
# report.  meta.json's "hosts" lists them ([{"name", "role", ...}]).  See bench/doc/run.md.

# bench -J's report -> the values bench/run keeps (the same names as in samples.tsv)
HOST_VALUES = {
    "short-lived": (("req_per_s", "requests_per_s", None), ("latency_mean", "latency_us", "mean"),
                    ("latency_stdev", "latency_us", "stdev"), ("latency_p99", "latency_us", "p99"),
                    ("errors", "errors_total", None)),
    "open-loop": (("latency_p50", "latency_us", "p50"), ("latency_p90", "latency_us", "p90"),
                  ("latency_p99", "latency_us", "p99"), ("latency_p99_9", "latency_us", "p99_9"),
                  ("achieved_per_s", "requests_per_s", None), ("errors", "errors_total", None)),
}


def host_rows(bench, run, level, host, report):
    """hosts.tsv rows of one host's bench -J report at one level of one run."""
    rows = []
    for metric, key, sub in HOST_VALUES.get(base(bench), ()):
        v = report.get(key)
        v = v.get(sub) if sub and isinstance(v, dict) else v
        if isinstance(v, (int, float)):
            rows.append((bench, run, level, host, metric, float(v)))
    return rows


def write_hosts(path, rows):
    """hosts.tsv from host_rows()' rows (load_hosts reads it back)."""
    with open(path, "w") as f:
        f.write("bench\trun\tN\thost\tmetric\tvalue\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")


def load_hosts(path):
    """hosts.tsv as [(bench, run, level, host, metric, value)]; None when absent."""
    try:
        with open(path) as f:
            next(f)
            rows = []
            for line in f:
                b, r, n, h, m, v = line.rstrip("\n").split("\t")
                rows.append((b, int(r), int(n), h, m, float(v)))
            return rows
    except (OSError, StopIteration):
        return None


def summarize_hosts(rows):
    """{(bench, level): {host: {metric: median over the runs}}}, hosts in first-seen order."""
    if not rows:
        return {}
    vals = {}
    for b, _, n, h, m, v in rows:
        vals.setdefault((b, n), {}).setdefault(h, {}).setdefault(m, []).append(v)
    out = {}
    for key, hs in vals.items():
        out[key] = {}
        for h, ms in hs.items():
            out[key][h] = {}
            for m, xs in ms.items():
                xs = sorted(xs)
                n = len(xs)
                out[key][h][m] = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return out


def hosts_note(hosts, bench):
    """'; load from 3 hosts (a row each in the table below)', or ''."""
    names = {h for (b, _), hs in (hosts or {}).items() if b == bench for h in hs}
    return "; load from %d hosts (a row each in the table below)" % len(names) if names else ""


def host_levels(hosts, bench, level):
    """[(host, {metric: median})] of one level of one bench; [] without hosts."""
    return list(((hosts or {}).get((bench, level)) or {}).items())


# -- terminal text -----------------------------------------------------------------------

def text_table(header, rows, left=(0,)):
    """Columns as wide as their widest cell, those in left left-aligned, the rest right."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    out = []
    for r in [header] + rows:
        cells = [str(c).ljust(widths[i]) if i in left else str(c).rjust(widths[i])
                 for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return out


def summary_text(summary, hosts=None):
    """print_summary's text: the lead table, then the short-lived and open-loop levels."""
    lines = []
    rows = []
    for r in lead_rows(summary, hosts):
        if "cells" in r:
            rows.append(["%s %s" % (r["bench"], r["value"])] + r["cells"][:6] +
                        [r["cells"][6]])
    if rows:
        lines += text_table(["benchmark value", "median", "p99", "spread", "class",
                             "per 1,000 N", "step", "stopped by"], rows, left=(0, 4, 6, 7))
    for r in lead_rows(summary, hosts):
        if "text" in r:
            lines.append("%s: %s" % (r["bench"], r["text"]))
    for b in level_benches(summary, "short-lived"):
        lines += ["", b + ":"] + ["  " + x for x in text_table(
            SHORT_COLS, [[lab] + c for lab, c, _ in short_rows(summary, b, hosts)])]
    for b in level_benches(summary, "open-loop"):
        lines += ["", b + " (%s):" % knee_text(knee_of(summary, b))] + ["  " + x for x in
                                                                         text_table(
            OPEN_COLS[:-1] + ["knee"], [[lab] + c for lab, c, _ in open_rows(summary, b, hosts)])]
    return "\n".join(lines)


# -- HTML -------------------------------------------------------------------------------

CSS = """body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222;
line-height:1.4}table{border-collapse:collapse;margin:.5em 0 1em}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#eee}td.l,th.l{text-align:left}td.t{text-align:left;white-space:normal}
td.n{white-space:nowrap;font-variant-numeric:tabular-nums}tr.host td{color:#555;
background:#fafafa}tr.host td:first-child{padding-left:1.5em}.worse{color:#b00}
.better{color:#080}.step,.On{font-weight:bold}.knee{color:#b00;font-weight:bold}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:85%}
svg{max-width:100%;height:auto}.plots{display:flex;flex-wrap:wrap;gap:4px}
.plots>div{flex:1 1 520px;min-width:0}.warn{background:#fdd;border:2px solid #b00;padding:.5em}
p.rule{font-size:90%;color:#444}td.none{color:#888}table.levels td{white-space:nowrap}details{margin:1em 0}"""


def esc(x):
    return html.escape(str(x))


def th_row(cols, left=(0,)):
    return "<tr>%s</tr>" % "".join("<th%s>%s</th>" % (" class=l" if i in left else "", esc(c))
                                   for i, c in enumerate(cols))


def lead_html(summary, hosts=None):
    """The report's first table: one <tr data-bench=...> per benchmark and value."""
    out = ["<table class=lead>", th_row(LEAD_COLS, left=(0, 1, 5, 7, 8))]
    rows = lead_rows(summary, hosts)
    spans = {}
    for r in rows:
        spans[r["bench"]] = spans.get(r["bench"], 0) + 1
    seen = set()
    for r in rows:
        b = r["bench"]
        first = b not in seen
        seen.add(b)
        cells = []
        if first:
            cells.append("<td class=l rowspan=%d><b>%s</b></td>" % (spans[b], esc(b)))
        cells.append("<td class=l>%s</td>" % esc(r["value"]))
        if "cells" in r:
            c = r["cells"]
            cls = {"step": "step", "O(n)": "On"}.get(c[3], "")
            cells += ["<td class=n>%s</td>" % esc(x) for x in c[:3]]
            cells.append("<td class='l %s'>%s</td>" % (cls, esc(c[3])))
            cells.append("<td class=n>%s</td>" % esc(c[4]))
            cells.append("<td class='l n'>%s</td>" % esc(c[5]))
            cells.append("<td class='t%s'>%s</td>" % (" none" if c[6].startswith("none")
                                                       else "", esc(c[6])))
        else:
            cells.append("<td class=t colspan=7>%s</td>" % esc(r["text"]))
        out.append("<tr data-bench='%s' data-value='%s'>%s</tr>" % (
            esc(b), esc(r["value"]), "".join(cells)))
    out.append("</table>")
    return "\n".join(out)


def level_table_html(cols, rows, klass):
    out = ["<table class=%s>" % klass, th_row(cols)]
    for label, cells, is_host in rows:
        tds = "".join("<td class='n%s'>%s</td>" % (" knee" if c.startswith("◀") else "", esc(c))
                      for c in cells)
        out.append("<tr%s><td class=l>%s</td>%s</tr>" % (" class=host" if is_host else "",
                                                         esc(label), tds))
    out.append("</table>")
    return "\n".join(out)


def hosts_html(meta):
    """The hosts of a multi-host run (meta "hosts"), '' for a run on one machine."""
    hs = meta.get("hosts")
    if not hs:
        return ""
    items = []
    for h in hs:
        if isinstance(h, dict):
            rest = ", ".join("%s %s" % (k, v) for k, v in sorted(h.items()) if k != "name")
            items.append("<li><b>%s</b>%s</li>" % (esc(h.get("name", "?")),
                                                   (": " + esc(rest)) if rest else ""))
        else:
            items.append("<li>%s</li>" % esc(h))
    return ("<p>A run over %d hosts; in the short-lived and open-loop tables each level's "
            "merged figure is followed by a row (grey) per host whose load it merges.</p>"
            "<ul>%s</ul>" % (len(hs), "".join(items)))


def report_html(meta, summary, figs, problems, warning="", hosts=None, extra_css=""):
    """The whole report.html.  figs: {'growing': html, 'short-lived': html,
    'open-loop': html}: the inline plots of each section."""
    stops = []
    for b, st in sorted(summary.get("_status", {}).items(), key=lambda x: bench_order(x[0])):
        notes = sorted({x["note"] for x in st if x.get("note")})
        if len(notes) == 1:
            stops.append("<li><b>%s</b>: %s (%s)</li>" % (
                esc(b), esc(notes[0]), "every run" if all(x.get("note") for x in st) else
                "%d of %d runs" % (sum(1 for x in st if x.get("note")), len(st))))
        elif notes:
            stops.append("<li><b>%s</b>: %s<details><summary>each run</summary><ul>%s</ul>"
                         "</details></li>" % (esc(b), esc(limit_text(b, summary)), "".join(
                             "<li>%s</li>" % esc(n) for n in notes)))
    sl = "".join("<h3>%s</h3>%s" % (esc(b), level_table_html(
        SHORT_COLS, short_rows(summary, b, hosts), "levels"))
        for b in level_benches(summary, "short-lived"))
    ol = "".join("<h3>%s: %s</h3>%s%s" % (esc(b), esc(knee_text(knee_of(summary, b))),
                                           (figs.get("open-loop") or {}).get(b, ""),
                                           level_table_html(OPEN_COLS,
                                                            open_rows(summary, b, hosts),
                                                            "levels"))
                 for b in level_benches(summary, "open-loop"))
    runs = meta.get("runs", 5)
    return """<!doctype html><html><head><meta charset="utf-8"><title>bench/run %(suite)s</title>
<style>%(css)s</style></head><body>
<h1>gatling kernel benchmark suite: %(suite)s</h1>
%(warning)s<p>%(kernel)s, %(cpu)s, %(cores)s cores; IO backend %(backend)s; %(date)s;
%(runs)s runs per benchmark.</p>%(hosts)s
<h2>Benchmarks</h2>
%(lead)s
<p class=rule>Median and p99 over all samples of all runs; spread: (max − min) / median of
the per-run medians.  Class: a least-squares line through the medians of ten bins of N;
O(1) when it rises by less than half its starting value over the range of N, O(n)
otherwise; a step when the medians are flat and then jump by more than 3× to a level
that stays (a cliff, not a cost growing with N).  Stopped by: the limit that ended the
runs before their N (all of them: "Limits met" below).</p>
%(short_h)s
%(open_h)s
<h2>Limits met</h2><ul>%(stops)s</ul>
%(problems)s
<h2>Plots</h2><p>Every sample of every run, the runs overlaid; linear and log scale.</p>
%(plots)s
<h2>Machine</h2><pre>%(meta)s</pre>
</body></html>
""" % {"suite": esc(meta.get("suite", "")), "css": CSS + extra_css, "warning": warning,
       "kernel": esc(meta.get("kernel", "?")), "cpu": esc(meta.get("cpu", "?")),
       "cores": meta.get("cores") or "?", "backend": esc(meta.get("backend", "?")),
       "date": esc(meta.get("date", "?")), "runs": esc(runs), "hosts": hosts_html(meta),
       "lead": lead_html(summary, hosts),
       "short_h": ("<h2>Short-lived connections</h2><p>One request per connection, each level "
                   "held for its duration; medians over the runs.</p>%s%s" % (
                       sl, figs.get("short-lived", ""))) if sl else "",
       "open_h": ("<h2>Open loop: latency against offered rate</h2><p>A fixed offered rate "
                  "over 50 keep-alive connections, latency counted from when each request "
                  "was due, medians over the runs; %s.</p>%s" % (esc(KNEE_RULE), ol))
       if ol else "",
       "stops": "".join(stops) or "<li>none</li>",
       "problems": ("<h2>Problems</h2><ul>%s</ul>" % "".join(
           "<li>%s</li>" % esc(p) for p in problems)) if problems else "",
       "plots": figs.get("growing", ""),
       "meta": esc(json.dumps(meta, indent=1, sort_keys=True))}


# -- compare --------------------------------------------------------------------------------

def verdict(ratio, band, higher_better):
    if ratio != ratio:
        return "-"
    if abs(ratio - 1) <= band:
        return "same"
    better = ratio > 1 if higher_better else ratio < 1
    return "better" if better else "worse"


def compare_pair(x, y):
    """(ratio B/A, noise band, verdict) of two summary entries of one key."""
    if x["median"] == 0:  # errors: 0 against 0 is the same, anything against 0 worse
        r = 1.0 if y["median"] == 0 else float("inf")
    else:
        r = y["median"] / x["median"]
    band = max([0.05] + [n for n in (noise(x["per_run_median"]), noise(y["per_run_median"]))
                         if n == n])
    return r, band, verdict(r, band, x["metric"] in RATES)


def cls_short(fit):
    if not fit:
        return "-"
    if fit.get("class") == "step":
        return "step at N = %s" % count(fit["step_at"])
    return fit.get("class", "-")


COMPARE_COLS = ["benchmark", "value", "A", "B", "B/A", "noise", "verdict", "class A → B"]


def compare_lead(sa, sb):
    """The compare report's first table: [(bench, value, A, B, ratio, noise, verdict,
    class)]: the N-growing benchmarks per value, then one row per short-lived series
    (req/s at the highest level both measured) and per open-loop series (the knee)."""
    rows = []
    keys = [k for k, s in entries(sa) if k in sb and s.get("level") is None]
    keys.sort(key=lambda k: (bench_order(sa[k]["bench"]), sa[k]["metric"]))
    for k in keys:
        x, y = sa[k], sb[k]
        r, band, v = compare_pair(x, y)
        fa, fb = x.get("fit") or {}, y.get("fit") or {}
        if fa.get("class") == fb.get("class") == "step":
            at = span(fa["step_at"], fb["step_at"], count)
            cls = "step at N = %s" % at.replace("–", " → ")
        else:
            ca, cb = cls_short(fa), cls_short(fb)
            cls = ca if ca == cb else "%s → %s" % (ca, cb)
        rows.append((x["bench"], x["metric"], dur(x["median"]), dur(y["median"]), times(r),
                     pct(band), v, cls))
    for b in level_benches(sa, "short-lived"):
        la, lb = levels(sa, b), levels(sb, b)
        common = [lv for lv in la if lv in lb and "req_per_s" in la[lv] and
                  "req_per_s" in lb[lv]]
        if common:
            lv = max(common)
            r, band, v = compare_pair(la[lv]["req_per_s"], lb[lv]["req_per_s"])
            rows.append((b, "req/s at %s connections" % count(lv),
                         rate(la[lv]["req_per_s"]["median"]),
                         rate(lb[lv]["req_per_s"]["median"]), times(r), pct(band), v, ""))
    for b in level_benches(sa, "open-loop"):
        if not levels(sb, b):
            continue
        ka, kb = knee_of(sa, b), knee_of(sb, b)
        ra, rb = (ka or {}).get("rate"), (kb or {}).get("rate")
        r = rb / ra if ra and rb else float("nan")
        v = "-" if r != r else "same" if r == 1 else "better" if r > 1 else "worse"
        rows.append((b, "knee (offered rate)", rate(ra), rate(rb), times(r),
                     "one doubling", v, ""))
    return rows


def compare_levels(sa, sb, kind, metrics):
    """[(bench, level, [(metric, A, B, ratio, verdict)])] for the levels both measured."""
    out = []
    for b in level_benches(sa, kind):
        la, lb = levels(sa, b), levels(sb, b)
        for lv in la:
            if lv not in lb:
                continue
            cells = []
            for m in metrics:
                if m in la[lv] and m in lb[lv]:
                    r, band, v = compare_pair(la[lv][m], lb[lv][m])
                    both0 = la[lv][m]["median"] == lb[lv][m]["median"] == 0
                    cells.append((m, value(m, la[lv][m]["median"]),
                                  value(m, lb[lv][m]["median"]), "-" if both0 else times(r), v))
                else:
                    cells.append((m, "-", "-", "-", "-"))
            out.append((b, lv, cells))
    return out


SHORT_CMP = ["req_per_s", "latency_p99", "errors"]
OPEN_CMP = ["achieved_per_s", "latency_p50", "latency_p99", "errors"]
NAMES = {"req_per_s": "req/s", "achieved_per_s": "achieved", "latency_p50": "p50",
         "latency_p99": "p99", "errors": "errors", "latency_mean": "mean"}


def compare_text(sa, sb, name_a, name_b):
    lines = ["A = %s, B = %s" % (name_a, name_b), ""]
    lines += text_table(COMPARE_COLS, [list(r) for r in compare_lead(sa, sb)],
                        left=(0, 1, 6, 7))
    for kind, metrics, lab in (("short-lived", SHORT_CMP, "connections"),
                               ("open-loop", OPEN_CMP, "offered")):
        rows = compare_levels(sa, sb, kind, metrics)
        if not rows:
            continue
        hdr = [kind, lab]
        for m in metrics:
            hdr += ["%s A" % NAMES[m], "B", "B/A", ""]
        lines += [""] + text_table(hdr, [[b, count(lv)] + [x for c in cells for x in c[1:]]
                                         for b, lv, cells in rows])
    return "\n".join(lines)


def compare_html(sa, sb, name_a, name_b, ma, mb, figs, warning=""):
    lead = ["<table class=lead>", th_row(COMPARE_COLS, left=(0, 1, 6, 7))]
    for r in compare_lead(sa, sb):
        lead.append("<tr data-bench='%s' data-value='%s'><td class=l><b>%s</b></td>"
                    "<td class=l>%s</td>%s<td class='l %s'>%s</td><td class=l>%s</td></tr>" % (
                        esc(r[0]), esc(r[1]), esc(r[0]), esc(r[1]),
                        "".join("<td class=n>%s</td>" % esc(c) for c in r[2:6]),
                        r[6], esc(r[6]), esc(r[7])))
    lead.append("</table>")
    sections = []
    for kind, metrics, lab, title in (
            ("short-lived", SHORT_CMP, "connections", "Short-lived connections"),
            ("open-loop", OPEN_CMP, "offered", "Open loop: latency against offered rate")):
        rows = compare_levels(sa, sb, kind, metrics)
        if not rows:
            continue
        t = ["<table class=levels><tr><th class=l rowspan=2>series</th>"
             "<th class=l rowspan=2>%s</th>%s</tr><tr>%s</tr>" % (
                 lab, "".join("<th colspan=4>%s</th>" % NAMES[m] for m in metrics),
                 "<th>A</th><th>B</th><th>B/A</th><th class=l>verdict</th>" * len(metrics))]
        for b, lv, cells in rows:
            t.append("<tr><td class=l>%s</td><td class=n>%s</td>%s</tr>" % (
                esc(b), count(lv), "".join(
                    "<td class=n>%s</td><td class=n>%s</td><td class=n>%s</td>"
                    "<td class='l %s'>%s</td>" % (esc(a), esc(bb), esc(r), v, esc(v))
                    for _, a, bb, r, v in cells)))
        t.append("</table>")
        sections.append("<h2>%s</h2>%s%s" % (title, figs.get(kind, ""), "".join(t)))
    return """<!doctype html><html><head><meta charset="utf-8"><title>bench/run compare</title>
<style>%s</style></head><body><h1>bench/run compare: %s (A) against %s (B)</h1>
%s<p>Ratio B/A of the medians; the noise band is the larger run-to-run spread of the two
sides (at least 5%%): a ratio inside it is "same".  For latencies lower is better, for rates
higher.  The knee of the open loop (%s) moves by doublings of the offered rate.</p>
<h2>Benchmarks</h2>%s
%s
<h2>Plots (A blue, B red, every run)</h2>%s
<h2>A</h2><pre>%s</pre><h2>B</h2><pre>%s</pre></body></html>
""" % (CSS, esc(name_a), esc(name_b), warning, esc(KNEE_RULE), "\n".join(lead),
       "\n".join(sections), figs.get("growing", ""),
       esc(json.dumps(ma, indent=1, sort_keys=True)), esc(json.dumps(mb, indent=1,
                                                                       sort_keys=True)))
