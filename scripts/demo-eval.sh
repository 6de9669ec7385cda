#!/usr/bin/env bash
# `make demo-eval`: a CodingEval of three scripted models on the dev cluster, with no API key.
# Starts the operator in the background (scripts/dev-run.sh) when it is not running, applies
# examples/eval.yaml, follows the eval until every attempt is graded, prints the report and
# writes the HTML report to .dev-cluster/eval-report.html. Leaves the cluster up.
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
  grep -q '"eval caches synced; reconciling evals"' .dev-cluster/logs/operator.log 2>/dev/null && break
  kill -0 "$(cat "$state/operator.pid")" 2>/dev/null || { echo "demo-eval: the operator stopped; see .dev-cluster/logs/operator.log" >&2; tail -5 .dev-cluster/logs/operator.log >&2; exit 1; }
  sleep 0.5
done

if ! kubectl get namespace demo >/dev/null 2>&1; then
  kubectl create namespace demo >/dev/null
  kubectl label namespace demo pod-security.kubernetes.io/enforce=restricted >/dev/null
fi
# A new experiment each time: deleting the eval deletes its runs (they are owned by it).
kubectl delete codingeval models -n demo --ignore-not-found --wait=true >/dev/null
kubectl apply -n demo -f examples/eval.yaml

echo; echo "\$ kubectl get codingeval models -n demo -w"
kubectl get codingeval models -n demo -w &
watcher=$!
phase=""
for _ in $(seq 1 240); do
  phase=$(kubectl get codingeval models -n demo -o jsonpath='{.status.phase}')
  case "$phase" in Complete|Failed) break ;; esac
  sleep 0.5
done
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true

echo; echo "\$ kubectl codingrun eval report models -n demo --html .dev-cluster/eval-report.html"
operator/bin/kubectl-codingrun eval report models -n demo --html .dev-cluster/eval-report.html
echo
echo "demo-eval: eval ${phase:-unknown} in $(( $(date +%s) - started ))s. Open the report: .dev-cluster/eval-report.html"
echo "  kubectl get crun -n demo -l chamvi.dev/eval=models    # the runs, one per task × model × attempt"
echo "  kubectl codingrun logs <run> -n demo                    # what one attempt did"
[ "$phase" = Complete ]
