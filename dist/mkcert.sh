#!/bin/sh
# mkcert.sh DIR [NAME...]
#
# A throwaway local certificate authority and a server certificate signed by
# it, for trying HTTPS on one machine (make run, the tests, the benchmarks):
#
#   DIR/ca.pem, DIR/ca.key     the CA (valid 365 days): give ca.pem to clients,
#                              e.g. curl --cacert DIR/ca.pem
#   DIR/certs/server.pem       the leaf for localhost, 127.0.0.1, ::1 and each
#                              NAME: certificate then private key, mode 600;
#                              serve it with gatling -C DIR/certs
#
# The leaf is CA:FALSE, serverAuth only, valid 365 days, so TLS scanners
# judge the server's configuration rather than the certificate.  Files that
# exist are kept (delete DIR to start over).  KEY=rsa makes RSA 2048 keys
# instead of ECDSA P-256.  Never use this CA for anything but local tests.
set -e
dir=${1:?usage: mkcert.sh DIR [NAME...]}
shift
command -v openssl >/dev/null || { echo "mkcert.sh: openssl is not installed" >&2; exit 1; }
case "${KEY:-ec}" in
ec) newkey="-newkey ec -pkeyopt ec_paramgen_curve:P-256" ;;
rsa) newkey="-newkey rsa:2048" ;;
*) echo "mkcert.sh: KEY=$KEY: ec or rsa" >&2; exit 2 ;;
esac
umask 077
mkdir -p "$dir/certs"
if [ ! -s "$dir/ca.pem" ] || [ ! -s "$dir/ca.key" ]; then
    # shellcheck disable=SC2086
    openssl req -x509 $newkey -nodes -days 365 -subj "/CN=gatling throwaway local CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
    chmod 644 "$dir/ca.pem"
fi
if [ ! -s "$dir/certs/server.pem" ]; then
    san="DNS:localhost,IP:127.0.0.1,IP:::1"
    for n in "$@"; do san="$san,DNS:$n"; done
    first=${1:-localhost}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # shellcheck disable=SC2086
    openssl req -new $newkey -nodes -subj "/CN=$first" -keyout "$tmp/leaf.key" \
        -out "$tmp/leaf.csr" 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth" "subjectAltName=$san" >"$tmp/leaf.ext"
    openssl x509 -req -in "$tmp/leaf.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -CAcreateserial -CAserial "$tmp/ca.srl" -days 365 -extfile "$tmp/leaf.ext" \
        -out "$tmp/leaf.pem" 2>/dev/null
    cat "$tmp/leaf.pem" "$tmp/leaf.key" >"$dir/certs/server.pem"
    echo "mkcert.sh: $dir/certs/server.pem for $san (CA: $dir/ca.pem)"
fi
