#!/bin/sh
# the rounds behind bench/results/netlab-short-lived (alternating -W 2 and -W 1)
set -e
cd /work/wt-netlab
for r in 1 2; do
  for w in 2 1; do
    cat /proc/loadavg > /tmp/nl-load-w$w-r$r.txt
    bench/multihost -c 1000,5000,10000,20000,30000 -n 5x --min-requests 30000 -W $w \
        -o bench/results/netlab-short-lived/w$w-round$r > /tmp/nl-w$w-r$r.out 2>&1
    cat /proc/loadavg >> /tmp/nl-load-w$w-r$r.txt
  done
done
