#!/bin/sh
# funclen.sh — name the C functions longer than a limit (STYLE, "Layout": a
# function fits on a screen, at most 80 lines), counted from the opening to the
# closing brace.
#
#   tests/funclen.sh [-n LIMIT] [FILE...]    (default: 80, and every .c/.h under
#                                             io/ and gatling/)
# Prints file:line: name: N lines for each one over; exit status 1 if any.
# It relies on the tree's style (.clang-format, BreakBeforeBraces: Linux): a
# function body opens with "{" alone in column 0 and closes with "}" in column 0;
# the name is the last "name(" that starts a line in column 0 before the brace.
limit=80
if [ "$1" = -n ]; then limit=$2; shift 2; fi
if [ $# -eq 0 ]; then
    cd "$(dirname "$0")/.." || exit 2
    set -- $(find io gatling -name '*.[ch]' | sort)
fi
awk -v limit="$limit" '
    FNR == 1 { name = ""; start = 0 }
    /^[A-Za-z_].*\(/ && !/;[ \t]*$/ {
        s = $0; sub(/\(.*/, "", s); n = split(s, w, /[ \t*]+/); name = w[n]
    }
    /^\{/ { start = FNR; fn = name }
    /^\}/ && start {
        if (FNR - start + 1 > limit) {
            printf "%s:%d: %s: %d lines\n", FILENAME, start, fn, FNR - start + 1
            bad = 1
        }
        start = 0
    }
    END { exit bad }
' "$@"
