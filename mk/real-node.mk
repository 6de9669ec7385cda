# A real node beside the kwok node (docs/real-node.md): containerd, runc, a kubelet built from
# the control plane's Kubernetes version, CNI bridge, kube-router enforcing NetworkPolicy.

REAL_NODE_DIR := test/support/real-node

.PHONY: real-node test-real-node
real-node: control-plane ## Build the real node's kubelet, kube-router, kube-proxy and CoreDNS, install its Debian packages, build its pause image
	nice -n 10 bash $(REAL_NODE_DIR)/build.sh
	nice -n 10 bash $(REAL_NODE_DIR)/build-cluster-services.sh
	nice -n 10 bash $(REAL_NODE_DIR)/pause-image.sh

test-real-node: node_modules system-packages control-plane real-node sandbox-image operator-image redis-image ## Real-node tier only (the sandbox image on a real kubelet, helm install of the operator image; the last tier of `make test`)
	npx vitest run --project real-node

# `make dev-cluster NODE=real`: the real node's programs and images first.
ifeq ($(NODE),real)
dev-cluster: real-node sandbox-image
endif
