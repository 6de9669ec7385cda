#!/usr/bin/env bash
# Stops what scripts/dev-run.sh and `make demo` started (git daemon, registrar, operator).
cd "$(dirname "$0")/.." || exit 0
for pidfile in .dev-cluster/dev-run/*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null && for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$pidfile"
done
exit 0
