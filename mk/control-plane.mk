# The local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
# kwok, Redis) built from source into ~/.cache/chamvi-operator and run as local processes.
# See docs/dev-cluster.md and ../shared/design/TESTING.md.

CONTROL_PLANE_DIR := test/support/control-plane

.PHONY: control-plane
control-plane: ## Build the control-plane binaries into the cache (seconds when already built)
	bash $(CONTROL_PLANE_DIR)/build.sh

.PHONY: dev-cluster
dev-cluster: control-plane node_modules ## Start the dev cluster (state in .dev-cluster/); no-op if it is up. NODE=real adds a real node (docs/real-node.md)
	npx tsx $(CONTROL_PLANE_DIR)/cli.ts up
	$(if $(filter real,$(NODE)),npx tsx test/support/real-node/cli.ts up)

.PHONY: dev-cluster-down
dev-cluster-down: node_modules ## Stop the dev cluster and remove .dev-cluster/
	bash scripts/dev-run-stop.sh
	npx tsx test/support/real-node/cli.ts down
	npx tsx $(CONTROL_PLANE_DIR)/cli.ts down
