#!/bin/sh
# mkcert.sh DIR [NAME...]
#
# A throwaway local certificate authority and a server certificate signed by
# it, for trying HTTPS on one machine (make run, the tests, the benchmarks):
#
#   DIR/ca.pem, DIR/ca.key     the CA (valid 365 days): give ca.pem to clients,
#                              e.g. curl --cacert DIR/ca.pem
#   DIR/certs/server.pem       the leaf for localhost, 127.0.0.1, ::1 and each
#                              NAME (a DNS name, or an IPv4 or IPv6 address):
#                              certificate then private key, mode 600;
#                              serve it with gatling -C DIR/certs
#
# The leaf is CA:FALSE, serverAuth only, valid 365 days, so TLS scanners
# judge the server's configuration rather than the certificate.  Files that
# exist are kept while they are good: a CA or a leaf that expires within 7
# days (or cannot be read) is made anew, and so is a leaf that no longer
# verifies against DIR/ca.pem (a new CA means clients need the new ca.pem;
# a running gatling picks up the new leaf within a minute).  Delete DIR to
# start over.  KEY=rsa makes RSA 2048 keys instead of ECDSA P-256.  Never
# use this CA for anything but local tests.
set -e
dir=${1:?usage: mkcert.sh DIR [NAME...]}
shift
command -v openssl >/dev/null || { echo "mkcert.sh: openssl is not installed" >&2; exit 1; }
case "${KEY:-ec}" in
ec) newkey="-newkey ec -pkeyopt ec_paramgen_curve:P-256" ;;
rsa) newkey="-newkey rsa:2048" ;;
*) echo "mkcert.sh: KEY=$KEY: ec or rsa" >&2; exit 2 ;;
esac
renew=$((7 * 86400)) # what is left of a certificate's life when it is replaced
umask 077
mkdir -p "$dir/certs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# good FILE: a certificate that can be read and is valid for $renew seconds more
good() {
    [ -s "$1" ] && openssl x509 -in "$1" -noout -checkend "$renew" >/dev/null 2>&1
}

if ! good "$dir/ca.pem" || [ ! -s "$dir/ca.key" ]; then
    [ ! -e "$dir/ca.pem" ] || echo "mkcert.sh: $dir/ca.pem expires within 7 days or is" \
        "unusable: a new CA (clients need the new ca.pem)" >&2
    # shellcheck disable=SC2086
    openssl req -x509 $newkey -nodes -days 365 -subj "/CN=gatling throwaway local CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
    chmod 644 "$tmp/ca.pem"
    mv -f "$tmp/ca.key" "$dir/ca.key"
    mv -f "$tmp/ca.pem" "$dir/ca.pem"
fi
leaf=$dir/certs/server.pem
if good "$leaf" && openssl verify -CAfile "$dir/ca.pem" "$leaf" >/dev/null 2>&1; then
    exit 0
fi
[ ! -e "$leaf" ] || echo "mkcert.sh: $leaf expires within 7 days or does not verify" \
    "against $dir/ca.pem: a new one" >&2
san="DNS:localhost,IP:127.0.0.1,IP:::1"
for n in "$@"; do
    case $n in
    *:*) san="$san,IP:$n" ;;           # IPv6
    *[!0-9.]*) san="$san,DNS:$n" ;;
    *) san="$san,IP:$n" ;;             # digits and dots: IPv4
    esac
done
first=${1:-localhost}
# shellcheck disable=SC2086
openssl req -new $newkey -nodes -subj "/CN=$first" -keyout "$tmp/leaf.key" \
    -out "$tmp/leaf.csr" 2>/dev/null
printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
    "subjectAltName=$san" >"$tmp/leaf.ext"
openssl x509 -req -in "$tmp/leaf.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -CAserial "$tmp/ca.srl" -days 365 -extfile "$tmp/leaf.ext" \
    -out "$tmp/leaf.pem" 2>/dev/null
if ! openssl verify -CAfile "$dir/ca.pem" "$tmp/leaf.pem" >/dev/null 2>&1; then
    echo "mkcert.sh: the new leaf does not verify against $dir/ca.pem (is ca.key its" \
        "key?): delete $dir" >&2
    exit 1
fi
# whole or not at all: a gatling serving the directory may look at any moment
# (it skips names that begin with a dot)
cat "$tmp/leaf.pem" "$tmp/leaf.key" >"$dir/certs/.server.pem.new"
mv -f "$dir/certs/.server.pem.new" "$leaf"
echo "mkcert.sh: $leaf for $san (CA: $dir/ca.pem)"
