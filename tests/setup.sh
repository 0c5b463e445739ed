#!/bin/sh
# Install the Debian packages gatling needs, if missing, at one of three levels:
#   sh tests/setup.sh run     what the server needs to build and run (make run)
#   sh tests/setup.sh         that, and everything make check tests with
#   sh tests/setup.sh bench   that, and the servers and tools the benchmarks compare against
# As root it runs apt-get; otherwise it names what is missing and goes on
# (the build will say what breaks).
set -e
level=${1:-check}
case $level in run|check|bench) ;; *) echo "usage: sh tests/setup.sh [run|check|bench]" >&2; exit 2;; esac
# The server: a C compiler and make, libowfat (the original gatling's library), OpenSSL
# (HTTPS; openssl makes the demo's certificates), zlib (gzip), libnghttp2 (HTTP/2) and
# liburing (IO=uring, which make check builds and make run does not need, but a user who
# asks for the fastest backend does: it is small), libcurl and json-c (the ACME client,
# gatling/acme/: HTTPS to the CA and its JSON), libldns (its DNS-01: RFC 2136 updates signed
# with TSIG: always linked, as a wildcard certificate needs it; small), libzstd and
# libbrotli (zstd and br on the fly, site/zcoder.c; zstd also for dcz), libseccomp (the
# serving process's system-call filter, --sandbox: process/sandbox.c)
# (libnghttp2-dev: Debian 12's 1.52.0-1+deb12u3 or later, which carries the rapid-reset
#  (CVE-2023-44487) and CONTINUATION (CVE-2024-28182) fixes -- h2.c calls
#  nghttp2_option_set_max_continuations, which older builds lack, so they fail to link)
pkgs="gcc make libc6-dev libowfat-dev libssl-dev openssl zlib1g-dev liburing-dev libnghttp2-dev libzstd-dev
      libbrotli-dev libcurl4-openssl-dev libjson-c-dev libldns-dev libseccomp-dev"
# What make check tests with (the rest of this file, but for apt-get itself):
[ "$level" = run ] || {
pkgs="$pkgs nghttp2-client python3-h2 curl wrk apache2-utils python3 goaccess clang libclang-rt-14-dev gnuplot-nox zstd brotli
      debhelper dpkg-dev fakeroot lintian logrotate systemd adduser media-types linux-perf util-linux
      procps iproute2 git haproxy lftp"
# (nghttp2-client: nghttp and h2load for tests/integration/http2/test_h2.py;
#  python3-h2: Python's HTTP/2 library, the raw client of the h2 pass (GATLING_SCHEME=h2;
#  conftest.py also finds it in /usr/lib/python3/dist-packages from another python3);
#  gnuplot-nox: make check runs the kernel benchmark suite, whose plots it checks;
#  the third line: tests/integration/ops/test_package.py builds, checks, installs
#  and purges the Debian package, and tries the systemd units and logrotate file:
#  procps is the unit's /bin/kill (systemd-analyze verify wants it), git lists
#  the tree to package; iproute2's ss shows the listeners when a socket
#  activation test fails (the tests themselves poll with connect());
#  linux-perf and util-linux's taskset: bench/fastpath counts system calls with
#  perf's tracepoints, and test_fastpath.py runs it;
#  haproxy: test_proxyproto.py puts it in front of gatling with send-proxy-v2;
#  lftp: test_ftp.py mirrors a tree from gatling's FTP server)
# gunicorn, php-fpm, python3-websockets: test_proxy.py's backends (-P: HTTP, FastCGI, WebSocket)
pkgs="$pkgs gunicorn php-fpm python3-websockets"
# python3-grpcio, python3-hypercorn: integration/grpc's backends and client (h2c/ pools, gRPC
# through gatling; run by /usr/bin/python3, where Debian puts them), and bench/compare-grpc's
# backends (test_compare_grpc.py)
pkgs="$pkgs python3-grpcio python3-hypercorn"
# valgrind: make check-valgrind (a job of make check-all) runs the HTTP/2 backends'
# client-ending tests under memcheck (issue 75)
pkgs="$pkgs valgrind"
# python3-zstandard, python3-brotli: test_compress.py decodes gatling's zstd and br on the fly
# with real decoders (gzip is Python's own)
pkgs="$pkgs python3-zstandard python3-brotli"
# python3-pip: pip, which a fresh Debian 12 lacks (minbase and the cloud images alike), for
# the modules Debian 12 does not package (aioquic, ziglang: below, into build/python)
pkgs="$pkgs python3-pip"
# certbot: test_acme.py issues and renews a certificate through gatling with it (against
# Pebble, below; its own directories under the test's tmp).  Its certbot.timer runs
# `certbot -q renew` twice a day, which does nothing while /etc/letsencrypt holds no
# certificate (and nothing runs it where systemd is not PID 1)
pkgs="$pkgs certbot"
# knot, knot-dnsutils: test_acme_dns.py's authoritative server (knotd on a loopback port, a
# zone that one TSIG key may update) for DNS-01, and kdig to look at its records; Pebble
# resolves through it.  The tests start knotd themselves, with a configuration of their
# own; the package's knot.service is not used
pkgs="$pkgs knot knot-dnsutils"
# bind9: test_acme_dns_delegated.py's second authoritative server (named in the foreground on
# a loopback port, with a CNAME-delegated challenge zone and an update-policy that refuses),
# and Pebble's resolver there (acmelab.Resolver); the package's named.service is not used
pkgs="$pkgs bind9"
# prometheus: test_metrics.py checks /metrics with its promtool and has the server scrape
# gatling (started by the test on a port of its own; policy-rc.d keeps the service off 9090)
pkgs="$pkgs prometheus"
# hugo: http/test_sitefiles.py builds a real static site with it (a 404.html, _redirects
# and _headers the generator copies from static/) and serves what it made (issue 77)
pkgs="$pkgs hugo"
# etcd-server, etcd-client: test_cluster.py (--cluster, issue 57) runs two gatling nodes
# against a real etcd 3.4 (its v3 JSON gateway), started by the test on ports of its own;
# policy-rc.d keeps the package's service from starting, and it is disabled below so a
# machine booted with systemd does not run one on 2379 either
pkgs="$pkgs etcd-server etcd-client"
# HTTP/3 (gatling/h3/, built where pkg-config finds them: see gatling/gatling.mk):
# Debian 12's ngtcp2 0.12.1 (QUIC, with its GnuTLS crypto helper), nghttp3 0.8.0
# (HTTP/3, QPACK), GnuTLS 3.7.9 (QUIC's TLS 1.3); ngtcp2-client's gtlsclient is a test
# client of test_h3.py (aioquic, the other, comes from pip below).  make run leaves them
# out: the server builds without HTTP/3 there
pkgs="$pkgs libngtcp2-dev libngtcp2-crypto-gnutls-dev libnghttp3-dev libgnutls28-dev ngtcp2-client"
# chromium, chromium-driver: test_h3_browser.py, a real browser over HTTP/3 (issue 34):
# Debian's Chromium, headless, loads a page from gatling over QUIC and reports each
# request's protocol (the test skips without it; test_report.py renders the bench report
# with it too; ops/test_status_page.py loads /server-status in it under load, over the
# DevTools protocol, and keeps a screenshot).  chromium-driver, the WebDriver server of
# the same version, is for a test
# that must script the browser beyond --dump-dom: none does yet
pkgs="$pkgs chromium chromium-driver"
# slowhttptest, whois (mkpasswd) and openssl: bench/slashdot's attacks and password hashes
# php-fpm: the FastCGI backend of bench/compare-dynamic (test_compare_dynamic.py)
# nginx (below) and haproxy (above): the peers of bench/compare-pool (test_compare_pool.py)
pkgs="$pkgs php-fpm"
# caddy: bench/compare-h2's fourth peer (Debian 12's 2.6, a static file_server over h2)
# iperf3 (3.12): bench/run throughput --iperf3, kb-stream's yardstick (test_throughput.py
# checks that both read a tbf bottleneck alike); ethtool: the GRO/GSO/TSO tunings on the
# lab's veth links (test_throughput.py applies every tuning)
pkgs="$pkgs iperf3 ethtool"
# debootstrap: tests/pristine.sh (make check-all PRISTINE=1) makes a Debian 12 minbase tree
# with it, where the README's two commands run on a machine nobody used (issue 91)
pkgs="$pkgs debootstrap"
# jq: test_log_json.py reads every line of --log-format json with it (and with Python's json)
pkgs="$pkgs jq"
# clang-tidy-14 and cppcheck: make lint (tests/lint.sh), a job of make check, beside gcc's
# -fanalyzer; gcovr: make coverage's report (line and branch per folder, HTML)
pkgs="$pkgs clang-tidy-14 cppcheck gcovr"
# libnginx-mod-http-brotli-filter: nginx's brotli, a peer of bench/compare-compress (with
# nginx's gzip and caddy's encode zstd gzip; test_compare_compress.py)
[ "$level" = bench ] && pkgs="$pkgs nginx lighttpd h2o slowhttptest whois caddy"
[ "$level" = bench ] && pkgs="$pkgs libnginx-mod-http-brotli-filter"
# wordpress, mariadb-server, php-mysql: Debian's WordPress behind gatling's front
# controller, on a MariaDB server the test starts itself (test_wordpress.py, make
# check-all's only: tests/run-check's ALL_ONLY)
[ "$level" = bench ] && pkgs="$pkgs wordpress mariadb-server php-mysql"
# nodejs, npm: the HTTP caching test suite (tests/cache-tests/run, test_cache_suite.py),
# which npm installs below.  Asked for only when the command is missing: a NodeSource
# nodejs (which carries its own npm) conflicts with Debian's npm package
command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
}

missing=
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done
# pytest: any python3 on PATH that can import it will do
[ "$level" = run ] || python3 -c 'import pytest' 2>/dev/null || missing="$missing python3-pytest"

if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # policy-rc.d keeps freshly installed servers (nginx, ...) from starting on port 80
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d.gatling
        [ -e /usr/sbin/policy-rc.d ] || { cp /usr/sbin/policy-rc.d.gatling /usr/sbin/policy-rc.d
                                          chmod +x /usr/sbin/policy-rc.d; rmrc=1; }
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
        [ -z "$rmrc" ] || rm -f /usr/sbin/policy-rc.d
        rm -f /usr/sbin/policy-rc.d.gatling
        case "$missing" in *etcd-server*)
            systemctl --root=/ disable etcd.service >/dev/null 2>&1 || true ;; esac
        # Debian's python3-pytest serves /usr/bin/python3; a python3 earlier on PATH may lack it
        [ "$level" = run ] || python3 -c 'import pytest' 2>/dev/null ||
            python3 -m pip install -q pytest ||
            echo "setup: pytest is not importable by $(command -v python3)" >&2
    else
        echo "setup: missing Debian packages (run as root to install):$missing" >&2
    fi
fi
[ "$level" = run ] && exit 0
# FTP servers: vsftpd for make check (test_loadgen_ftp.py, test_compare_ftp.py), and pure-ftpd
# too with `bench` (bench/compare-ftp).  Debian's two packages conflict (both provide
# ftp-server): when one is installed the other's .deb is unpacked under /opt/NAME (where
# compare-ftp looks) with its libraries; anonymous FTP needs the `ftp` user (vsftpd's package
# makes it, pure-ftpd's does not).
ftp_servers=vsftpd
[ "$level" = bench ] && ftp_servers="vsftpd pure-ftpd"
if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    for p in $ftp_servers; do
        { [ -x /usr/sbin/$p ] || [ -x /opt/$p/usr/sbin/$p ]; } && continue
        echo "setup: installing $p"
        if ! dpkg-query -W -f='${Status}\n' vsftpd pure-ftpd 2>/dev/null | grep -q 'install ok installed'; then
            printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d.gatling
            [ -e /usr/sbin/policy-rc.d ] || { cp /usr/sbin/policy-rc.d.gatling /usr/sbin/policy-rc.d
                                              chmod +x /usr/sbin/policy-rc.d; rmrc=1; }
            apt-get install -y -qq --no-install-recommends $p >/dev/null
            [ -z "$rmrc" ] || rm -f /usr/sbin/policy-rc.d
            rm -f /usr/sbin/policy-rc.d.gatling
        else
            apt-get install -y -qq --no-install-recommends libcap2 libpam0g libssl3 libwrap0 \
                libsodium23 libcrypt1 >/dev/null
            d=$(mktemp -d) && chmod 755 "$d"
            (cd "$d" && apt-get download -qq $p >/dev/null 2>&1) && mkdir -p /opt/$p &&
                dpkg-deb -x "$d"/${p}_*.deb /opt/$p || echo "setup: could not unpack $p" >&2
            rm -rf "$d"
        fi
    done
    getent passwd ftp >/dev/null || adduser --system --group --home /srv/ftp --no-create-home \
        --quiet ftp
    mkdir -p /srv/ftp
fi
# h2 (pure Python): Debian's, which conftest.py adds to any python3's path, or pip's
python3 -c 'import h2' 2>/dev/null || [ -d /usr/lib/python3/dist-packages/h2 ] ||
    python3 -m pip install -q h2 >/dev/null 2>&1 ||
    echo "setup: h2 is not importable by $(command -v python3): the h2 pass fails" >&2
# pip's packages for the tests go to build/python (pip --target), which conftest.py puts
# first on the tests' path and io/io.mk on make cross's, never into the system's python3:
# Debian 12's is "externally managed" (PEP 668: pip installs nothing beside apt's packages
# there, only with --target or the like), and aioquic's cryptography and pyOpenSSL, newer
# than Debian's, would shadow them for certbot and every other Python program of the
# machine (issue 91: on a fresh Debian 12 pip was missing, and would have been refused)
root=$(cd "$(dirname "$0")/.." && pwd)
pydir="$root/build/python"
pip_for_tests() {  # pip_for_tests MODULE SPEC: SPEC into build/python unless MODULE imports
    PYTHONPATH="$pydir" python3 -c "import $1" 2>/dev/null && return 0
    newbuild=; [ -d "$root/build" ] || newbuild=1
    python3 -m pip install -q --target "$pydir" "$2" >/dev/null 2>&1 || return 1
    if [ "$(id -u)" = 0 ] && [ "$(stat -c %u "$root")" != 0 ]; then
        chown -R "$(stat -c %u:%g "$root")" "$pydir"
        if [ -n "$newbuild" ]; then chown "$(stat -c %u:%g "$root")" "$root/build"; fi
    fi
}
# aioquic (HTTP/3 client library) for test_h3.py and the h3 pass (conftest's H3Client);
# never fatal (test_h3.py skips that client, the h3 pass says what it needs)
pip_for_tests aioquic aioquic ||
    echo "setup: could not pip install aioquic: test_h3.py skips its aioquic tests" >&2
# zig cc for `make cross` (io/ with kqueue for the BSDs and macOS); optional, never fatal
pip_for_tests ziglang ziglang==0.17.0 ||
    echo "setup: could not pip install ziglang: make cross will be skipped" >&2
# h2spec (HTTP/2 conformance) where Go exists; optional, never fatal (test_h2.py
# skips without it)
if ! command -v h2spec >/dev/null 2>&1 && [ ! -x "$HOME/go/bin/h2spec" ] &&
    command -v go >/dev/null 2>&1; then
    timeout 300 go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible >/dev/null 2>&1 ||
        echo "setup: could not go install h2spec: its tests will be skipped" >&2
fi
# Pebble, Let's Encrypt's ACME test server, and pebble-challtestsrv, its mock DNS, for
# test_acme.py, where Go exists; optional, never fatal (the test skips without them).
# Pinned: v2.10.1, what @latest gave on 2026-11-25 (15 s to build here)
PEBBLE_VERSION=v2.10.1
gobin=/nonexistent
command -v go >/dev/null 2>&1 && gobin="$(go env GOPATH 2>/dev/null | cut -d: -f1)/bin"
for cmd in pebble pebble-challtestsrv; do
    command -v go >/dev/null 2>&1 || break
    command -v $cmd >/dev/null 2>&1 || [ -x "$HOME/go/bin/$cmd" ] || [ -x "$gobin/$cmd" ] &&
        continue
    timeout 300 go install github.com/letsencrypt/pebble/v2/cmd/$cmd@$PEBBLE_VERSION \
        >/dev/null 2>&1 || echo "setup: could not go install $cmd: test_acme.py will be skipped" >&2
done
# grpc-go's interop server and client (google.golang.org/grpc/interop/server and
# interop/client), for grpc/test_grpc_interop.py (issue 75, make check-all): gRPC's own
# interop test cases through gatling's h2c/ and h2/ pools, from a gRPC implementation
# other than the python3-grpcio of the other grpc/ modules.  Into a folder of their own
# named by the version (their binaries are called server and client), where Go exists;
# optional, never fatal (the test skips, saying why).  Pinned: v1.85.0, the version the
# issue's reporter ran (2 min to build here)
GRPC_INTEROP_VERSION=v1.85.0
gi="$gobin/grpc-interop-$GRPC_INTEROP_VERSION"
if command -v go >/dev/null 2>&1 && { [ ! -x "$gi/server" ] || [ ! -x "$gi/client" ]; }; then
    GOBIN="$gi" timeout 600 go install \
        google.golang.org/grpc/interop/server@$GRPC_INTEROP_VERSION \
        google.golang.org/grpc/interop/client@$GRPC_INTEROP_VERSION >/dev/null 2>&1 ||
        echo "setup: could not go install grpc-go's interop server and client:" \
             "test_grpc_interop.py will be skipped" >&2
fi
# http-cache-tests (HTTP caching tests, npm; tests/cache-tests/README) into the build tree,
# build/cache-tests/node_modules, never the repository: pinned, and never fatal (without it
# test_cache_suite.py skips, saying why).  Beside it undici, the one package the suite's
# newer tests (the snapshot in tests/cache-tests/snapshot) load: its interim-response tests
# read 1xx responses with it.  As root (sudo make setup) the new directories are handed to
# the tree's owner, whose make writes build/ later
CACHE_TESTS_VERSION=0.4.5
UNDICI_VERSION=7.30.2
ct="$root/build/cache-tests"
if ! grep -qs "\"version\": \"$CACHE_TESTS_VERSION\"" "$ct/node_modules/http-cache-tests/package.json" ||
   ! grep -qs "\"version\": \"$UNDICI_VERSION\"" "$ct/node_modules/undici/package.json"; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "setup: npm is missing: the HTTP caching test suite will be skipped" >&2
    else
        newbuild=; [ -d "$root/build" ] || newbuild=1
        mkdir -p "$ct"
        echo "setup: npm install http-cache-tests@$CACHE_TESTS_VERSION undici@$UNDICI_VERSION into build/cache-tests"
        timeout 300 npm install --prefix "$ct" --no-audit --no-fund --fetch-retries=1 \
            "http-cache-tests@$CACHE_TESTS_VERSION" "undici@$UNDICI_VERSION" \
            >"$ct/npm-install.log" 2>&1 ||
            echo "setup: could not npm install http-cache-tests@$CACHE_TESTS_VERSION (see" \
                 "build/cache-tests/npm-install.log): the HTTP caching test suite will be skipped" >&2
        if [ "$(id -u)" = 0 ] && [ "$(stat -c %u "$root")" != 0 ]; then
            owner=$(stat -c %u:%g "$root")
            chown -R "$owner" "$ct"
            if [ -n "$newbuild" ]; then chown "$owner" "$root/build"; fi
        fi
    fi
fi
# Real JavaScript for the dictionary tests and bench/compare-dict (RFC 9842, issue 48):
# two published versions of three libraries, one file of each, from the npm registry
# (npm checks each tarball's integrity) into build/dictdata/NAME-VERSION.js.  Never fatal:
# without them test_dictionary.py's real-data test and the benchmark skip, saying why
dd="$root/build/dictdata"
for spec in lodash@4.17.20:package/lodash.js lodash@4.17.21:package/lodash.js \
        react-dom@18.2.0:package/umd/react-dom.production.min.js \
        react-dom@18.3.1:package/umd/react-dom.production.min.js \
        vue@3.4.37:package/dist/vue.global.prod.js vue@3.4.38:package/dist/vue.global.prod.js; do
    pkg=${spec%%:*} member=${spec#*:}
    out="$dd/${pkg%@*}-${pkg#*@}.js"
    [ -s "$out" ] && continue
    command -v npm >/dev/null 2>&1 || { echo "setup: npm is missing: no $out" >&2; break; }
    mkdir -p "$dd/tmp"
    tgz=$(cd "$dd/tmp" && timeout 120 npm pack --silent --fetch-retries=1 "$pkg" 2>/dev/null | tail -1)
    if [ -n "$tgz" ] && tar xzf "$dd/tmp/$tgz" -O "$member" >"$out.part" 2>/dev/null; then
        mv "$out.part" "$out"
    else
        rm -f "$out.part"
        echo "setup: could not npm pack $pkg (offline?): the dictionary tests on real data skip" >&2
    fi
    # no file when npm pack failed: "$dd/tmp/" itself is no file to remove (issue 91: that
    # rm's error ended setup.sh, under set -e, in a tree that could not reach the registry)
    [ -z "$tgz" ] || rm -f "$dd/tmp/$tgz"
done
rm -rf "$dd/tmp"
if [ -d "$dd" ] && [ "$(id -u)" = 0 ] && [ "$(stat -c %u "$root")" != 0 ]; then
    chown -R "$(stat -c %u:%g "$root")" "$dd"
fi
exit 0
