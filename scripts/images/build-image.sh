#!/usr/bin/env bash
# Builds one of the repository's Dockerfiles with buildah (no daemon) on a base image made
# here from Debian packages (node-base.sh), and writes it as an OCI archive that
# `ctr -n k8s.io images import` loads. Cached by content: the archive's name carries a hash
# of the Dockerfile, the inputs given, the base and these scripts, so an unchanged image is
# not rebuilt, and a changed input always is.
#
# Usage: build-image.sh NAME REF DOCKERFILE CONTEXT INPUT...
#   NAME    short name (sandbox, operator): the output is $OUT/chamvi-NAME-<hash>.oci.tar and
#           $OUT/chamvi-NAME.env (ARCHIVE=, REF=) points at the newest one
#   REF     the image reference stored in the archive (what a pod's `image:` names)
#   INPUT   files or directories whose content the image depends on (hashed, not copied)
# Env:   CHAMVI_IMAGE_DIR (default ~/.cache/chamvi-operator/images), BASE_IMAGE (skip
#        node-base.sh and build on this image instead)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME="$1" REF="$2" DOCKERFILE="$3" CONTEXT="$4"
shift 4
CACHE_ROOT="${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}"
OUT="${CHAMVI_IMAGE_DIR:-$CACHE_ROOT/images}"
log() { echo "[build-image.sh $NAME] $*" >&2; }

command -v buildah >/dev/null && command -v mmdebstrap >/dev/null || {
  log "installing buildah and mmdebstrap (Debian packages)"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah mmdebstrap >&2
}

# buildah's storage lives in the cache, apart from any system storage. vfs: no kernel
# overlay or fuse needed inside a container (slower and larger, but always works).
export BUILDAH="buildah --root $OUT/storage --runroot $OUT/run --storage-driver vfs"
base="${BASE_IMAGE:-$(bash "$HERE/node-base.sh")}"

key="$(
  {
    printf '%s\n' "$REF" "$base"
    sha256sum "$DOCKERFILE" "$HERE/build-image.sh"
    find "$@" -type f -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)"
archive="$OUT/chamvi-$NAME-$key.oci.tar"
if [[ -f "$archive" ]]; then
  log "up to date: $archive"
else
  log "buildah build -f $DOCKERFILE (base $base)"
  start=$SECONDS
  mkdir -p "$OUT"
  # chroot isolation: RUN steps need no user namespaces or runc; they get the host's network
  # (apt and npm reach their registries). Where the host reaches registries through a
  # TLS-inspecting proxy, npm in a RUN step needs the host's CAs: they are bind-mounted for
  # the build only (with an npmrc pointing at them), never written into a layer.
  mounts=()
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    mkdir -p "$OUT/build-mounts"
    printf 'cafile=/run/chamvi-build/ca-certificates.crt\n' >"$OUT/build-mounts/npmrc"
    mounts=(--volume "/etc/ssl/certs/ca-certificates.crt:/run/chamvi-build/ca-certificates.crt:ro"
      --volume "$OUT/build-mounts/npmrc:/usr/local/etc/npmrc:ro")
  fi
  $BUILDAH build --isolation chroot --build-arg "BASE_IMAGE=$base" "${mounts[@]}" \
    -f "$DOCKERFILE" -t "$REF" "$CONTEXT" >&2
  rm -f "$archive.tmp"
  $BUILDAH push --quiet "$REF" "oci-archive:$archive.tmp:$REF" >&2
  mv "$archive.tmp" "$archive"
  # vfs stores every layer as a full copy (an operator build left 15 GB): keep only the base.
  # The archive is the cache; a changed input rebuilds from the base.
  $BUILDAH rmi "$REF" >/dev/null 2>&1 || true
  $BUILDAH rmi --prune >/dev/null 2>&1 || true
  log "built in $((SECONDS - start))s: $archive"
  # Older archives of this image are superseded.
  find "$OUT" -maxdepth 1 -name "chamvi-$NAME-*.oci.tar" ! -name "$(basename "$archive")" -delete
fi
printf 'ARCHIVE=%s\nREF=%s\n' "$archive" "$REF" >"$OUT/chamvi-$NAME.env"
echo "$archive"
