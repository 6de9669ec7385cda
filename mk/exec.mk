# The Kubernetes exec sandbox: its benchmark (a kept serve session, pods/exec per call with the
# breakdown of both, and kubectl exec of the same toolbox call, on a kwok pod of a throwaway
# local control plane).

.PHONY: bench-exec

# The bundle by its path, not $(TOOLBOX_BUNDLE): mk/toolbox.mk, which sets that, is included
# after this file, so the variable would still be empty here and the target lose its prerequisite.
bench-exec: sandbox-image/dist/toolbox.mjs node_modules system-packages control-plane ## Exec sandbox latency and its breakdown (1000 calls per path), written to test/bench/results/exec.json
	npx tsx test/bench/exec-bench.ts
