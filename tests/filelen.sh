#!/bin/sh
# filelen.sh — name the C files longer than a limit (STYLE, "Layout": a file
# holds one subject, at most 900 lines; funclen.sh is its rule for functions).
#
#   tests/filelen.sh [-n LIMIT] [FILE...]    (default: 900, and every .c under
#                                             io/, gatling/, bench/ and tests/)
# Prints file: N lines for each one over; exit status 1 if any.
case $1 in
-n) limit=$2 && shift 2 ;;
*) limit=900 ;;
esac
[ $# -gt 0 ] || { cd "$(dirname "$0")/.." && set -- $(find io gatling bench tests -name '*.c' | sort); } || exit 2
# wc's total line is left out by its place (last, when there are two files or more)
wc -l "$@" | awk -v limit="$limit" -v files=$# '
    NR <= files && $1 > limit {
        printf "%s: %d lines (over %d: move whole functions to a new file)\n", $2, $1, limit
        bad = 1
    }
    END { exit bad }
'
