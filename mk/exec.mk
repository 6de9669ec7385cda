# The Kubernetes exec sandbox: its benchmark (pods/exec per call, a kept serve session and
# kubectl exec of the same toolbox call, on a kwok pod of a throwaway local control plane).

.PHONY: bench-exec

bench-exec: node_modules system-packages control-plane $(TOOLBOX_BUNDLE) ## Exec sandbox latency and its breakdown (1000 calls per path), written to test/bench/results/exec.json
	npx tsx test/bench/exec-bench.ts
