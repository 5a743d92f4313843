#!/usr/bin/env bash
# Writes the files k8s/kustomization.yaml's secretGenerator reads, into k8s/secrets/
# (git-ignored), with openssl only. Run it once before `kubectl apply -k k8s/`.
#
#   ca.crt, ca.key            a private CA (P-256, 10 years); ca.key never leaves this directory
#   extender.crt, .key        the extender's certificate (1 year): the Service's DNS names,
#                             localhost and 127.0.0.1; serverAuth, and clientAuth so its own
#                             probes can present it
#   scheduler.crt, .key       kube-scheduler's client certificate (CN=schedtune-scheduler)
#   volcano.crt, .key         a client certificate for Volcano's TLS sidecar (docs/security.md)
#   redis-password            Redis's requirepass (64 hex digits)
#   redis-url                 REDIS_URL with that password, for the extender, monitor, node watcher
#   signing-key               the key that signs reservations written on pods (64 hex digits)
#
# Existing files are kept, so running it again changes nothing. To rotate something, delete
# its files and run it again (deleting ca.key re-issues everything), then `kubectl apply -k
# k8s/`: the generated Secret names change and the Deployments roll.
#
# usage: k8s/make-secrets.sh [DIR] [NAMESPACE]     (default: k8s/secrets schedtune)
set -euo pipefail

dir=${1:-"$(cd "$(dirname "$0")" && pwd)/secrets"}
namespace=${2:-schedtune}
service=schedtune-extender
umask 077
mkdir -p "$dir"
cd "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

random_hex() { openssl rand -hex 32 | tr -d "\n"; }

new_key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1"; }

# issue NAME CN EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]: NAME.crt/.key signed by the CA
issue() {
  local name=$1 cn=$2 eku=$3 san=${4:-}
  # kept while it verifies against this CA (a new CA or an expired certificate: re-issued)
  if [[ -s $name.crt && -s $name.key ]] && openssl verify -CAfile ca.crt "$name.crt" >/dev/null 2>&1; then
    return 0
  fi
  new_key "$name.key"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature"
    echo "extendedKeyUsage = $eku"
    echo "subjectKeyIdentifier = hash"
    echo "authorityKeyIdentifier = keyid"
    [[ -n $san ]] && echo "subjectAltName = $san"
  } >"$work/$name.ext"
  openssl req -new -key "$name.key" -subj "/O=schedtune/CN=$cn" -out "$work/$name.csr"
  openssl x509 -req -in "$work/$name.csr" -CA ca.crt -CAkey ca.key -days 365 \
    -set_serial "0x$(openssl rand -hex 16)" -extfile "$work/$name.ext" -out "$name.crt" \
    2>"$work/err" || { cat "$work/err" >&2; return 1; }
}

if [[ ! -s ca.crt || ! -s ca.key ]]; then
  new_key ca.key
  cat >"$work/ca.cnf" <<CNF
[req]
distinguished_name = dn
prompt = no
[dn]
O = schedtune
CN = schedtune-ca
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
CNF
  openssl req -x509 -new -key ca.key -config "$work/ca.cnf" -extensions ca -days 3650 \
    -set_serial "0x$(openssl rand -hex 16)" -out ca.crt
fi

fqdn=$service.$namespace.svc
issue extender "$fqdn" "serverAuth, clientAuth" \
  "DNS:$service, DNS:$service.$namespace, DNS:$fqdn, DNS:$fqdn.cluster.local, DNS:localhost, IP:127.0.0.1"
issue scheduler schedtune-scheduler clientAuth
issue volcano volcano-scheduler clientAuth

[[ -s redis-password ]] || random_hex >redis-password
[[ -s signing-key ]] || random_hex >signing-key
printf 'redis://:%s@schedtune-redis.%s.svc:6379/0' "$(tr -d '\n' <redis-password)" "$namespace" \
  >redis-url
echo "k8s secrets in $dir: $(ls | tr '\n' ' ')" >&2
