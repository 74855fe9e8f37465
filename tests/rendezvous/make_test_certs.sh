#!/usr/bin/env bash
# Throwaway TLS material for the security tests, made with openssl at test time (never committed):
#
#   make_test_certs.sh DIR [EXTRA_SAN]
#
# writes into DIR (created; files of a complete earlier run are reused):
#   ca.pem ca.key              a test CA
#   server.pem server.key      signed by it: subjectAltName IP:127.0.0.1, IP:::1, DNS:localhost
#                              (+ EXTRA_SAN, e.g. "IP:10.217.3.1"), serverAuth + clientAuth
#   client.pem client.key      signed by it, clientAuth (mutual TLS)
#   wrongname.pem wrongname.key  signed by it, but only for DNS:elsewhere.invalid
#   other-ca.pem other-ca.key  an unrelated CA (a client trusting it must refuse the server)
# EC P-256 keys (fast to make), valid for 2 days. Keys are 0600.
set -euo pipefail
DIR=${1:?usage: make_test_certs.sh DIR [EXTRA_SAN]}
EXTRA=${2:-}
mkdir -p "$DIR"
cd "$DIR"
[[ -s done && "$(cat done)" == "v2 san=$EXTRA" ]] && exit 0
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # name subject
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}
leaf() {  # name subject extensions
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" -days 2 \
    -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
san="IP:127.0.0.1,IP:::1,DNS:localhost${EXTRA:+,$EXTRA}"
ca ca "ddprun test CA"
ca other-ca "unrelated test CA"
# clientAuth too: etcd's JSON gateway connects to its own gRPC port with the server certificate.
leaf server "ddprund test" "subjectAltName=$san
extendedKeyUsage=serverAuth,clientAuth"
leaf client "ddprun agent test" "extendedKeyUsage=clientAuth"
leaf wrongname "elsewhere" "subjectAltName=DNS:elsewhere.invalid
extendedKeyUsage=serverAuth"
chmod 644 ./*.pem
echo "v2 san=$EXTRA" >done
