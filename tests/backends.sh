#!/bin/sh
# Print the IO backends that build (and, where that can fail, run) on this
# host, best first; `make check` runs the whole suite once per name printed.
#   epoll   <sys/epoll.h>
#   kqueue  <sys/event.h>
#   uring   liburing's headers and library, and a ring the kernel lets us set
#           up (io_uring can be compiled in but disabled by sysctl or seccomp)
#   sigio   F_SETSIG realtime signals (Linux)
#   poll    always
cc=${1:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gio-probe.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

has() { printf '#include <%s>\n' "$1" | $cc -E -x c - >/dev/null 2>&1; }

# compiles "$1" (a C program) with "$2" (libraries) and runs it
runs() {
    printf '%s\n' "$1" >"$tmp/p.c" &&
        $cc -o "$tmp/p" "$tmp/p.c" $2 >/dev/null 2>&1 && "$tmp/p" >/dev/null 2>&1
}

uring_probe='#include <liburing.h>
int main(void)
{
    struct io_uring r;
    struct io_uring_cqe *c;
    if (io_uring_queue_init(8, &r, 0) < 0)
        return 1;
    io_uring_prep_nop(io_uring_get_sqe(&r));
    int ok = io_uring_submit_and_wait(&r, 1) == 1 && io_uring_peek_cqe(&r, &c) == 0;
    io_uring_queue_exit(&r);
    return !ok;
}'

sigio_probe='#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
int main(void) { return F_SETSIG == 0 || F_OWNER_TID < 0 || SIGRTMIN <= 0; }'

out=
has sys/epoll.h && out="$out epoll"
has sys/event.h && out="$out kqueue"
runs "$uring_probe" -luring && out="$out uring"
runs "$sigio_probe" && out="$out sigio"
out="$out poll"
echo $out
