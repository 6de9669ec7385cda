# Container images (operator and sandbox), the plugin bundle, and the Helm chart's checks.
# No Docker engine here? `make images` says so and succeeds, so CI without one is not red.

IMAGE_REGISTRY ?= ghcr.io/chamvi
IMAGE_TAG ?= $(shell node -p "require('./package.json').version" 2>/dev/null || echo dev)
OPERATOR_IMAGE ?= $(IMAGE_REGISTRY)/chamvi-operator:$(IMAGE_TAG)
SANDBOX_IMAGE ?= $(IMAGE_REGISTRY)/chamvi-sandbox:$(IMAGE_TAG)
DOCKER ?= docker
CHART_DIR := charts/chamvi-operator
HELM ?= $(shell bash test/support/control-plane/build.sh --print-bin-dir 2>/dev/null)/helm
CLI_BUNDLE := operator/dist/kubectl-codingrun.mjs

.PHONY: images chart-sync chart-schema helm-lint cli

images: ## Build the operator and sandbox images (needs a Docker engine; skipped if none)
	@if ! $(DOCKER) info >/dev/null 2>&1; then \
	  echo "images: no container engine ($(DOCKER) info failed); skipping $(OPERATOR_IMAGE) and $(SANDBOX_IMAGE)"; \
	  exit 0; \
	fi; \
	set -e; \
	$(DOCKER) build -f operator/Dockerfile -t $(OPERATOR_IMAGE) . ; \
	$(DOCKER) build -f sandbox-image/Dockerfile -t $(SANDBOX_IMAGE) . ; \
	echo "built $(OPERATOR_IMAGE) and $(SANDBOX_IMAGE)"

cli: $(CLI_BUNDLE) ## Bundle kubectl-codingrun into operator/dist (the bin script prefers it: faster start)

# operator/tools/bundle.ts decides the bundle's flags, as for the images and the release.
$(CLI_BUNDLE): $(shell find operator/src -name '*.ts' 2>/dev/null) operator/tools/bundle.ts package-lock.json | node_modules
	npx tsx operator/tools/bundle.ts cli $@

# The chart ships the generated CRD; crds/ is the source (make crds). test/integration/chart.test.ts
# fails when the two differ.
chart-sync: ## Copy the generated CRD into the Helm chart (files/crd, installed and upgraded by templates/crd.yaml)
	cp crds/chamvi.dev_codingruns.yaml $(CHART_DIR)/files/crd/chamvi.dev_codingruns.yaml
	cp crds/chamvi.dev_codingevals.yaml $(CHART_DIR)/files/crd/chamvi.dev_codingevals.yaml

# The config part of values.schema.json comes from the zod config schema
# (operator/src/config/chart-values-schema.ts); test/unit/chart-values-schema.test.ts fails
# when the committed file is stale.
chart-schema: node_modules ## Generate the config part of the chart's values.schema.json from operator/src/config
	npx tsx operator/tools/generate-chart-schema.ts

helm-lint: chart-sync chart-schema ## helm lint --strict the chart (helm from make control-plane)
	$(HELM) lint --strict $(CHART_DIR)

# Daemonless builds (buildah, no Docker engine), on a base made here from Debian packages,
# into OCI archives under ~/.cache/chamvi-operator/images that `ctr -n k8s.io images import`
# loads; cached by content. See docs/real-node.md.
IMAGE_BUILD := scripts/images/build-image.sh
.PHONY: sandbox-image operator-image
sandbox-image: ## Build the sandbox image with buildah into an OCI archive (cached by content)
	nice -n 10 bash $(IMAGE_BUILD) sandbox $(SANDBOX_IMAGE) sandbox-image/Dockerfile . \
	  package.json package-lock.json tsconfig.json operator/tools/bundle.ts sandbox-image/toolbox .dockerignore

operator-image: node_modules ## Build the operator image with buildah into an OCI archive (cached by content)
	nice -n 10 bash $(IMAGE_BUILD) operator $(OPERATOR_IMAGE) operator/Dockerfile . \
	  package.json package-lock.json tsconfig.json operator/tools/bundle.ts operator/src sandbox-image/toolbox .dockerignore

# The bundled Redis's image from Debian's redis-server (redis-image/Dockerfile), for clusters
# that pull nothing (the real node): the chart takes any Redis image (redis.bundled.image).
REDIS_IMAGE ?= localhost/chamvi-redis:7.0-bookworm
.PHONY: redis-image
redis-image: ## Build the bundled Redis's image from Debian's redis-server with buildah (cached by content)
	nice -n 10 bash $(IMAGE_BUILD) redis $(REDIS_IMAGE) redis-image/Dockerfile redis-image redis-image/Dockerfile
