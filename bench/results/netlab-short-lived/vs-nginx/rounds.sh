#!/bin/sh
# gatling -W 2 against nginx (2 workers, reuseport, backlog 4096) in the lab, alternating
set -e
cd /work/wt-netlab
for r in 1 2; do
  for s in gatling nginx; do
    cat /proc/loadavg > /tmp/nl2-load-$s-r$r.txt
    bench/multihost --httpd $s -c 1000,10000,30000 -n 5x --min-requests 30000 -W 2 \
        -o bench/results/netlab-short-lived/vs-nginx/$s-round$r > /tmp/nl2-$s-r$r.out 2>&1
  done
done
