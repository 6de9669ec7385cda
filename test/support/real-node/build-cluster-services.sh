#!/usr/bin/env bash
# Builds the cluster services the real node runs for pods that use Services and names (the
# in-cluster operator, its bundled Redis; docs/real-node.md "Services and DNS") from source
# into the control plane's cache (${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}/<k8s-version>/bin):
#   kube-proxy  from k8s.io/kubernetes at the control plane's (and the kubelet's) version,
#               through the wrapper module test/support/control-plane/build.sh writes;
#   coredns     the cluster DNS every conformant cluster has (its kubernetes plugin), with
#               `go install` from the Go module proxy.
# Nothing here downloads a prebuilt binary. Idempotent (a version check when built).
#
# Usage: build-cluster-services.sh [kube-proxy] [coredns]   (no argument: both)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="${CHAMVI_K8S_VERSION:-v1.34.4}"
COREDNS_VERSION="${CHAMVI_COREDNS_VERSION:-v1.15.0}"
BIN="$(bash "$HERE/../control-plane/build.sh" --print-bin-dir)"
CACHE="$(dirname "$BIN")"

mkdir -p "$BIN"
export GOTOOLCHAIN=local CGO_ENABLED=0

log() { echo "[real-node/build-cluster-services.sh] $*" >&2; }

build_kube_proxy() {
  if [[ -x "$BIN/kube-proxy" && "$("$BIN/kube-proxy" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]]; then
    log "kube-proxy $K8S_VERSION: up to date"; return
  fi
  local mod="$CACHE/k8s-wrapper"
  if [[ ! -f "$mod/go.mod" ]]; then
    log "no $mod/go.mod: building the control plane first"
    bash "$HERE/../control-plane/build.sh" k8s >/dev/null
  fi
  # The same version stamp as the kubelet (build.sh): the binary reports the version it is.
  local pkg=k8s.io/component-base/version cpkg=k8s.io/client-go/pkg/version
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w"
  for p in "$pkg" "$cpkg"; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "kube-proxy $K8S_VERSION: go build"
  local start=$SECONDS
  (cd "$mod" && GOFLAGS="-mod=mod -p=2 -buildvcs=false" nice -n 10 go build -trimpath -ldflags "$ld" -o "$BIN/kube-proxy" k8s.io/kubernetes/cmd/kube-proxy)
  log "kube-proxy: built in $((SECONDS - start))s"
  [[ "$("$BIN/kube-proxy" --version)" == "Kubernetes $K8S_VERSION" ]] || { log "built kube-proxy reports the wrong version"; exit 1; }
}

build_coredns() {
  if [[ -x "$BIN/coredns" ]] &&
    go version -m "$BIN/coredns" 2>/dev/null | grep -qE "^\s+mod\s+github.com/coredns/coredns\s+$COREDNS_VERSION(\s|$)"; then
    log "coredns $COREDNS_VERSION: up to date"; return
  fi
  log "coredns $COREDNS_VERSION: go install"
  local start=$SECONDS
  GOFLAGS="-p=2 -buildvcs=false" GOBIN="$BIN" nice -n 10 go install -trimpath -ldflags "-s -w" \
    "github.com/coredns/coredns@$COREDNS_VERSION"
  log "coredns: built in $((SECONDS - start))s"
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(kube-proxy coredns)
for t in "${targets[@]}"; do
  case "$t" in
    kube-proxy) build_kube_proxy ;;
    coredns) build_coredns ;;
    *) log "unknown target $t"; exit 2 ;;
  esac
done
echo "$BIN"
