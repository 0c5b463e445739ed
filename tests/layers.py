#!/usr/bin/env python3
"""The include layering of gatling/: every folder's README says, on a line
"May include: a, b, c", which other folders its files may include headers
from (its own always; io/ none of gatling's); this checks every #include "..." in gatling/ and io/
against it, and that no handler includes the connection's header.

    python3 tests/layers.py [ROOT]      (ROOT: the tree, default: here)

Prints each violation as file:line and exits 1 if there is one.  An include
is resolved the way the build does it: "site/fcache.h" names its folder
(-Igatling); a bare "x.h" is the including file's folder first, then io/
(-Iio), then wherever in gatling/ such a header is (what the unit tests'
-I flags would find; a bare name from another folder is still a use of it).
"""
import os
import re
import sys

# top to bottom; gatling/ itself is the top folder, io/ is below them all
FOLDERS = {
    "gatling": "gatling",
    "conn": "gatling/conn",
    "ftp": "gatling/ftp",
    "handlers": "gatling/handlers",
    "site": "gatling/site",
    "http": "gatling/http",
    "io": "io",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
RULE = re.compile(r"^May include:(.*)$", re.M)


def allowed(root, name):
    """The folders `name` may include from, from its README's rule."""
    if name == "io":  # io/ knows nothing of HTTP (DESIGN.md): a rule of this script's
        return {"io"}
    path = os.path.join(root, FOLDERS[name], "README")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError:
        sys.exit("layers: %s has no README" % FOLDERS[name])
    m = RULE.search(text)
    if not m:
        sys.exit('layers: %s/README has no "May include:" line' % FOLDERS[name])
    words = re.findall(r"[a-z]+", m.group(1))
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


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = check(root)
    for b in bad:
        print("layers: " + b)
    if bad:
        return 1
    print("layers: %d folders, every include goes down" % len(FOLDERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
