#!/usr/bin/env bash
# Build (or reuse) a real helm binary from Go modules: helm.sh/helm/v3/cmd/helm at the version
# go.mod's tool directive pins (the module graph is helm's own; go.sum locks it).
#
# The binary goes to a cache dir outside the source tree, keyed by a hash of everything that
# determines it:
#   ${KARPY_CACHE:-$HOME/.cache/karpenter-py}/helm/<hash>/helm
# If that file exists nothing is built. The path of the binary is the only thing printed on
# stdout; progress goes to stderr.
#
# The cache lives beside bin/ (the control plane's), not inside it: hack/controlplane/build.sh
# keeps only its three newest dirs under bin/, and the two builds must not prune each other.
#
# Env:
#   KARPY_CACHE       cache root (default ~/.cache/karpenter-py)
#   KARPY_BUILD_P     go build -p (default: nproc, max 4)
#   GOTOOLCHAIN       honoured as usual (Go >= 1.26 needed)
set -euo pipefail

HELM_VERSION=v3.22.0 # must match helm.sh/helm/v3 in go.mod

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$SRC"

log() { echo "[helm/build] $*" >&2; }

command -v go >/dev/null || { log "ERROR: 'go' not found in PATH (need Go >= 1.26)"; exit 1; }

if ! grep -qE "^[[:space:]]*helm.sh/helm/v3 ${HELM_VERSION}( // indirect)?\$" go.mod; then
  log "ERROR: go.mod does not require helm.sh/helm/v3 ${HELM_VERSION}; update HELM_VERSION in build.sh"
  exit 1
fi

GOVERSION="$(GOWORK=off go env GOVERSION)"
HASH="$(
  {
    echo "go=${GOVERSION} helm=${HELM_VERSION}"
    cat go.mod go.sum build.sh
  } | sha256sum | cut -c1-16
)"
CACHE="${KARPY_CACHE:-$HOME/.cache/karpenter-py}"
DIR="${CACHE}/helm/${HASH}"

if [[ -x "$DIR/helm" ]]; then
  log "reusing $DIR/helm"
  echo "$DIR/helm"
  exit 0
fi

mkdir -p "${CACHE}/helm"
# Serialise concurrent builders (make + pytest, parallel CI steps).
exec 9>"${CACHE}/helm/.build.lock"
if command -v flock >/dev/null; then
  log "waiting for build lock ${CACHE}/helm/.build.lock"
  flock 9
fi
if [[ -x "$DIR/helm" ]]; then
  log "reusing $DIR/helm (built by a concurrent run)"
  echo "$DIR/helm"
  exit 0
fi

TMP="${DIR}.tmp.$$"
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

NPROC="$(nproc 2>/dev/null || echo 2)"
P="${KARPY_BUILD_P:-$((NPROC > 4 ? 4 : NPROC))}"

export GOWORK=off CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly"

# Version strings as helm's own release build sets them: `helm version` reads v3.22.0, and the
# Kubernetes version that `helm lint`/`helm template` assume by default follows the client-go
# minor helm is built with (client-go v0.X.Y -> Kubernetes 1.X), as helm's Makefile derives it.
CLIENT_GO="$(go list -m -f '{{.Version}}' k8s.io/client-go)" # v0.37.0
cg="${CLIENT_GO#v}"
K8S_MAJOR=$((${cg%%.*} + 1))
rest="${cg#*.}"
K8S_MINOR="${rest%%.*}"
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  LDFLAGS+=" -X ${pkg}.k8sVersionMajor=${K8S_MAJOR} -X ${pkg}.k8sVersionMinor=${K8S_MINOR}"
done

start=$(date +%s)
log "building $DIR/helm (helm ${HELM_VERSION}, go ${GOVERSION}, -p ${P}); a cold build takes a few minutes on 2 cores"
go mod download
go build -p "$P" -ldflags "$LDFLAGS" -o "$TMP/helm" helm.sh/helm/v3/cmd/helm
"$TMP/helm" version --short >&2

rm -rf "$DIR"
mv "$TMP" "$DIR"
trap - EXIT
# Keep the cache bounded (~60 MB per dir): drop leftovers of killed builds and all but the two
# most recently built dirs. We hold the lock, so no other helm build is in flight.
rm -rf "${CACHE}/helm/"*.tmp.*
ls -1dt "${CACHE}/helm/"*/ 2>/dev/null | tail -n +3 | while read -r old; do rm -rf "$old"; done
log "done in $(($(date +%s) - start))s"
echo "$DIR/helm"
