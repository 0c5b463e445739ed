#!/bin/sh
# schedprobe.sh SERVER ATTACKER-MODE OUTDIR: where do the normal clients' ~4.5 ms come from?
# One server (gatling or nginx, CPU 0, loopback), bench -c 50 -k -R 10000 (CPU 1) for 5 s quiet,
# then slowhttptest's slowloris (1,000 connections, as bench/slashdot runs it) and the same bench
# again, with `perf sched record` on CPU 1 and /proc/softirqs, /proc/stat around each run.
# ATTACKER-MODE: nice19 (bench/slashdot's: taskset -c 1 nice -n 19), idle (taskset -c 1
# chrt -i 0: SCHED_IDLE), cpu0 (taskset -c 0 nice -n 19: beside the server).
# BENCH=PATH picks the bench binary (default build/epoll/bench).  Run from the repo root after make.  Bounded: every process is ended by its pid.
set -eu
srv=$1 mode=$2 out=$3
mkdir -p "$out"; out=$(cd "$out" && pwd)
root=$(mktemp -d /tmp/schedprobe.XXXXXX); chmod 755 "$root"
head -c 1024 /dev/urandom > "$root/1k.bin"
port=18$(( $$ % 900 + 100 ))
if [ "$srv" = gatling ]; then
    taskset -c 0 ./gatling/gatling -i 127.0.0.1 -p "$port" -n -T 600 -s 600 -c "$root" \
        > "$out/server.log" 2>&1 &
else
    mkdir -p "$root/ng/tmp"
    cat > "$root/ng/nginx.conf" <<NG
daemon off; master_process off; worker_processes 1; user nobody nogroup;
worker_rlimit_nofile 20000; pid $root/ng/nginx.pid; error_log $root/ng/error.log warn;
events { use epoll; worker_connections 19000; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_timeout 600s;
  keepalive_requests 1000000000; client_header_timeout 600s; send_timeout 600s;
  client_body_temp_path $root/ng/tmp/cb; proxy_temp_path $root/ng/tmp/p;
  fastcgi_temp_path $root/ng/tmp/f; uwsgi_temp_path $root/ng/tmp/u; scgi_temp_path $root/ng/tmp/s;
  types { application/octet-stream bin; } default_type application/octet-stream;
  server { listen 127.0.0.1:$port backlog=4096; root $root; } }
NG
    taskset -c 0 nginx -p "$root/ng/" -e "$root/ng/error.log" -c "$root/ng/nginx.conf" \
        > "$out/server.log" 2>&1 &
fi
spid=$!
cleanup() { [ -n "${apid:-}" ] && kill "$apid" 2>/dev/null; kill "$spid" 2>/dev/null; sleep 0.3; rm -rf "$root"; }
trap cleanup EXIT
sleep 1
url=http://127.0.0.1:$port/1k.bin
curl -sf -o /dev/null "$url"
run() {  # run NAME: bench under perf sched (CPU 1 only: lighter), softirqs and stat around it
    cat /proc/softirqs > "$out/$1.softirqs0"; grep '^cpu' /proc/stat > "$out/$1.stat0"
    taskset -c 1 "${BENCH:-./build/epoll/bench}" -q -J -c 50 -k -R 10000 -d 5 -t 10 "$url" \
        > "$out/$1.bench.json" &
    bpid=$!
    echo "$bpid" > "$out/$1.bench.pid"
    timeout 30 perf sched record -C 1 -o "$out/$1.perf.data" -- sleep 5 2> "$out/$1.perf.err"
    wait "$bpid"
    cat /proc/softirqs > "$out/$1.softirqs1"; grep '^cpu' /proc/stat > "$out/$1.stat1"
}
run quiet
case $mode in
    nice19) pre="taskset -c 1 nice -n 19" ;;
    idle)   pre="taskset -c 1 chrt -i 0" ;;
    cpu0)   pre="taskset -c 0 nice -n 19" ;;
esac
$pre slowhttptest -H -i 10 -x 24 -t GET -c 1000 -r 500 -p 3 -l 40 -u "$url" \
    > "$out/slowhttptest.out" 2>&1 &
apid=$!
echo "$apid" > "$out/attacker.pid"
sleep 4
echo "server holds $(ls -l /proc/$spid/fd 2>/dev/null | grep -c socket) sockets" > "$out/held.txt"
run attack
kill -INT "$apid"; wait "$apid" 2>/dev/null || true; apid=
echo "$srv $mode: done"
