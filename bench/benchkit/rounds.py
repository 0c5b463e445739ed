"""The compare drivers' rounds and their medians.

Each compare-* driver measures its servers in alternating rounds (benchlib.rounds), each
round on a fresh server instance, so that drift on a shared machine spreads over all of
them; a round that fails is recorded as {"problem": why} and the others go on.  run_rounds
is that loop, the driver's own parts passed in (how to build, start and measure a server,
and how to show a round); medians is the table of medians over the rounds.
"""
from benchkit.benchlib import BenchError, log, median, rounds


def turns_of(n, names):
    """One name a turn, n alternating rounds (benchlib.rounds): [(round, [name])]."""
    return [(rnd, [name]) for rnd, name in rounds(n, names, alternate=True)]


def each(fn):
    """A measure for run_rounds from fn(server, phase) -> the round's dict."""
    return lambda started, phase: {name: fn(s, phase) for name, s in started}


def _turn(names, rnd, phase, make, prepare, measure, skipped, servers):
    """One turn in one phase: {name: round dict}.  Every server made is stopped."""
    made, started = [], []
    try:
        for name in names:
            s = make(name, rnd)
            made.append(s)
            why = prepare(s)
            if why:
                skipped[name] = why
                log(f"  skipped: {why}")
            else:
                servers[name] = s
                started.append((name, s))
        return measure(started, phase) if started else {}
    except BenchError as e:
        why = f"{phase}: {e}" if phase else str(e)
        return {name: {"problem": why} for name, _ in started} or \
            {name: {"problem": why} for name in names if name not in skipped}
    finally:
        for s in made:
            s.stop()


def run_rounds(turns, total, make, prepare, measure, show, phases=("",), after=None,
               skipped=None):
    """Every turn on fresh servers.  turns: [(round, [names])] (turns_of(), or several names
    measured at once); total: the number of rounds, for the log.  For each turn and each
    phase (h2 and h3: a "load" and an "idle" server), make(name, round) builds each name's
    server, not started (its stop() is called whatever happens); prepare(server) starts and
    checks it and returns None, or why the name is skipped from now on (into skipped, and
    logged); measure([(name, server)], phase) returns {name: the round's dict} (each() for
    one server at a time).  A BenchError from prepare or measure is each name's round
    {"problem": "PHASE: why"}.  after() runs at the end of each turn (are the backends
    alive?) and may raise.  Each round's dict gets its "round" (from 1), is shown
    (show(name, r)) and kept.  Returns ({name: [round dicts]} less the skipped names,
    {name: its last server prepared})."""
    skipped = {} if skipped is None else skipped
    samples = {name: [] for _, names in turns for name in names}
    servers = {}
    for rnd, names in turns:
        names = [name for name in names if name not in skipped]
        if not names:
            continue
        log(f"round {rnd + 1}/{total}: {', '.join(names)}")
        for phase in phases:
            rs = _turn(names, rnd, phase, make, prepare, measure, skipped, servers)
            if after:
                after()
            for name, r in rs.items():
                r["round"] = rnd + 1
                samples[name].append(r)
                show(name, r)
    return {name: rs for name, rs in samples.items() if name not in skipped}, servers


def check_alive(procs):
    """run_rounds' after for drivers with backends (Server objects): BenchError if one died."""
    for b in procs:
        if b.proc.poll() is not None:
            raise BenchError(f"the backend {b.name} died: {b.log_tail()}")


def medians(samples, keys, value):
    """{name: {key: the median over the name's rounds of value(round, key)}}: value gives a
    round's figure, None (none: left out), or a list (each counts: every page load)."""
    table = {}
    for name, rs in samples.items():
        row = {}
        for key in keys:
            vals = []
            for r in rs:
                v = value(r, key)
                vals += v if isinstance(v, list) else [v]
            row[key] = median(vals)
        table[name] = row
    return table
