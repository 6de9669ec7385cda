#!/usr/bin/env bash
# Builds the real node's pod sandbox image (pause.Dockerfile) into an OCI archive with
# scripts/images/build-image.sh, cached by content; prints the archive's path. No registry:
# containerd's sandbox_image must be imported, never pulled.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_ROOT="${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}"
ctx="$CACHE_ROOT/images/pause-context"
if [[ ! -x /bin/busybox ]] || ! file -L /bin/busybox 2>/dev/null | grep -q 'statically linked'; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static file >&2
fi
mkdir -p "$ctx"
cp /bin/busybox "$ctx/busybox"
BASE_IMAGE=scratch bash "$HERE/../../../scripts/images/build-image.sh" pause \
  "${CHAMVI_PAUSE_IMAGE:-localhost/chamvi-pause:1}" "$HERE/pause.Dockerfile" "$ctx" "$ctx/busybox"
