#!/usr/bin/env bash
# `make run`: the operator in the foreground against the dev cluster (.dev-cluster/env).
# Around it, two helpers a real cluster does not need:
#   - git daemon on 127.0.0.1:9418 serving the example repositories (examples/repositories/*)
#     the way a real Git host would, so the demo clones over the network like any run;
#   - the sandbox exec registrar: kwok runs a pod's exec'd commands on this machine, so each
#     sandbox pod gets a temporary workspace and the operator's exec runs the local toolbox.
# The dev configuration allows exactly the example repositories (no file:// URLs).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .dev-cluster/env ] || { echo "run: no dev cluster; start it with: make dev-cluster" >&2; exit 1; }
# shellcheck disable=SC1091
. .dev-cluster/env
state=.dev-cluster/dev-run
mkdir -p "$state/git" "$state/workspaces" .dev-cluster/logs

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

for dir in examples/repositories/*/; do
  name=$(basename "$dir")
  bare="$state/git/$name.git"
  [ -d "$bare" ] && continue
  work=$(mktemp -d)
  cp -R "$dir." "$work/"
  git -C "$work" init -q -b main
  git -C "$work" add -A
  git -C "$work" -c user.name=chamvi -c user.email=demo@chamvi.dev commit -qm "Example repository"
  git clone -q --bare "$work" "$bare"
  rm -rf "$work"
done

if ! alive "$state/git-daemon.pid"; then
  git daemon --reuseaddr --listen=127.0.0.1 --port=9418 --base-path="$PWD/$state/git" --export-all \
    "$PWD/$state/git" >.dev-cluster/logs/git-daemon.log 2>&1 &
  echo $! >"$state/git-daemon.pid"
fi
if ! alive "$state/registrar.pid"; then
  node --import tsx test/support/sandbox-exec-registrar.ts --kubeconfig "$KUBECONFIG" --root "$PWD/$state/workspaces" \
    >.dev-cluster/logs/registrar.log 2>&1 &
  echo $! >"$state/registrar.pid"
fi

kubectl create namespace chamvi-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
export CHAMVI_ALLOW_REPO="git://127.0.0.1/*"  # 9418 is git://'s default port, which a canonical URL leaves out
export CHAMVI_TOOLBOX_COMMAND="$(command -v node) $PWD/sandbox-image/dist/toolbox.mjs"
export CHAMVI_LEADER_ELECTION_NAMESPACE=chamvi-system
export CHAMVI_HTTP_PORT="${CHAMVI_HTTP_PORT:-8080}"
# kwok enforces no NetworkPolicy (and its exec runs the tools on this machine), so the probe
# would rightly find dev sandboxes unisolated and refuse every run: the dev cluster opts in.
export CHAMVI_ALLOW_UNISOLATED_SANDBOXES=true
echo "run: operator against $KUBECONFIG (allowRepo $CHAMVI_ALLOW_REPO); Ctrl-C stops it" >&2
exec node --import tsx operator/src/main.ts
