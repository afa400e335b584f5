#!/usr/bin/env bash
# Build (or reuse) the controller image: an OCI image layout for linux/amd64 and linux/arm64 made
# from Debian bookworm's packages and the locked wheels, with no Docker daemon and no registry
# (hack/image/build.py does the work; hack/image/README.md says how).
#
# The layout goes to a cache dir outside the source tree, keyed by a hash of everything that
# determines it (these scripts, spec.json, the lock file, karpenter_py's sources, pyproject.toml,
# README.md (the wheel's description), examples/, the host Python's version):
#   ${KARPY_CACHE:-$HOME/.cache/karpenter-py}/image/<hash>/layout
# If that exists nothing is built. Finished layers are also cached one by one (image/layers), so
# a change to karpenter_py alone rebuilds only the karpenter-py layer.
# The layout's path is the only thing printed on stdout; progress goes to stderr.
#
#   --dist DIR   also copy the layout to DIR (make image: dist/image), replacing what is there
#
# Env:
#   KARPY_CACHE   cache root (default ~/.cache/karpenter-py)
#   PYTHON        the Python whose pip and compileall build it (default .venv/bin/python; 3.11)
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SRC/../.." && pwd)"
cd "$ROOT"

log() { echo "[image/build] $*" >&2; }

DIST=""
while (($#)); do
  case "$1" in
    --dist) DIST="$2"; shift 2 ;;
    *) log "unknown argument $1"; exit 2 ;;
  esac
done

PY="${PYTHON:-.venv/bin/python}"
[[ -x "$PY" ]] || { log "ERROR: $PY not found (run make venv)"; exit 1; }

bash "$SRC/tools.sh"
"$PY" "$SRC/lock.py" --check

HASH="$(
  {
    "$PY" -c 'import sys; print(sys.version)'
    cat "$SRC/build.sh" "$SRC/build.py" "$SRC/oci.py" "$SRC/lock.py" "$SRC/spec.json" "$SRC/requirements.lock"
    cat pyproject.toml README.md
    find karpenter_py examples -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort | while read -r f; do
      echo "$f"
      cat "$f"
    done
  } | sha256sum | cut -c1-16
)"
CACHE="${KARPY_CACHE:-$HOME/.cache/karpenter-py}"
DIR="${CACHE}/image/${HASH}"

copy_dist() {
  [[ -n "$DIST" ]] || return 0
  rm -rf "$DIST"
  mkdir -p "$(dirname "$DIST")"
  cp -r "$DIR/layout" "$DIST"
  log "copied to $DIST"
}

if [[ -f "$DIR/layout/index.json" ]]; then
  log "reusing $DIR/layout"
  copy_dist
  echo "$DIR/layout"
  exit 0
fi

mkdir -p "${CACHE}/image"
# Serialise concurrent builders (make + pytest, parallel CI steps).
exec 9>"${CACHE}/image/.build.lock"
if command -v flock >/dev/null; then
  log "waiting for build lock ${CACHE}/image/.build.lock"
  flock 9
fi
if [[ ! -f "$DIR/layout/index.json" ]]; then
  TMP="${DIR}.tmp.$$"
  rm -rf "$TMP"
  mkdir -p "$TMP"
  trap 'rm -rf "$TMP"' EXIT
  start=$(date +%s)
  log "building $DIR (linux/amd64 + linux/arm64)"
  "$PY" "$SRC/build.py" oci --out "$TMP/layout" --layer-cache "${CACHE}/image/layers" --report "$TMP/report.json"
  rm -rf "$DIR"
  mv "$TMP" "$DIR"
  trap - EXIT
  # Keep the cache bounded (~120 MB per layout): drop leftovers of killed builds and all but the
  # two most recently built layouts. We hold the lock, so no other image build is in flight.
  rm -rf "${CACHE}/image/"*.tmp.*
  ls -1dt "${CACHE}/image/"*/ 2>/dev/null | grep -v '/layers/$' | tail -n +3 | while read -r old; do rm -rf "$old"; done
  log "done in $(($(date +%s) - start))s"
else
  log "reusing $DIR/layout (built by a concurrent run)"
fi
copy_dist
echo "$DIR/layout"
