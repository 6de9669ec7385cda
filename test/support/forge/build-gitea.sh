#!/usr/bin/env bash
# Builds Gitea, the real forge the publish tests push to and open pull requests on, from its Go
# module into a cache outside the repo:
#   ${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}/gitea-<version>/{src,bin/gitea}
# Only the Go module proxy is needed; nothing downloads a prebuilt binary.
#
# Why not `go install code.gitea.io/gitea@v1.26.0`: its go.mod has `replace` lines, which
# `go install pkg@version` refuses, so the downloaded module is copied somewhere writable and built
# there. v1.27 needs modules the proxy refuses (docs: FORGE.md), so the version is pinned.
# The copy stays: without the `bindata` tag (which needs the frontend built with npm) Gitea reads
# its templates and locales from disk, and the tests point STATIC_ROOT_PATH at it.
# Idempotent: a binary that reports the wanted version is reused (seconds on a warm machine).
#
# Usage: build-gitea.sh                 (prints the binary's path)
#        build-gitea.sh --print-dir     (prints the cache dir and exits)
set -euo pipefail

VERSION="${CHAMVI_GITEA_VERSION:-v1.26.0}"
CACHE_ROOT="${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}"
DIR="$CACHE_ROOT/gitea-$VERSION"
SRC="$DIR/src"
BIN="$DIR/bin/gitea"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$DIR"
  exit 0
fi

log() { echo "[forge/build-gitea.sh] $*" >&2; }

if [[ -x "$BIN" && -f "$SRC/go.mod" ]] && "$BIN" --version 2>/dev/null | grep -q "version ${VERSION#v} "; then
  log "gitea $VERSION: up to date"
  echo "$BIN"
  exit 0
fi

export GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false"
mkdir -p "$DIR/bin"

# One builder at a time: two test workers starting at once must not both copy into src/.
exec 9>"$DIR/.build.lock"
flock 9

if [[ ! -f "$SRC/go.mod" ]]; then
  log "gitea $VERSION: go mod download"
  mod_dir="$(go mod download -json "code.gitea.io/gitea@$VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",\?$/\1/p')"
  [[ -n "$mod_dir" && -f "$mod_dir/go.mod" ]] || { log "go mod download gave no module dir"; exit 1; }
  rm -rf "$SRC.tmp"
  cp -r "$mod_dir" "$SRC.tmp"
  chmod -R u+w "$SRC.tmp" # the module cache is read-only; go build writes nothing but go.sum may change
  mv "$SRC.tmp" "$SRC"
fi

log "gitea $VERSION: go build (a few minutes on two cores)"
start=$SECONDS
# sqlite: the tests run it on a file database, no server. The version stamp is what `gitea
# --version` prints and what the up-to-date check above reads.
(cd "$SRC" && CGO_ENABLED=1 nice -n 10 go build -p 2 -trimpath \
  -tags "sqlite sqlite_unlock_notify" \
  -ldflags "-s -w -X main.Version=${VERSION#v} -X 'main.Tags=sqlite sqlite_unlock_notify'" \
  -o "$BIN.tmp" .)
mv "$BIN.tmp" "$BIN"
log "gitea: built in $((SECONDS - start))s"
"$BIN" --version | grep -q "version ${VERSION#v} " || { log "built gitea reports the wrong version: $("$BIN" --version)"; exit 1; }
echo "$BIN"
