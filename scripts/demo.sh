#!/usr/bin/env bash
# `make demo`: a scripted CodingRun end to end on the dev cluster, with no API key. Starts
# the operator in the background (scripts/dev-run.sh), applies examples/demo.yaml, shows
# progress with `kubectl get crun -w` until the run ends, prints its diff with the plugin,
# and leaves the cluster up.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
# shellcheck disable=SC1091
. .dev-cluster/env
state=.dev-cluster/dev-run
mkdir -p "$state" .dev-cluster/logs

if ! { [ -f "$state/operator.pid" ] && kill -0 "$(cat "$state/operator.pid")" 2>/dev/null; }; then
  bash scripts/dev-run.sh >.dev-cluster/logs/operator.log 2>&1 &
  echo $! >"$state/operator.pid"
fi
for _ in $(seq 1 120); do
  grep -q '"caches synced; reconciling"' .dev-cluster/logs/operator.log 2>/dev/null && break
  kill -0 "$(cat "$state/operator.pid")" 2>/dev/null || { echo "demo: the operator stopped; see .dev-cluster/logs/operator.log" >&2; tail -5 .dev-cluster/logs/operator.log >&2; exit 1; }
  sleep 0.5
done

if ! kubectl get namespace demo >/dev/null 2>&1; then
  kubectl create namespace demo >/dev/null
  kubectl label namespace demo pod-security.kubernetes.io/enforce=restricted >/dev/null
fi
kubectl delete codingrun demo -n demo --ignore-not-found --wait=true >/dev/null
kubectl apply -n demo -f examples/demo.yaml

echo; echo "\$ kubectl get crun -n demo -w"
kubectl get crun demo -n demo -w &
watcher=$!
phase=""
for _ in $(seq 1 240); do
  phase=$(kubectl get crun demo -n demo -o jsonpath='{.status.phase}')
  case "$phase" in Succeeded|Failed|Cancelled) break ;; esac
  sleep 0.5
done
sleep 1
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true

echo; echo "\$ kubectl codingrun diff demo -n demo"
operator/bin/kubectl-codingrun diff demo -n demo
echo
kubectl get crun demo -n demo -o jsonpath='{.status.result.summary}{"\n"}'
echo "demo: run ${phase:-unknown} in $(( $(date +%s) - started ))s. The dev cluster and operator are still up:"
echo "  . .dev-cluster/env && kubectl get crun -A      # look around"
echo "  make dev-cluster-down                          # stop everything"
[ "$phase" = Succeeded ]
