#!/usr/bin/env bash
# Builds the local control plane's programs from source into a cache outside the repo:
#   ${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}/<k8s-version>/bin/
# kube-apiserver, kube-scheduler, kube-controller-manager and kubectl come from the Go
# module k8s.io/kubernetes, kwok (patched) and helm from source too; redis-server is a
# Debian package, etcd is Debian's if new enough, else built from source. Nothing here
# downloads a prebuilt binary. Idempotent: a binary that already reports the right version
# is reused, so a warm rerun takes seconds.
#
# Usage: build.sh [k8s] [kwok] [helm] [etcd] [redis]   (no argument: all of them)
#        build.sh --print-bin-dir                        (prints the bin dir and exits)
set -euo pipefail

K8S_VERSION="${CHAMVI_K8S_VERSION:-v1.34.4}"
KWOK_VERSION="${CHAMVI_KWOK_VERSION:-v0.7.0}"
HELM_VERSION="${CHAMVI_HELM_VERSION:-v3.22.0}"
ETCD_VERSION="${CHAMVI_ETCD_VERSION:-v3.6.16}"
CACHE_ROOT="${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}"
CACHE="$CACHE_ROOT/$K8S_VERSION"
BIN="$CACHE/bin"

if [[ "${1:-}" == "--print-bin-dir" ]]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN"
# One Go build at a time, two compile jobs: the machine has two cores and other work.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=mod -p=2 -buildvcs=false"

log() { echo "[build.sh] $*" >&2; }

# The staging modules' tags are v0.<minor>.<patch> for k8s v1.<minor>.<patch>.
staging_version() { echo "v0.${K8S_VERSION#v1.}"; }

k8s_ok() {
  local want="Kubernetes $K8S_VERSION" b
  for b in kube-apiserver kube-scheduler kube-controller-manager; do
    [[ -x "$BIN/$b" && "$("$BIN/$b" --version 2>/dev/null)" == "$want" ]] || return 1
  done
  [[ -x "$BIN/kubectl" ]] &&
    "$BIN/kubectl" version --client -o json 2>/dev/null | grep -q "\"gitVersion\": \"$K8S_VERSION\""
}

build_k8s() {
  if k8s_ok; then log "kubernetes $K8S_VERSION: up to date"; return; fi
  local mod="$CACHE/k8s-wrapper" sv kdir
  sv="$(staging_version)"
  mkdir -p "$mod"
  log "kubernetes $K8S_VERSION: resolving module"
  kdir="$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$kdir" && -f "$kdir/go.mod" ]] || { log "cannot download k8s.io/kubernetes@$K8S_VERSION"; exit 1; }

  # k8s.io/kubernetes' own replace lines (staging => ./staging/src/...) are ignored when it
  # is a dependency, so its `k8s.io/X v0.0.0` requirements must be pinned here instead.
  {
    echo "module chamvi.local/k8s-wrapper"
    echo
    grep -E '^go [0-9.]+$' "$kdir/go.mod"
    grep -E '^godebug ' "$kdir/go.mod" || true
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$kdir/go.mod" |
      awk -v sv="$sv" '{ print "replace " $1 " => " $1 " " sv }'
  } >"$mod/go.mod"

  local pkg=k8s.io/component-base/version cpkg=k8s.io/client-go/pkg/version
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w"
  for p in "$pkg" "$cpkg"; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done

  log "kubernetes $K8S_VERSION: go build (tens of minutes the first time)"
  local start=$SECONDS
  (cd "$mod" && go build -trimpath -ldflags "$ld" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl)
  log "kubernetes $K8S_VERSION: built in $((SECONDS - start))s"
  k8s_ok || { log "built kubernetes binaries do not report $K8S_VERSION"; exit 1; }
}

# `go version -m` shows the main module's version for binaries built by `go install m@v`;
# kwok and helm do not report it reliably through their own version commands otherwise.
built_from() { # binary module version
  [[ -x "$1" ]] && go version -m "$1" 2>/dev/null | grep -qE "^\s+mod\s+$2\s+$3(\s|$)"
}

# kwok is built from its v0.7.0 source with kwok-exec.patch applied: upstream turns every
# failing exec'd command into exit code 1 (it wraps *os/exec.ExitError, which the kubelet
# streaming server does not recognise) and never closes the command's stdin, so
# `kubectl exec -i ... -- cat >file` hangs. The Exec/ClusterExec CRDs come from the same
# source tree. The stamp records version and patch so a changed patch rebuilds.
KWOK_PATCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kwok-exec.patch"
build_kwok() {
  local src="$CACHE/kwok-src" stamp want
  want="$KWOK_VERSION $(sha256sum "$KWOK_PATCH" | cut -d' ' -f1)"
  stamp="$CACHE/kwok.stamp"
  if [[ -x "$BIN/kwok" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
    "$BIN/kwok" --version 2>/dev/null | grep -q "${KWOK_VERSION}"; then
    log "kwok $KWOK_VERSION (patched): up to date"; return
  fi
  local dir
  dir="$(cd "$CACHE" && GOFLAGS= go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$dir" && -f "$dir/go.mod" ]] || { log "cannot download sigs.k8s.io/kwok@$KWOK_VERSION"; exit 1; }
  rm -rf "$src"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  patch -s -p1 -d "$src" <"$KWOK_PATCH"
  rm -rf "$CACHE/kwok-crds"
  mkdir -p "$CACHE/kwok-crds"
  cp "$src"/kustomize/crd/bases/kwok.x-k8s.io_{execs,clusterexecs}.yaml "$CACHE/kwok-crds/"
  log "kwok $KWOK_VERSION (patched): go build"
  local start=$SECONDS
  (cd "$src" && GOFLAGS="-mod=mod -p=2 -buildvcs=false" go build -trimpath -ldflags "-s -w" \
    -o "$BIN/kwok" ./cmd/kwok)
  log "kwok: built in $((SECONDS - start))s"
  echo "$want" >"$stamp"
}

build_helm() {
  if built_from "$BIN/helm" helm.sh/helm/v3 "$HELM_VERSION"; then
    log "helm $HELM_VERSION: up to date"; return
  fi
  log "helm $HELM_VERSION: go install"
  GOFLAGS="-p=2 -buildvcs=false" GOBIN="$BIN" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

APT_UPDATED=0
apt_install() { # package
  if ! command -v apt-get >/dev/null; then log "no apt-get; install $1 yourself"; return 1; fi
  local sudo=""
  [[ $EUID -ne 0 ]] && sudo="sudo"
  if [[ $APT_UPDATED -eq 0 ]]; then $sudo apt-get update -qq >&2; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$1" >&2
}

# etcd: Debian's etcd-server when it is new enough, otherwise built from source. Debian 12
# ships 3.4.23, and kube-apiserver 1.34 turns RequestWatchProgress off for etcd older than
# 3.4.31/3.5.13; client-go's streaming list then fails on every watch and falls back with
# backoff, so kwok and the controllers see pods seconds late. The control plane runs
# $BIN/etcd, a symlink to the Debian binary or the one built here.
etcd_version_of() { # binary; prints nothing (and succeeds) when it is missing or broken
  [[ -x "$1" ]] || return 0
  { "$1" --version 2>/dev/null || true; } | sed -n 's/^etcd Version: //p' | head -1
}
etcd_new_enough() { # version
  local v="$1" major minor patch
  IFS=. read -r major minor patch <<<"$v"
  [[ -n "$patch" ]] || return 1
  ((major > 3 || (major == 3 && minor >= 6) ||
    (major == 3 && minor == 5 && patch >= 13) || (major == 3 && minor == 4 && patch >= 31)))
}
build_etcd() {
  local v
  v="$(etcd_version_of "$BIN/etcd")"
  if [[ -n "$v" ]] && etcd_new_enough "$v"; then log "etcd $v: up to date"; return; fi
  if ! command -v etcd >/dev/null; then apt_install etcd-server || true; fi
  if command -v etcd >/dev/null; then
    v="$(etcd_version_of "$(command -v etcd)")"
    if etcd_new_enough "$v"; then
      ln -sf "$(command -v etcd)" "$BIN/etcd"
      log "etcd $v: using $(command -v etcd)"
      return
    fi
    log "etcd: Debian's $v is older than 3.5.13; building $ETCD_VERSION from source"
  fi
  # etcd's server module has replace lines of its own (../api, ...), which only apply
  # when it is the main module, so build it from a wrapper that requires it.
  local mod="$CACHE/etcd-wrapper"
  mkdir -p "$mod"
  printf 'module chamvi.local/etcd-wrapper\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$ETCD_VERSION" >"$mod/go.mod"
  log "etcd $ETCD_VERSION: go build"
  local start=$SECONDS
  rm -f "$BIN/etcd"
  (cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
  log "etcd: built in $((SECONDS - start))s"
  v="$(etcd_version_of "$BIN/etcd")"
  etcd_new_enough "$v" || { log "built etcd reports '$v'"; exit 1; }
}

build_redis() {
  if command -v redis-server >/dev/null; then log "redis-server: present"; return; fi
  apt_install redis-server
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(etcd redis kwok helm k8s)
for t in "${targets[@]}"; do
  case "$t" in
    k8s) build_k8s ;;
    kwok) build_kwok ;;
    helm) build_helm ;;
    etcd) build_etcd ;;
    redis) build_redis ;;
    *) log "unknown target $t"; exit 2 ;;
  esac
done
echo "$BIN"
