#!/usr/bin/env python3
"""The include layering of gatling/: every folder's README says, on a line
"May include: a, b, c", which other folders its files may include headers
from (its own always; io/ none of gatling's; only folders below it in gatling/LAYERS,
so that no two folders include each other); this checks every #include "..."
in gatling/ and io/ against it, and that no handler includes the connection's header; and that no
two files call each other, directly or round a longer circle (below).

    python3 tests/layers.py [--make-dirs "DIRS"] [ROOT]   (ROOT: the tree, default: here)

The layers, top to bottom, are the one list gatling/LAYERS.  make layers
passes the folders gatling/gatling.mk compiles as --make-dirs: they must be
that list's (a folder compiled but not checked, or listed but not built,
fails).

Prints each violation as file:line and exits 1 if there is one.  An include
is resolved the way the build does it: "site/fcache.h" names its folder
(-Igatling); a bare "x.h" is the including file's folder first, then io/
(-Iio), then wherever in gatling/ such a header is (what the unit tests'
-I flags would find; a bare name from another folder is still a use of it).

No circles: a file here is a .c with its .h (a header with no .c of its own
is read through: who includes it includes what it includes).  File A points
to file B when A includes B's header or names a function or variable B
defines (not static: a simple parse of the sources, comments and strings
left out).  A circle (A -> B -> ... -> A) is reported with its arrows and
why each is there; the cure is a third file both use, or a table of
functions the lower file fills and the upper one calls (handlers/proxy_int.h,
ftp/ftp_sess.h).

Every map true: each .c and .h of a folder in gatling/LAYERS or MAPS is named in
that folder's README (a .c and its .h are one file here too: naming either
names both, as "gio_batch.h/.c" or "router.c" do).  A folder under gatling/
that holds C files but is not in gatling/LAYERS is named too: its includes go
unchecked until it is added, with its README and its "May include:" line.

bench/'s Python drivers share code through one package, bench/benchkit: no
driver loads another (importlib, runpy, exec), and benchkit is the only
module of bench/ they import (check_bench_drivers).  Of tests/integration
(the folder a driver may put on sys.path) they import the labs only, LABS
(Pebble and its DNS, a whole cluster: a world a test and a benchmark both
stand up); a lab imports no driver (benchkit, the package the suite shares
too, it may), and benchkit imports nothing of the suite, so that no import
runs back round (check_labs): any other module of the suite a driver
imports fails, by its name, wherever it is.
"""
import os
import re
import sys

sys.setrecursionlimit(10000)

# top to bottom; process/ (gatling/process: main, the loop) is the top folder,
# io/ is below them all; gatling/ itself holds no C file:
# read from the one list, gatling/LAYERS (main: from ROOT's copy), which the
# makefile compiles (gatling/gatling.mk) and the docs cite
LAYERS = os.path.join("gatling", "LAYERS")
FOLDERS = {}


def read_layers(root):
    """gatling/LAYERS: name -> path, top to bottom (a line: name, path, what it
    holds; '#' starts a comment)."""
    path = os.path.join(root, LAYERS)
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        sys.exit("layers: %s is missing: the one list of the layers" % LAYERS)
    out = {}
    for n, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 2 or words[0] in out or not re.fullmatch(r"[a-z][a-z0-9]*", words[0]):
            sys.exit("layers: %s:%d: want a new folder's name and its path" % (LAYERS, n))
        out[words[0]] = os.path.normpath(words[1])
    if list(out)[:1] != ["process"] or list(out)[-1:] != ["io"]:
        sys.exit("layers: %s: process/ (the process: main, the loop) comes first and io/ "
                 "last" % LAYERS)
    return out


# folders outside gatling/ held to the same rules: each includes from itself
# and the folders listed (never gatling/), and no two of its files call each
# other (bench/lg/README, bench/kb/README); checked where they exist
OTHERS = {"bench/lg": ["io"], "bench/kb": []}
# folders outside the layering whose README still maps every file (checked
# where they exist: a copy of gatling/ and io/ alone has none of them)
MAPS = ["bench/lg", "bench/kb", "bench/gio", "bench/ref"]
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)
RULE = re.compile(r"^May include:(.*)$", re.M)


def allowed(root, name):
    """The folders `name` may include from, from its README's rule."""
    if name == "io":  # io/ knows nothing of HTTP (STYLE, "Structure"): this script's rule
        return {"io"}
    path = os.path.join(root, FOLDERS[name], "README")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError:
        sys.exit("layers: %s has no README" % FOLDERS[name])
    m = RULE.search(text)
    if not m:
        sys.exit('layers: %s/README has no "May include:" line' % FOLDERS[name])
    words = re.findall(r"[a-z][a-z0-9]*", m.group(1))
    return {w for w in words if w in FOLDERS} | {name}


def headers(root):
    """Header file name -> the folders it is in."""
    where = {}
    for name, rel in FOLDERS.items():
        d = os.path.join(root, rel)
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.endswith(".h"):
                where.setdefault(f, []).append(name)
    return where


def resolve(inc, me, where):
    """The folder the include names, or None (a system or generated header)."""
    if "/" in inc:
        first = inc.split("/", 1)[0]
        return first if first in FOLDERS and first not in ("gatling", "io") else None
    found = where.get(inc, [])
    if me in found:
        return me
    if "io" in found:
        return "io"
    return found[0] if found else None


def check(root):
    where = headers(root)
    rules = {name: allowed(root, name) for name in FOLDERS}
    bad = []
    order = list(FOLDERS)
    for name in order:  # a rule names only folders below its own: no two folders both ways
        up = sorted(rules[name] - {name} - set(order[order.index(name) + 1:]))
        if up:
            bad.append("%s/README: May include names %s, not below it in %s"
                       % (FOLDERS[name], ", ".join(up), LAYERS))
    for name, rel in FOLDERS.items():
        d = os.path.join(root, rel)
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    to = resolve(m.group(1), name, where)
                    where_at = "%s/%s:%d" % (rel, f, n)
                    if name == "handlers" and os.path.basename(m.group(1)) == "conn.h":
                        bad.append("%s: a handler includes the connection's header (%s)"
                                   % (where_at, m.group(1)))
                    elif to and to not in rules[name]:
                        bad.append("%s: %s/ includes %s from %s/, which %s/README does not allow"
                                   % (where_at, name, m.group(1), to, rel))
    return bad


def named(text, f):
    """Whether a README's text names the file f: the whole name, alone or at
    the end of a path (conn/h2.c), not inside a longer one (ftp_h2.c)."""
    return re.search(r"(?<![\w.-])" + re.escape(f) + r"(?!\w)", text) is not None


def check_readmes(root):
    """Every .c/.h a folder's README leaves out, as lines to print."""
    bad = []
    for rel in list(FOLDERS.values()) + MAPS:
        d = os.path.join(root, rel)
        if rel in MAPS and not os.path.isdir(d):
            continue
        files = [f for f in sorted(os.listdir(d)) if f.endswith((".c", ".h"))]
        try:
            text = open(os.path.join(d, "README"), encoding="utf-8").read()
        except OSError:
            if files:
                bad.append("%s/ has no README to name its files" % rel)
            continue
        missing = []
        for f in files:
            partner = f[:-1] + ("h" if f.endswith(".c") else "c")
            if not named(text, f) and not (partner in files and named(text, partner)):
                missing.append(f)
        if missing:
            bad.append("%s/README does not name %s" % (rel, ", ".join(missing)))
    return bad


def unknown_folders(root):
    """Folders under gatling/ with C files that FOLDERS does not list."""
    known = {os.path.normpath(rel) for rel in FOLDERS.values()}
    out = []
    for d, subdirs, files in os.walk(os.path.join(root, "gatling")):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
        rel = os.path.relpath(d, root)
        if rel not in known and any(f.endswith((".c", ".h")) for f in files):
            out.append(rel)
    return out


TOKEN = re.compile(r'[A-Za-z_]\w*|[{}();=\[\]]')
NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
DIRECTIVE = re.compile(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', re.M)
NOT_DEFS = {"static", "extern", "typedef"}


def tokens(text):
    """The identifiers and the punctuation that matters of a C file, without
    comments, strings or preprocessor lines (an #include is read apart)."""
    text = NOISE.sub(lambda m: " " if m.group(0)[0] in "/" else '""', text)
    text = DIRECTIVE.sub("", text)
    return TOKEN.findall(text)


def definitions(toks):
    """The global (not static) functions and variables a .c file defines:
    at brace depth 0, a declaration with no static/extern/typedef that opens a
    body (a function: the name before its first '(') or has an initializer or
    ends (a variable: the name before '=', '[' or ';')."""
    out, stmt, depth = set(), [], 0
    for t in toks:
        if depth:
            depth += (t == "{") - (t == "}")
            if depth == 0 and stmt_kind == "body":
                stmt = []
            continue
        if t == "{":
            depth = 1
            stmt_kind = "init" if "=" in stmt else "body"
            if stmt_kind == "body" and "(" in stmt and not NOT_DEFS & set(stmt):
                i = stmt.index("(")
                if i and re.match(r"\w", stmt[i - 1]) and stmt[i - 1] != "__attribute__":
                    out.add(stmt[i - 1])
            if stmt_kind == "body" and "(" not in stmt:
                stmt_kind = "type"  # struct/enum/union ...: its ';' follows
            if stmt_kind == "body":
                stmt = []
            continue
        if t == ";":
            if stmt and not NOT_DEFS & set(stmt) and stmt[0] not in ("struct", "enum", "union") or \
                    (stmt and stmt[0] in ("struct", "enum", "union") and "=" in stmt
                     and not NOT_DEFS & set(stmt)):
                cut = len(stmt)
                for k, s in enumerate(stmt):
                    if s in ("=", "["):
                        cut = k
                        break
                head = stmt[:cut]
                if "(" not in head and head and re.match(r"\w", head[-1]):
                    out.add(head[-1])
            stmt = []
            continue
        stmt.append(t)
    return out


def sources(root, folders):
    """Every .c and .h of the folders: path relative to root."""
    out = []
    for rel in folders:
        d = os.path.join(root, rel)
        out += [os.path.join(rel, f) for f in sorted(os.listdir(d)) if f.endswith((".c", ".h"))]
    return out


def file_graph(root, folders, resolve_inc):
    """file -> {file: why}: a file is a .c with its .h (a header alone, with
    no .c, is not a file here: who includes it includes what it includes).
    An arrow: one includes the other's header, or names a function or
    variable the other defines."""
    paths = sources(root, folders)
    unit = {}
    for p in paths:
        stem = p[:-2]
        unit[p] = stem if (stem + ".c") in paths else None
    texts = {p: open(os.path.join(root, p), encoding="utf-8", errors="replace").read()
             for p in paths}
    toks = {p: tokens(texts[p]) for p in paths}
    owner = {}
    for p in paths:
        if p.endswith(".c"):
            for name in definitions(toks[p]):
                owner.setdefault(name, unit[p])
    incs = {p: [resolve_inc(p, m.group(1)) for m in INCLUDE.finditer(texts[p])] for p in paths}

    def reach(p, seen):
        """The files p's includes name, through headers that are no file."""
        out = {}
        for h in incs[p]:
            if not h or h in seen:
                continue
            seen.add(h)
            if unit.get(h):
                out.setdefault(unit[h], "includes %s" % os.path.basename(h))
            elif h in unit:
                for k, v in reach(h, seen).items():
                    out.setdefault(k, v)
        return out

    graph = {}
    for p in paths:
        me = unit[p]
        if not me:
            continue
        edges = graph.setdefault(me, {})
        for k, v in reach(p, {p}).items():
            if k != me:
                edges.setdefault(k, "%s %s" % (os.path.basename(p), v))
        for t in set(toks[p]):
            o = owner.get(t)
            if o and o != me:
                edges.setdefault(o, "%s names %s()" % (os.path.basename(p), t))
    return graph


def circles(graph):
    """The strongly connected parts of more than one file (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def include_path(root, where, rev, path, inc):
    """The file (relative to root) the include in path names, or None."""
    to = resolve(inc, rev[os.path.dirname(path)], where)
    if not to:
        return None
    dst = os.path.join(FOLDERS[to], os.path.basename(inc))
    return dst if os.path.exists(os.path.join(root, dst)) else None


def check_circles(root):
    """Every circle between files, as lines to print."""
    where = headers(root)
    rev = {rel: name for name, rel in FOLDERS.items()}
    graph = file_graph(root, list(FOLDERS.values()),
                       lambda path, inc: include_path(root, where, rev, path, inc))
    bad = []
    for part in circles(graph):
        bad.append("a circle between %s:" % ", ".join(f + ".c" for f in part))
        for a in part:
            for b, why in sorted(graph[a].items()):
                if b in part:
                    bad.append("    %s.c -> %s.c: %s" % (a, b, why))
    return bad


def check_others(root):
    """OTHERS: every include from the folder itself or the folders it may use,
    and no circle between the files of the folder (and those it uses)."""
    bad = []
    gatling_headers = headers(root)
    for rel, uses in OTHERS.items():
        if not os.path.isdir(os.path.join(root, rel)):
            continue
        dirs = [rel] + uses

        def find(path, inc, dirs=dirs):
            """The header a bare or folder-relative include names, or None (a
            system header; a .c included is part of the file that includes it)."""
            if not inc.endswith(".h"):
                return None
            for d in [os.path.dirname(path)] + dirs:
                cand = os.path.normpath(os.path.join(d, inc))
                if os.path.exists(os.path.join(root, cand)):
                    return cand
            return None

        for path in sources(root, [rel]):
            text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                if find(path, inc) is None and (inc.split("/", 1)[0] in FOLDERS
                                               or os.path.basename(inc) in gatling_headers):
                    n = text.count("\n", 0, m.start()) + 1
                    bad.append("%s:%d: %s/ includes %s from gatling/, which %s/README "
                               "does not allow" % (path, n, rel, inc, rel))
        graph = file_graph(root, dirs, find)
        for part in circles(graph):
            bad.append("a circle between %s:" % ", ".join(f + ".c" for f in part))
            for a in part:
                for b, why in sorted(graph[a].items()):
                    if b in part:
                        bad.append("    %s.c -> %s.c: %s" % (a, b, why))
    return bad


BENCH, BENCHKIT = "bench", "benchkit"  # the drivers, and the package they share
# ways one Python file runs another as a module: no driver may load a driver so
LOADS = re.compile(r"\b(load_driver|SourceFileLoader|spec_from_file_location|spec_from_loader|"
                   r"runpy|__import__|import_module|exec)\s*\(|\bimport\s+(importlib|runpy)\b")
IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w.]+))", re.M)
# what bench's drivers may import of tests/integration (with it on sys.path): the
# labs, and conftest, which puts the suite's folders on the path the labs import from
INTEGRATION = os.path.join("tests", "integration")
LABS = ("acmelab", "clusterlab", "conftest")


def suite_modules(root):
    """The modules and packages of tests/integration and its folders, by the name an
    import gives them (conftest puts every folder on the path): name -> path."""
    mods = {}
    top = os.path.join(root, INTEGRATION)
    for sub, dirs, names in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(names):
            if f.endswith(".py") and f != "__init__.py":
                mods.setdefault(f[:-3], os.path.relpath(os.path.join(sub, f), root))
        if sub != top and "__init__.py" in names:
            mods.setdefault(os.path.basename(sub), os.path.relpath(sub, root))
    return mods


def imports(text):
    """(line, top-level name) of each import in a Python file's text."""
    for m in IMPORT.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, (m.group(1) or m.group(2)).split(".")[0]


def check_labs(root, suite):
    """Each of LABS is in tests/integration, and a lab imports no driver of bench/
    (the drivers import it: an import back would be a circle)."""
    bad = []
    d = os.path.join(root, BENCH)
    ours = ({f[:-3] if f.endswith(".py") else f for f in os.listdir(d)} - {BENCHKIT}
            if os.path.isdir(d) else set())
    for lab in LABS:
        rel = suite.get(lab)
        if not rel:
            bad.append("%s: LABS names %s, which is not in %s" % ("tests/layers.py", lab,
                                                                 INTEGRATION))
            continue
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        for line, top in imports(text):
            if top in ours and top not in suite:
                bad.append("%s:%d: a lab imports %s of bench/: the drivers import the labs, "
                           "never the reverse (%s is shared)" % (rel, line, top, BENCHKIT))
    return bad


def check_bench_drivers(root):
    """bench/'s drivers (the Python scripts without a suffix) and bench/benchkit share code
    through the package only: none loads another driver (importlib, runpy, exec,
    load_driver), and the only module of bench/ they import is benchkit."""
    d = os.path.join(root, BENCH)
    if not os.path.isdir(d):
        return []
    files = []
    for f in sorted(os.listdir(d)):
        path = os.path.join(d, f)
        if "." in f or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            if "python" in fh.readline():
                files.append(os.path.join(BENCH, f))
    kit = os.path.join(d, BENCHKIT)
    for sub, dirs, names in os.walk(kit):  # the package and its own (benchkit/slashdot/)
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        files += [os.path.relpath(os.path.join(sub, f), root) for f in sorted(names)
                  if f.endswith(".py")]
    local = {f[:-3] if f.endswith(".py") else f for f in os.listdir(d)} - {BENCHKIT}
    if os.path.isdir(kit):  # `import benchlib`: the module was beside the drivers once
        local |= {f[:-3] for f in os.listdir(kit) if f.endswith(".py") and f != "__init__.py"}
    bad = []
    suite = suite_modules(root)
    kit_rel = os.path.join(BENCH, BENCHKIT) + os.sep
    if suite:
        bad += check_labs(root, suite)
    for rel in files:
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        for m in LOADS.finditer(text):
            bad.append("%s:%d: loads code by %s: a driver imports bench/%s, never another "
                       "driver" % (rel, text.count("\n", 0, m.start()) + 1,
                                   (m.group(1) or m.group(2)), BENCHKIT))
        for m in IMPORT.finditer(text):
            top = (m.group(1) or m.group(2)).split(".")[0]
            if top in local:
                bad.append("%s:%d: imports %s from bench/: only bench/%s is shared (from %s "
                           "import ...)" % (rel, text.count("\n", 0, m.start()) + 1, top,
                                            BENCHKIT, BENCHKIT))
            elif top in suite and (top not in LABS or rel.startswith(kit_rel)):
                bad.append("%s:%d: imports %s of %s (%s): a driver imports the labs only "
                           "(%s), %s none" % (rel, text.count("\n", 0, m.start()) + 1, top,
                                              INTEGRATION, suite[top], ", ".join(LABS),
                                              BENCHKIT))
    return bad


# Who chooses a site (issue 86): the route, once (handlers/host.c's host_of
# over site/vhost.h, called first by route/router.c); no other file under
# handlers/ or route/ calls vhost_open, vhost_name or vhost_route.  The Host
# field (HTTP/2's and 3's :authority) is read there only by the files that
# pass it on or that are the router's own checks, each named here with what
# it does with it: a new reader is a choice made again, and fails.
SITE_DIRS = ("gatling/handlers", "gatling/route")
SITE_CHOOSERS = re.compile(r"\b(vhost_open|vhost_name|vhost_route)\s*\(")
SITE_CHOOSER_FILES = {"gatling/handlers/host.c", "gatling/route/router.c"}
HOST_READ = re.compile(r'http_header(?:_count)?\s*\([^;]*?"Host"|":authority"')
HOST_READERS = {
    "gatling/route/router.c": "the router's checks: Host's, 421's, -X's",
    "gatling/handlers/cgienv.c": "passed on: CGI's HTTP_HOST and SERVER_NAME",
    "gatling/handlers/fields.c": "passed on: a backend's Host and X-Forwarded-Host",
    "gatling/handlers/proxy_h2.c": "passed on: an HTTP/2 backend's :authority",
    "gatling/handlers/proxy_check.c": "the health check's own request to a backend",
    "gatling/route/cache_entry.c": "the cache's key, after the site's name",
}
# The stages (the cache, --compress) wrap whatever producer answers: they ask
# the router, and name no producer (no include of one, no call of one).
STAGE = re.compile(r"^gatling/route/(cache\w*|compress)$")
PRODUCER = re.compile(r"^gatling/handlers/(proxy\w*|cgi\w*|static)$")


def check_site_choice(root):
    """A site chosen only by the route, Host read only where it is passed on,
    no stage naming a producer: lines to print."""
    bad = []
    for path in sources(root, [d for d in SITE_DIRS if os.path.isdir(os.path.join(root, d))]):
        raw = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
        code = NOISE.sub(lambda m: " " if m.group(0)[0] in "/" else m.group(0), raw)
        for m in SITE_CHOOSERS.finditer(NOISE.sub(" ", raw)):
            if path not in SITE_CHOOSER_FILES:
                bad.append("%s: calls %s: the site is the route's (ex->route.host, "
                           "handlers/host.h), chosen once" % (path, m.group(1)))
        for m in HOST_READ.finditer(code):
            if path not in HOST_READERS:
                n = code.count("\n", 0, m.start()) + 1
                bad.append("%s:%d: reads Host: the site is the route's (handlers/host.h); "
                           "a file that passes Host on is named in tests/layers.py's "
                           "HOST_READERS" % (path, n))
    where = headers(root)
    rev = {rel: name for name, rel in FOLDERS.items()}
    graph = file_graph(root, [d for d in SITE_DIRS if os.path.isdir(os.path.join(root, d))],
                       lambda path, inc: include_path(root, where, rev, path, inc))
    for a, edges in sorted(graph.items()):
        for b, why in sorted(edges.items()):
            if STAGE.match(a) and PRODUCER.match(b):
                bad.append("%s.c names a producer, %s.c (%s): a stage asks the router "
                           "(router_produced, router_produce)" % (a, b, why))
    return bad


def check_make(dirs):
    """--make-dirs: the folders the makefile compiles (gatling.mk's GATLING_DIRS)
    are LAYERS' above io/, no more, no fewer."""
    want = [n for n in FOLDERS if n != "io"]
    if sorted(dirs.split()) == sorted(want):
        return []
    return ["gatling/gatling.mk compiles %s, %s lists %s" % (" ".join(sorted(dirs.split())),
                                                             LAYERS, " ".join(sorted(want)))]


def main():
    args = sys.argv[1:]
    make_dirs = None
    if args[:1] == ["--make-dirs"] and len(args) > 1:
        make_dirs, args = args[1], args[2:]
    root = args[0] if args else "."
    FOLDERS.update(read_layers(root))
    bad = (check(root) + check_circles(root) + check_others(root) + check_readmes(root)
           + check_bench_drivers(root) + check_site_choice(root))
    if make_dirs is not None:
        bad += check_make(make_dirs)
    for b in bad:
        print("layers: " + b)
    for rel in unknown_folders(root):
        # a note, not a failure, while a branch adds a folder piece by piece
        print("layers: note: %s/ holds C files but is not in %s: its includes and "
              "README go unchecked" % (rel, LAYERS))
    if bad:
        return 1
    print("layers: %d folders and %s, every include goes down, no circle between files, "
          "every file named in its folder's README; bench's drivers share code through "
          "bench/%s only, and of %s import its labs only" % (len(FOLDERS), ", ".join(OTHERS),
                                                             BENCHKIT, INTEGRATION))
    return 0


if __name__ == "__main__":
    sys.exit(main())
