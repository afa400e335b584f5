#!/usr/bin/env bash
# Build (or reuse) the local control-plane binaries:
#   kube-apiserver, kube-scheduler, kube-controller-manager  (k8s.io/kubernetes, see go.mod)
#   etcd                                                    (go.etcd.io/etcd/server/v3, see go.mod)
#   kwok                                                    (sigs.k8s.io/kwok, its own module graph)
#
# Binaries go to a cache dir outside the source tree, keyed by a hash of everything that
# determines them:
#   ${KARPY_CACHE:-$HOME/.cache/karpenter-py}/bin/<hash>/
# If that dir already holds every binary, nothing is built. The bin dir is the only thing
# printed on stdout; progress goes to stderr.
#
# Env:
#   KARPY_CACHE       cache root (default ~/.cache/karpenter-py)
#   KARPY_BUILD_P     go build -p (default: nproc, max 4)  -- 2 on the 2-core CI box
#   GOTOOLCHAIN       honoured as usual (Go >= 1.26 needed; the Go proxy serves toolchains)
set -euo pipefail

KUBE_VERSION=v1.37.2 # must match k8s.io/kubernetes in go.mod
KWOK_VERSION=v0.8.0
BINARIES=(kube-apiserver kube-scheduler kube-controller-manager etcd kwok)

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$SRC"

log() { echo "[controlplane/build] $*" >&2; }

command -v go >/dev/null || { log "ERROR: 'go' not found in PATH (need Go >= 1.26)"; exit 1; }

# The go.mod's k8s version and KUBE_VERSION must agree (the version is injected by ldflags).
if ! grep -qE "^[[:space:]]*k8s.io/kubernetes ${KUBE_VERSION}\$" go.mod; then
  log "ERROR: go.mod does not require k8s.io/kubernetes ${KUBE_VERSION}; update KUBE_VERSION in build.sh"
  exit 1
fi

GOVERSION="$(GOWORK=off go env GOVERSION)"
HASH="$(
  {
    echo "go=${GOVERSION} kube=${KUBE_VERSION} kwok=${KWOK_VERSION}"
    cat go.mod go.sum build.sh
    find cmd -name '*.go' -type f | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -c1-16
)"
CACHE="${KARPY_CACHE:-$HOME/.cache/karpenter-py}"
BIN="${CACHE}/bin/${HASH}"

have_all() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$1/$b" ]] || return 1; done
}

if have_all "$BIN"; then
  log "reusing $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "${CACHE}/bin"
# Serialise concurrent builders (make + pytest, parallel CI steps).
exec 9>"${CACHE}/bin/.build.lock"
if command -v flock >/dev/null; then
  log "waiting for build lock ${CACHE}/bin/.build.lock"
  flock 9
fi
if have_all "$BIN"; then
  log "reusing $BIN (built by a concurrent run)"
  echo "$BIN"
  exit 0
fi

TMP="${BIN}.tmp.$$"
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

NPROC="$(nproc 2>/dev/null || echo 2)"
P="${KARPY_BUILD_P:-$((NPROC > 4 ? 4 : NPROC))}"

export GOWORK=off CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly"

major_minor="${KUBE_VERSION#v}"
KMAJOR="${major_minor%%.*}"
rest="${major_minor#*.}"
KMINOR="${rest%%.*}"
# buildDate = the release's publication time from the module proxy: reproducible binaries, and
# /version reads like the upstream release's.
BUILD_DATE="$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X ${pkg}.gitVersion=${KUBE_VERSION}"
  LDFLAGS+=" -X ${pkg}.gitMajor=${KMAJOR}"
  LDFLAGS+=" -X ${pkg}.gitMinor=${KMINOR}"
  LDFLAGS+=" -X ${pkg}.gitTreeState=clean"
  LDFLAGS+=" -X ${pkg}.buildDate=${BUILD_DATE}"
  LDFLAGS+=" -X ${pkg}.gitCommit=" # unknown via the module proxy: empty, not the $Format:%H$ placeholder
done

start=$(date +%s)
log "building into $BIN (go ${GOVERSION}, -p ${P}); a cold build takes ~15-40 min on 2 cores"
log "downloading modules"
go mod download
log "go build kube-apiserver kube-scheduler kube-controller-manager etcd"
go build -p "$P" -ldflags "$LDFLAGS" -o "$TMP/" \
  ./cmd/kube-apiserver ./cmd/kube-scheduler ./cmd/kube-controller-manager ./cmd/etcd
log "control plane built in $(($(date +%s) - start))s"

# kwok: its own module graph (k8s 0.36 libraries); no replace directives, so go install works.
log "go install sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
GOFLAGS="-trimpath -buildvcs=false" GOBIN="$TMP" go install -p "$P" -ldflags "-s -w" \
  "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"

have_all "$TMP" || { log "ERROR: build finished but binaries are missing in $TMP"; ls -l "$TMP" >&2; exit 1; }
rm -rf "$BIN"
mv "$TMP" "$BIN"
trap - EXIT
# Keep the cache bounded (~400 MB per dir): drop leftovers of killed builds and all but the
# three most recently built bin dirs. We hold the lock, so no other build is in flight.
rm -rf "${CACHE}/bin/"*.tmp.*
ls -1dt "${CACHE}/bin/"*/ 2>/dev/null | tail -n +4 | while read -r old; do rm -rf "$old"; done
log "done in $(($(date +%s) - start))s"
echo "$BIN"
