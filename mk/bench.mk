# Benchmarks (`make bench`, see ../shared/design/TESTING.md): the toolbox (mk/toolbox.mk), the
# exec round trip (mk/exec.mk), the step overhead (mk/demo.mk), the egress proxy, replicas, warm pools, the scale benchmark
# and the real node (docs/real-node.md) here,
# one after another (two cores: never side by side), then one table of every figure next to
# its peer, written to test/bench/results/latest.json.
#
#   make bench            N=200 runs against N=200 Jobs in the scale benchmark
#   make bench N=1000     the same with a thousand of each
#
# The scale benchmark runs its Jobs twice, with kube-controller-manager at its default client
# limits (QPS 20, burst 30) and without a limit, as the operator's client has none;
# PEER_LIMITS=unlimited (or default) runs only one of them.

N ?= 200
# Runs per mode of bench-warm-pool-real-node (a fresh-pod run takes ~1-2 s there).
WARM_RUNS ?= 10
PEER_LIMITS ?= both

.PHONY: bench bench-scale bench-owned-configmaps bench-kept-runs bench-report bench-real-node bench-egress bench-replicas bench-warm-pool bench-warm-pool-real-node

bench-egress: node_modules system-packages ## The egress proxy against direct: 100 MB download (over loopback and across a 1 and a 5 Gbit/s link), 1000 small requests, memory at 100 tunnels; written to test/bench/results/egress.json
	npx tsx test/bench/egress-bench.ts

bench-replicas: node_modules system-packages toolbox control-plane ## Steps per second with 1, 2 and 3 operator replicas on one Redis (model answering after 200 ms), written to test/bench/results/replicas.json
	npx tsx test/bench/replicas-bench.ts

bench-warm-pool: node_modules system-packages toolbox control-plane ## Create -> first tool call with a warm sandbox pool and without (kwok), written to test/bench/results/warm-pool.json
	npx tsx test/bench/warm-pool-bench.ts

bench-scale: node_modules system-packages toolbox control-plane ## N CodingRuns vs N Jobs (N=200) at both client limits of the Job controller, written to test/bench/results/scale.json
	npx tsx test/bench/scale-bench.ts --n $(N) --peer-limits $(PEER_LIMITS)

# The real node's figures (test/bench/real-node-bench.ts): writes the reason and exits 0 when
# the node cannot start here; its builds (kubelet, kube-router, images) fail loudly instead.
bench-real-node: node_modules system-packages control-plane real-node sandbox-image ## Real-node figures: sandbox pod create->Ready and ->first tool call, serve and per-call exec vs kubectl exec, written to test/bench/results/real-node.json
	npx tsx test/bench/real-node-bench.ts

# The same warm-pool bench with its sandboxes (fresh and pooled) on the real node, where a pod's
# start costs what a cluster's does; like bench-real-node it writes the reason and exits 0 when
# the node cannot start here.
bench-warm-pool-real-node: node_modules system-packages control-plane real-node sandbox-image ## Create -> first tool call with a warm sandbox pool and without, on the real node, written to test/bench/results/warm-pool-real-node.json
	npx tsx test/bench/warm-pool-bench.ts --real-node --runs $(WARM_RUNS)

bench-owned-configmaps: node_modules system-packages control-plane ## What the ConfigMaps the operator owns cost it: CPU per 900 KB diff write, a start beside 128 kept diffs of 1000 KiB (not part of make bench), written to test/bench/results/owned-configmaps.json
	npx tsx test/bench/owned-configmaps-bench.ts

KEPT_RUNS ?= 5000

bench-kept-runs: node_modules system-packages control-plane ## An operator started beside KEPT_RUNS finished CodingRuns (heap limit 160 MiB): sync, peak RSS, heap after (not part of make bench; --bundle DIR compares other builds), written to test/bench/results/kept-runs.json
	npx tsx test/bench/kept-runs-bench.ts --runs $(KEPT_RUNS)

bench-report: node_modules ## One table of every benchmark figure and its peer, written to test/bench/results/latest.json
	npx tsx test/bench/bench-report.ts

bench: node_modules system-packages toolbox control-plane ## Every benchmark (toolbox, exec, step overhead, egress proxy, replicas, warm pool on kwok and the real node, scale at N=200, the real node) and one table
	@started=$$(date +%s); \
	$(MAKE) --no-print-directory -j1 bench-toolbox bench-exec bench-step bench-egress bench-replicas bench-warm-pool bench-warm-pool-real-node bench-scale bench-real-node N=$(N) PEER_LIMITS=$(PEER_LIMITS) && \
	npx tsx test/bench/bench-report.ts --started $$started
