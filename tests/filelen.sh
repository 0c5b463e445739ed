#!/bin/sh
# filelen.sh — name the C files longer than a limit (STYLE, "Layout": a file
# holds one subject, at most 900 lines; funclen.sh is its rule for functions).
#
#   tests/filelen.sh [-n LIMIT] [FILE...]    (default: 900, and every .c under
#                                             io/ and gatling/)
# Prints file: N lines for each one over; exit status 1 if any.
limit=900
if [ "$1" = -n ]; then limit=$2; shift 2; fi
if [ $# -eq 0 ]; then
    cd "$(dirname "$0")/.." || exit 2
    set -- $(find io gatling -name '*.c' | sort)
fi
awk -v limit="$limit" '
    FNR == 1 && NR > 1 { check() }
    { name = FILENAME; n = FNR }
    function check() {
        if (n > limit) {
            printf "%s: %d lines (over %d: move whole functions to a new file)\n", name, n, limit
            bad = 1
        }
    }
    END { if (NR) check(); exit bad }
' "$@"
