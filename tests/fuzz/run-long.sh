#!/bin/sh
# Long fuzzing runs in the background, one harness after another, on one CPU:
#   sh tests/fuzz/run-long.sh CPU "fuzz_head:1800 fuzz_te:900 ..."
# Logs go to build/fuzz/<harness>.log; a summary line per harness to
# build/fuzz/long.txt.  Crashes stop nothing: they are listed at the end.
set -u
cd "$(dirname "$0")/../.."
cpu=${1:-1}
make --no-print-directory fuzz-build >/dev/null || exit 1
: >build/fuzz/long.txt
for item in $2; do
    name=${item%%:*} secs=${item##*:}
    start=$(date -u +%FT%TZ)
    if taskset -c "$cpu" make --no-print-directory fuzz FUZZ_ONLY="$name" FUZZ_SECS="$secs" \
        >build/fuzz/$name.long 2>&1; then verdict=ok; else verdict=CRASH; fi
    execs=$(grep -a -o 'number_of_executed_units: [0-9]*' build/fuzz/$name.log | cut -d' ' -f2)
    echo "$name $secs s from $start on CPU $cpu: $verdict, $execs executions" >>build/fuzz/long.txt
done
