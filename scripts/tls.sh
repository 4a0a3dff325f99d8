#!/usr/bin/env bash
# Test certificates for the TLS tests (issue 22), made with openssl in DIR:
#
#   ca.pem, ca-key.pem                the test CA
#   server-cert.pem, server-key.pem   the servers' certificate, signed by the test CA,
#                                     for DNS:localhost only
#   wrong-ca.pem                      a second CA, which signed nothing the servers use
#   client-cert.pem, client-key.pem   signed by the test CA (CN mysqllock-client), for
#                                     the REQUIRE X509 account
#
#   scripts/tls.sh DIR
#
# The server certificate names localhost only: a client that connects to host
# `localhost` over TCP finds its host in it, while to a client that connects to
# `127.0.0.1` it is a certificate for another host (VERIFY_IDENTITY refuses it,
# VERIFY_CA accepts it).
#
# Idempotent and quick (EC P-256 keys): a DIR whose files are all there, chain to the
# test CA and are valid for another day is left as it is; otherwise all are made anew.
# Keys are readable by their owner only (the servers run as the invoking user, or as
# root in the MySQL chroot, which gets copies); certificates by everyone.
set -euo pipefail

dir=${1:?usage: tls.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
command -v openssl >/dev/null || { echo "tls.sh: openssl is missing (apt-get install openssl)" >&2; exit 1; }

# Several scripts may prepare the same DIR at once: one makes the files, the others
# then find them complete.
exec 9>"$dir/.lock"
flock 9

complete() {
  local f
  for f in ca.pem ca-key.pem server-cert.pem server-key.pem wrong-ca.pem client-cert.pem client-key.pem; do
    [ -s "$dir/$f" ] || return 1
  done
  openssl verify -CAfile "$dir/ca.pem" "$dir/server-cert.pem" "$dir/client-cert.pem" >/dev/null 2>&1 || return 1
  for f in ca.pem server-cert.pem wrong-ca.pem client-cert.pem; do
    openssl x509 -in "$dir/$f" -noout -checkend 86400 >/dev/null 2>&1 || return 1
  done
}
complete && exit 0

work=$(mktemp -d "$dir/.new.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 077

# Every extension spelled out here, so the machine's openssl.cnf changes nothing.
# rustls (webpki) wants CA:TRUE on a CA and not on a leaf, and reads the host name from
# subjectAltName only, never from the CN.
cat >"$work/openssl.cnf" <<'CNF'
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF

ossl() {
  openssl "$@" 2>>"$work/openssl.log" || { cat "$work/openssl.log" >&2; echo "tls.sh: openssl $1 failed" >&2; exit 1; }
}

key() { # key FILE: a new EC P-256 key (PKCS#8 PEM)
  ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
}

ca() { # ca NAME CN: a self-signed CA, NAME.pem and NAME-key.pem
  key "$work/$1-key.pem"
  ossl req -config "$work/openssl.cnf" -x509 -new -key "$work/$1-key.pem" -subj "/CN=$2" \
    -days 3650 -sha256 -extensions ca -set_serial "0x$(openssl rand -hex 16)" -out "$work/$1.pem"
}

leaf() { # leaf NAME CN SECTION: NAME-cert.pem and NAME-key.pem, signed by the test CA
  key "$work/$1-key.pem"
  ossl req -config "$work/openssl.cnf" -new -key "$work/$1-key.pem" -subj "/CN=$2" -out "$work/$1.csr"
  ossl x509 -req -in "$work/$1.csr" -CA "$work/ca.pem" -CAkey "$work/ca-key.pem" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 \
    -extfile "$work/openssl.cnf" -extensions "$3" -out "$work/$1-cert.pem"
}

ca ca "mysqllock test CA"
ca wrong-ca "mysqllock wrong CA"
leaf server localhost server
leaf client mysqllock-client client

chmod 644 "$work"/*.pem
chmod 600 "$work"/*-key.pem
for f in ca.pem ca-key.pem server-cert.pem server-key.pem wrong-ca.pem client-cert.pem client-key.pem; do
  mv -f "$work/$f" "$dir/$f"
done
complete || { echo "tls.sh: the certificates made in $dir do not verify" >&2; exit 1; }
