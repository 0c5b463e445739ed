#!/bin/sh
# 8 KiB and 16 KiB objects at 30,000 short-lived connections: gatling -W 2 against nginx, alternating
set -e
cd /work/wt-netlab
for r in 1 2; do
  for size in 8192 16384; do
    for s in gatling nginx; do
      bench/multihost --httpd $s --size $size -c 30000 -n 5x -W 2 \
          -o bench/results/netlab-short-lived/sizes/$s-$size-round$r > /tmp/nl3-$s-$size-r$r.out 2>&1
    done
  done
done
