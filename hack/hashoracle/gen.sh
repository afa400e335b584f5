#!/usr/bin/env bash
# Regenerate tests/unit/launcher/testdata/nodepool_hashes.json: upstream Karpenter's NodePool
# template hash (NodePool.Hash, karpenter.sh/nodepool-hash) for each NodePool in
# nodepool_hash_cases.yaml beside it, as computed by upstream's own Go code (the oracle in this
# directory). The Python hash (karpenter_py/model/hashing.py) is tested against that file, so
# tests and CI need no Go; only changing the cases or the upstream version needs this script.
#
# The oracle binary is built as hack/helm/build.sh builds helm: into a cache dir outside the
# source tree keyed by a hash of everything that determines it,
#   ${KARPY_CACHE:-$HOME/.cache/karpenter-py}/hashoracle/<hash>/hashoracle
# and reused while that exists.
#
# Env:
#   KARPY_CACHE       cache root (default ~/.cache/karpenter-py)
#   KARPY_BUILD_P     go build -p (default: nproc, max 4)
#   GOTOOLCHAIN       honoured as usual (go.mod says which Go the upstream module needs)
set -euo pipefail

KARPENTER_VERSION=v1.14.1 # must match sigs.k8s.io/karpenter in go.mod

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SRC/../.." && pwd)"
TESTDATA="$ROOT/tests/unit/launcher/testdata"
cd "$SRC"

log() { echo "[hashoracle/gen] $*" >&2; }

command -v go >/dev/null || { log "ERROR: 'go' not found in PATH"; exit 1; }

if ! grep -qE "^[[:space:]]*sigs.k8s.io/karpenter ${KARPENTER_VERSION}\$" go.mod; then
  log "ERROR: go.mod does not require sigs.k8s.io/karpenter ${KARPENTER_VERSION}; update gen.sh"
  exit 1
fi

export GOWORK=off CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly"

GOVERSION="$(go env GOVERSION)"
HASH="$(
  {
    echo "go=${GOVERSION} karpenter=${KARPENTER_VERSION}"
    cat go.mod go.sum main.go
  } | sha256sum | cut -c1-16
)"
CACHE="${KARPY_CACHE:-$HOME/.cache/karpenter-py}"
DIR="${CACHE}/hashoracle/${HASH}"

if [[ -x "$DIR/hashoracle" ]]; then
  log "reusing $DIR/hashoracle"
else
  NPROC="$(nproc 2>/dev/null || echo 2)"
  P="${KARPY_BUILD_P:-$((NPROC > 4 ? 4 : NPROC))}"
  TMP="${DIR}.tmp.$$"
  rm -rf "$TMP"
  mkdir -p "$TMP"
  trap 'rm -rf "$TMP"' EXIT
  log "building $DIR/hashoracle (karpenter ${KARPENTER_VERSION}, go ${GOVERSION}, -p ${P})"
  go mod download
  go build -p "$P" -o "$TMP/hashoracle" .
  rm -rf "$DIR"
  mv "$TMP" "$DIR"
  trap - EXIT
  # Keep only the two most recently built oracles.
  ls -1dt "${CACHE}/hashoracle/"*/ 2>/dev/null | tail -n +3 | while read -r old; do rm -rf "$old"; done
fi

# metav1.Time parses into the local zone, and time.Time's hash includes the zone offset:
# upstream's controller runs with a UTC local zone, so the oracle does too.
OUT="$TESTDATA/nodepool_hashes.json"
TZ=UTC "$DIR/hashoracle" <"$TESTDATA/nodepool_hash_cases.yaml" >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "wrote $OUT ($(grep -c '"hash"' "$OUT") NodePools, karpenter ${KARPENTER_VERSION})"
