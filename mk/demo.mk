# The operator against the dev cluster (`make run`) and the end-to-end demo (`make demo`).

.PHONY: run
run: dev-cluster toolbox ## Run the operator in the foreground against the dev cluster
	bash scripts/dev-run.sh

.PHONY: demo
demo: dev-cluster toolbox ## A scripted CodingRun end to end on the dev cluster (no API key); leaves it up
	bash scripts/demo.sh

.PHONY: demo-eval
demo-eval: dev-cluster toolbox ## A CodingEval of three scripted models on the dev cluster: the table and an HTML report (no API key)
	bash scripts/demo-eval.sh

.PHONY: bench-step
bench-step: toolbox node_modules system-packages control-plane ## Step overhead, pickup to next pickup less model and tools (the median of three runs), written to test/bench/results/step.json
	npx tsx test/bench/step-bench.ts
