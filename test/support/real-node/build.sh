#!/usr/bin/env bash
# Builds the real node's programs from source into the control plane's cache
# (${CHAMVI_CACHE:-$HOME/.cache/chamvi-operator}/<k8s-version>/bin, beside kube-apiserver):
#   kubelet      from k8s.io/kubernetes at the control plane's version, through the same
#                wrapper module test/support/control-plane/build.sh writes, so the Go build
#                cache it left makes this a matter of seconds to minutes, not tens of minutes;
#   kube-router  (firewall-only mode is the NetworkPolicy enforcer; see docs/real-node.md).
# and installs the Debian packages the node runs: containerd (with ctr), runc, the CNI
# plugins, iptables and ipset. Nothing here downloads a prebuilt binary. Idempotent.
#
# Usage: build.sh [packages] [kubelet] [kube-router]   (no argument: all of them)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="${CHAMVI_K8S_VERSION:-v1.34.4}"
KUBE_ROUTER_VERSION="${CHAMVI_KUBE_ROUTER_VERSION:-v2.1.0}"
BIN="$(bash "$HERE/../control-plane/build.sh" --print-bin-dir)"
CACHE="$(dirname "$BIN")"

mkdir -p "$BIN"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=mod -p=2 -buildvcs=false"

log() { echo "[real-node/build.sh] $*" >&2; }

# Debian packages: command -> package.
PACKAGES=(containerd:containerd ctr:containerd runc:runc iptables:iptables ipset:ipset)
CNI_DIR=/usr/lib/cni
install_packages() {
  local missing=() pair
  for pair in "${PACKAGES[@]}"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [[ -x "$CNI_DIR/bridge" ]] || missing+=(containernetworking-plugins)
  if [[ ${#missing[@]} -eq 0 ]]; then log "packages: present"; return; fi
  local sudo=""
  [[ $EUID -ne 0 ]] && sudo="sudo"
  log "packages: installing ${missing[*]}"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    $(printf '%s\n' "${missing[@]}" | sort -u) >&2
}

build_kubelet() {
  if [[ -x "$BIN/kubelet" && "$("$BIN/kubelet" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]]; then
    log "kubelet $K8S_VERSION: up to date"; return
  fi
  local mod="$CACHE/k8s-wrapper"
  if [[ ! -f "$mod/go.mod" ]]; then
    log "no $mod/go.mod: building the control plane first"
    bash "$HERE/../control-plane/build.sh" k8s >/dev/null
  fi
  local pkg=k8s.io/component-base/version cpkg=k8s.io/client-go/pkg/version
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w"
  for p in "$pkg" "$cpkg"; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "kubelet $K8S_VERSION: go build"
  local start=$SECONDS
  (cd "$mod" && nice -n 10 go build -trimpath -ldflags "$ld" -o "$BIN/kubelet" k8s.io/kubernetes/cmd/kubelet)
  log "kubelet: built in $((SECONDS - start))s"
  [[ "$("$BIN/kubelet" --version)" == "Kubernetes $K8S_VERSION" ]] || { log "built kubelet reports the wrong version"; exit 1; }
}

# Test infrastructure only: never shipped, run on machines without an outside network.
# Advisories are reported against this version (see docs/real-node.md).
build_kube_router() {
  if [[ -x "$BIN/kube-router" ]] &&
    go version -m "$BIN/kube-router" 2>/dev/null | grep -qE "^\s+mod\s+github.com/cloudnativelabs/kube-router/v2\s+$KUBE_ROUTER_VERSION(\s|$)"; then
    log "kube-router $KUBE_ROUTER_VERSION: up to date"; return
  fi
  log "kube-router $KUBE_ROUTER_VERSION: go install"
  local start=$SECONDS
  GOFLAGS="-p=2 -buildvcs=false" GOBIN="$BIN" nice -n 10 go install -trimpath -ldflags "-s -w" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
  log "kube-router: built in $((SECONDS - start))s"
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(packages kubelet kube-router)
for t in "${targets[@]}"; do
  case "$t" in
    packages) install_packages ;;
    kubelet) build_kubelet ;;
    kube-router) build_kube_router ;;
    *) log "unknown target $t"; exit 2 ;;
  esac
done
echo "$BIN"
