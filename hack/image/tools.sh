#!/usr/bin/env bash
# Install the host tools the image build and its tests use, from Debian's packages, only when
# one is missing (CI starts from a machine that has none of them; a warm machine runs nothing).
#
#   debootstrap  not used to bootstrap: the build resolves packages with apt itself; kept out
#   skopeo       inspects/copies the OCI layout (tests, README's kind/registry recipes)
#   umoci        not needed: hack/image/oci.py writes and reads the layout itself
#   crun, runc   OCI runtimes the smoke tests try in turn (chroot is the fallback)
#   qemu-user-static  runs the arm64 python for the arm64 smoke test
#   dpkg-dev is not needed: dpkg-deb (always present on Debian) extracts the packages.
#
# Prints nothing on stdout; progress on stderr.
set -euo pipefail

log() { echo "[image/tools] $*" >&2; }

# command -> Debian package
declare -A NEED=(
  [skopeo]=skopeo
  [crun]=crun
  [runc]=runc
  [qemu-aarch64-static]=qemu-user-static
  [apt-get]=apt
  [dpkg-deb]=dpkg
)

missing=()
for cmd in "${!NEED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  log "ERROR: missing ${missing[*]}; run as root (or install them: apt-get install ${missing[*]})"
  exit 1
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$LOG" 2>&1 \
  || { tail -30 "$LOG" >&2; exit 1; }
log "installed ${missing[*]}"
