#!/bin/sh
# make lint: three static analysers over every C file of gatling/ and io/
# (Debian's gcc 12, clang-tidy-14, cppcheck; tests/setup.sh installs them):
#   gcc -fanalyzer   paths through a function and its callees: leaks, NULL,
#                    use after free, double close (its warnings only: the
#                    build's -Wall -Wextra are the build's)
#   clang-tidy-14    the checks of .clang-tidy (bugprone, cert, performance;
#                    each one left out says why there); LINT_DEEP=1 adds
#                    clang-analyzer-* (~30 CPU-min over the tree)
#   cppcheck         warning, performance, portability
# A finding is "tool|file|check|message"; tests/lint.supp lists those that are
# not bugs, each with its reason.  Any other fails the run, printed with its
# line.  Findings go to build/lint/.
#
#   sh tests/lint.sh "CPPFLAGS" [FILE.c ...]      (default: gatling/ and io/)
#   LINT_JOBS=2 LINT_DEEP=1 LINT_TOOLS="gcc tidy cppcheck"
set -e
cd "$(dirname "$0")/.."
flags=$1
shift || true
files=${*:-$(ls gatling/*/*.c io/gio.c io/gio_batch.c io/gio_os.c io/gio_udp.c \
    io/gio_tls.c)}
jobs=${LINT_JOBS:-2}
tools=${LINT_TOOLS:-gcc tidy cppcheck}
out=${LINT_OUT:-build/lint}
supp=${LINT_SUPP:-tests/lint.supp}
mkdir -p "$out"
GCC=${LINT_CC:-gcc}
TIDY=${LINT_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || echo clang-tidy-14)}
inc=-Igatling
LC_ALL=C  # ASCII quotes in gcc's messages, for tests/lint.supp
export flags inc GCC TIDY out LC_ALL
for t in $tools; do
    case $t in
    gcc) command -v "$GCC" >/dev/null ;;
    tidy) command -v "$TIDY" >/dev/null ;;
    cppcheck) command -v cppcheck >/dev/null ;;
    *) echo "lint: unknown tool $t" >&2; exit 2 ;;
    esac || { echo "lint: $t is missing (sh tests/setup.sh installs it)" >&2; exit 2; }
done
t0=$(date +%s)
for t in $tools; do
    case $t in
    gcc)  # -O0: the analyser does not need the optimiser, and is twice as fast without it
        printf '%s\n' $files | xargs -P "$jobs" -I{} sh -c \
            '$GCC $flags $inc -std=gnu11 -pthread -O0 -fanalyzer -fdiagnostics-plain-output \
                 -c -o /dev/null "$1" 2>&1 | grep -- "-Wanalyzer-" || true' sh {} \
            >"$out/gcc.txt" ;;
    tidy)
        deep=; [ -z "$LINT_DEEP" ] || deep="--checks=clang-analyzer-*"
        export deep
        printf '%s\n' $files | xargs -P "$jobs" -n 8 sh -c \
            '$TIDY --quiet $deep "$@" -- $flags $inc -std=gnu11 2>/dev/null | grep " warning: " || true' sh \
            >"$out/tidy.txt" ;;
    cppcheck)
        # -D: the configuration the build compiles (else cppcheck tries each #if)
        cppcheck -q -j "$jobs" --std=c11 --enable=warning,performance,portability \
            --suppress=missingIncludeSystem $(printf '%s\n' $flags | grep '^-[DI]') $inc \
            --template='{file}:{line}:0: warning: {message} [cppcheck-{id}]' \
            $files 2>"$out/cppcheck.txt" || true ;;
    esac
done
# "file:line:col: warning: message [check]" -> "tool|file|check|message|file:line"
for t in $tools; do
    sed -n 's|^\(\./\)\{0,1\}\([^:]*\):\([0-9]*\):[0-9]*: warning: \(.*\) \[\([^]]*\)\]$|'"$t"'\|\2\|\5\|\4\|\2:\3|p' \
        "$out/$t.txt" | sed "s|$(pwd)/||g"
done | sort -u >"$out/findings.txt"
# tests/lint.supp: "tool|file|check|part of the message|why" (# comments)
[ -e "$supp" ] || supp=/dev/null
bad=$(awk -F'|' '
    FILENAME == ARGV[1] { if ($0 !~ /^#/ && NF >= 5) { n++; t[n] = $1; f[n] = $2; c[n] = $3; m[n] = $4 }
                next }
    { for (i = 1; i <= n; i++)
          if ($1 == t[i] && $2 == f[i] && index($3, c[i]) && index($4, m[i]))
              next
      printf "lint: %s: %s: %s [%s]\n", $5, $1, $4, $3 > "/dev/stderr"; bad++ }
    END { print bad + 0 }' "$supp" "$out/findings.txt")
n=$(wc -l <"$out/findings.txt")
echo "lint: $(echo $files | wc -w) files, $tools: $n findings, $((n - bad)) suppressed" \
     "(tests/lint.supp), $bad new ($(($(date +%s) - t0)) s; build/lint/)"
[ "$bad" = 0 ]
