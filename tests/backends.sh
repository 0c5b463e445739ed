#!/bin/sh
# Print the IO backends that build on this host, best first.
cc=${1:-cc}
has() { printf '#include <%s>\n' "$1" | $cc -E -x c - >/dev/null 2>&1; }
out=
has sys/epoll.h && out="$out epoll"
has sys/event.h && out="$out kqueue"
out="$out poll"
echo $out
