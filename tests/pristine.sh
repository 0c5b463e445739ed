#!/bin/sh
# The README's two commands on a machine nobody used (issue 91): a Debian minbase tree made
# with debootstrap from this machine's own apt source, entered with chroot (in a mount and
# PID namespace of its own: proc, sys and dev mounted there, every process it started ended
# with it) as root, the repository cloned into root's home (/root/gatling, 0700), then, as
# the README writes them, `make run` until it serves the demo over HTTP and HTTPS (stopped
# then) and `make check`.  Fails naming the command (and make check's failed tests); the
# tree is thrown away after, so nothing a test leaves (users, packages, files in root's
# home or /etc) can help the next run.  A job of `make check-all PRISTINE=1`.
#
#   sh tests/pristine.sh [--rev REV] [--check-for SECONDS] [--command 'CMD']
#
# --rev: the commit to clone (default HEAD, the submitted head; uncommitted changes are
# not in it).  --check-for: a trial: stop make check after SECONDS and say how far it got
# (exit 0 if nothing failed by then).  --command: CMD (sh, in /root/gatling) instead of
# make check, after make run (a deliberate trial: one test of an older commit).
# The tree: debootstrap --variant=minbase --include=git,make,ca-certificates (what a
# newcomer has before `git clone`), cached as build/pristine/debian-SUITE-KEY.tar.zst, KEY
# a hash of the suite, mirror, architecture, package list and debootstrap's version; it
# gets the machine's package-registry settings and nothing else: its apt sources and apt
# proxy files, /etc/resolv.conf, the environment's proxy, certificate, PIP_*, npm_config_*
# and GO* (proxy and sum database) variables with the files and folders they name, and
# pip's and npm's configuration files (/etc/pip.conf, ~/.config/pip/pip.conf, ~/.npmrc).
# Root only (debootstrap, chroot, namespaces).  Ports 8000 and 4433 (make run's) must be
# free: the tree shares the machine's network (apt, pip and npm need it).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
rev=HEAD check_for= command=
while [ $# -gt 0 ]; do
    case $1 in
    --rev) rev=$2; shift 2 ;;
    --check-for) check_for=$2; shift 2 ;;
    --command) command=$2; shift 2 ;;
    *) echo "usage: sh tests/pristine.sh [--rev REV] [--check-for SECONDS] [--command CMD]" >&2
       exit 2 ;;
    esac
done
say() { echo "pristine: $*"; }
fail() { echo "pristine: FAILED: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "root only (debootstrap, chroot)"
for t in debootstrap chroot unshare zstd git; do
    command -v $t >/dev/null 2>&1 || fail "$t is missing (sh tests/setup.sh installs it)"
done
for port in 8000 4433; do  # make run's; the tree shares this machine's network
    if command -v ss >/dev/null && ss -Hltun "sport = :$port" | grep -q .; then
        fail "port $port is in use here: make run in the tree needs it"
    fi
done
commit=$(git -C "$root" rev-parse --verify "$rev^{commit}") || fail "no commit $rev"

# this machine's release and apt source: the first deb line (or deb822 URIs:) of its suite
. /etc/os-release
suite=${VERSION_CODENAME:?/etc/os-release names no VERSION_CODENAME}
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
         awk -v s="$suite" '$1 == "deb" { for (i = 2; i < NF; i++) if ($(i + 1) == s &&
                                          $i ~ /^[a-z]+:/) { print $i; exit } }')
[ -n "$mirror" ] || mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
         awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }')
[ -n "$mirror" ] || fail "no apt source of $suite in /etc/apt/sources.list*"
arch=$(dpkg --print-architecture)
include=git,make,ca-certificates
key=$(printf '%s\n' "$suite" "$mirror" "$arch" minbase "$include" \
      "$(dpkg-query -W -f='${Version}' debootstrap)" | sha256sum | cut -c1-16)
cache="$root/build/pristine"
tarball="$cache/debian-$suite-$key.tar.zst"
mkdir -p "$cache"
# the tree outside build/: make's `find build -name '*.d'` would take its /etc/*.d folders
tree=$(mktemp -d "${TMPDIR:-/var/tmp}/gatling-pristine.XXXXXX")
chmod 0755 "$tree"  # its / (mktemp's 0700 would shut out -u nobody and the like)
# proc, sys and dev are mounted in the namespace alone, which ends with the run: here
# the tree is plain folders (and never removed through a mount that is still there)
trap 'grep -qF " $tree/" /proc/self/mountinfo || rm -rf "$tree"' EXIT
trap 'exit 130' INT TERM
t0=$(date +%s)
if [ -s "$tarball" ]; then
    tar -C "$tree" --zstd -xpf "$tarball"
    say "Debian $suite minbase from the cache ($(basename "$tarball"), $(($(date +%s) - t0)) s)"
else
    debootstrap --variant=minbase --include="$include" "$suite" "$tree" "$mirror" \
        >"$cache/debootstrap.log" 2>&1 ||
        fail "debootstrap $suite from $mirror (build/pristine/debootstrap.log)"
    tar -C "$tree" --zstd -cpf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -f "$cache"/debian-"$suite"-*.tar.zst.part
    say "Debian $suite minbase by debootstrap from $mirror: $(($(date +%s) - t0)) s" \
        "(cached as build/pristine/$(basename "$tarball"))"
fi
for old in "$cache"/debian-*.tar.zst; do  # one tree cached: the others are old lists
    [ "$old" = "$tarball" ] || rm -f "$old"
done

# the machine's package-registry settings, and nothing else of it
copy() {  # copy PATH into the tree at the same path (a file or a folder), if it exists
    [ -e "$1" ] || return 0
    mkdir -p "$tree$(dirname "$1")"
    cp -a "$1" "$tree$1"
}
copy /etc/resolv.conf
rm -f "$tree"/etc/apt/sources.list "$tree"/etc/apt/sources.list.d/*
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do copy "$f"; done
for f in /etc/apt/apt.conf.d/*; do
    grep -qis proxy "$f" && copy "$f"
done
for f in /etc/pip.conf /etc/pip /etc/xdg/pip /etc/npmrc /usr/etc/npmrc; do copy "$f"; done
home=${HOME:-/root}
[ -e "$home/.npmrc" ] && { mkdir -p "$tree/root"; cp "$home/.npmrc" "$tree/root/.npmrc"; }
[ -e "$home/.config/pip" ] && { mkdir -p "$tree/root/.config"
                                cp -a "$home/.config/pip" "$tree/root/.config/pip"; }
mkdir -p "$tree/pristine"
: >"$tree/pristine/env"
env | grep -E '^([a-zA-Z_]*_proxy|[A-Z_]*_PROXY|PIP_[A-Z_]*|npm_config_[a-z_]*|NPM_CONFIG_[A-Z_]*|GOPROXY|GONOPROXY|GOPRIVATE|GOSUMDB|GONOSUMDB|GOINSECURE|GOFLAGS|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|GIT_SSL_CAINFO)=' |
while IFS= read -r kv; do
    name=${kv%%=*} value=${kv#*=}
    printf "export %s='%s'\n" "$name" "$(printf %s "$value" | sed "s/'/'\\\\''/g")" \
        >>"$tree/pristine/env"
    for p in $(printf %s "$value" | tr ':' ' '); do  # the files and folders it names
        case $p in /*) [ -e "$tree$p" ] && [ -d "$p" ] || copy "$p" ;; esac
    done
done
[ -e "$tree/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n' \
    >"$tree/etc/hosts"
git clone -q --bare --no-local "$root" "$tree/srv/gatling.git"
git -C "$tree/srv/gatling.git" update-ref refs/heads/pristine "$commit"
git -C "$tree/srv/gatling.git" symbolic-ref HEAD refs/heads/pristine

# inside: the README's commands, as root in root's home
cat >"$tree/pristine/run.sh" <<'EOF'
#!/bin/bash
set -u
. /pristine/env
chmod 0700 /root
cd /root
git clone -q /srv/gatling.git gatling || { echo "pristine: FAILED: git clone" >&2; exit 1; }
cd gatling
served() {  # the demo over HTTP (port 8000) and HTTPS (4433, verified against its CA)
    local h
    { exec 3<>/dev/tcp/127.0.0.1/8000; } 2>/dev/null || return 1
    printf 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
    IFS= read -r -t 5 h <&3; exec 3<&-
    case $h in "HTTP/1."?" 200"*) ;; *) return 1 ;; esac
    [ -f build/tls/ca.pem ] || return 1
    h=$(printf 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n' |
        timeout 10 openssl s_client -quiet -connect 127.0.0.1:4433 -servername localhost \
            -verify_return_error -verify_hostname localhost -CAfile build/tls/ca.pem 2>/dev/null |
        head -1)
    case $h in "HTTP/1."?" 200"*) return 0 ;; esac
    return 1
}
t0=$(date +%s)
setsid make run >/pristine/run.log 2>&1 </dev/null &
run=$!
ok=
while kill -0 $run 2>/dev/null && [ $(($(date +%s) - t0)) -lt 1200 ]; do
    if served; then ok=1; break; fi
    sleep 1
done
took=$(($(date +%s) - t0))
kill -TERM -- -$run 2>/dev/null; wait $run 2>/dev/null
if [ -z "$ok" ]; then
    echo "pristine: FAILED: \`make run\` did not serve http://127.0.0.1:8000/ and" \
         "https://localhost:4433/ (after $took s); its last lines:" >&2
    tail -20 /pristine/run.log >&2
    exit 1
fi
echo "pristine: \`make run\` served HTTP and HTTPS $took s after it began; stopped"
t0=$(date +%s)
if [ -n "${PRISTINE_COMMAND:-}" ]; then
    what=$PRISTINE_COMMAND
    sh -c "$PRISTINE_COMMAND" >/pristine/check.log 2>&1
    rc=$?
elif [ -n "${PRISTINE_CHECK_FOR:-}" ]; then
    what="make check (a trial: its first $PRISTINE_CHECK_FOR s)"
    timeout -s INT "$PRISTINE_CHECK_FOR" make check >/pristine/check.log 2>&1
    rc=$?
    # make's "*** [...] Interrupt" lines are the trial's own stop; "*** [...] Error N" failed
    [ $rc = 124 ] && ! grep -qE '^(FAILED|ERROR) |check: .* FAILED|\*\*\* .*Error' \
        /pristine/check.log &&
        { echo "pristine: $what: nothing failed in $(($(date +%s) - t0)) s; its last line:" \
               "$(tail -1 /pristine/check.log)"; exit 0; }
else
    what="make check"
    make check >/pristine/check.log 2>&1
    rc=$?
fi
took=$(($(date +%s) - t0))
if [ $rc != 0 ]; then
    echo "pristine: FAILED: \`$what\` (exit $rc after $took s); what failed:" >&2
    grep -E '^(FAILED|ERROR) |^check: .*(FAILED|FLAKY)|^make.*\*\*\* .*Error|^setup: ' \
        /pristine/check.log | head -40 >&2
    echo "pristine: its last lines:" >&2
    tail -15 /pristine/check.log >&2
    exit 1
fi
echo "pristine: \`$what\` passed in $took s"
EOF
[ -z "$check_for" ] || echo "export PRISTINE_CHECK_FOR=$check_for" >>"$tree/pristine/env"
[ -z "$command" ] ||
    printf "export PRISTINE_COMMAND='%s'\n" "$(printf %s "$command" | sed "s/'/'\\\\''/g")" \
        >>"$tree/pristine/env"
say "clone of $(git -C "$root" rev-parse --short "$commit") into /root/gatling of the tree" \
    "(logs: the tree's /pristine/run.log and check.log, copied to build/pristine/ with" \
    "make check's build/check/)"
rc=0
unshare --mount --pid --fork --kill-child --propagation private sh -c '
    t=$1
    # the tree a mount of its own first, so that its / is a mount point, as on a machine
    # (t_fs makes / private in a namespace of its own: EINVAL on a plain folder)
    mount --bind "$t" "$t" && mount --make-private "$t" &&
    mount -t proc proc "$t/proc" && mount --rbind /sys "$t/sys" &&
        mount --rbind /dev "$t/dev" || exit 1
    exec chroot "$t" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/bash /pristine/run.sh' sh "$tree" || rc=$?
for f in run.log check.log; do
    [ -f "$tree/pristine/$f" ] && cp "$tree/pristine/$f" "$cache/$f"
done
rm -rf "$cache/check"  # make check's logs of each pass (a failure's details are there)
[ -d "$tree/root/gatling/build/check" ] && cp -r "$tree/root/gatling/build/check" "$cache/check"
say "$(($(date +%s) - t0)) s in all; the tree is thrown away"
exit $rc
