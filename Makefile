# chamvi-operator. `make test` is the one command CI runs (.ci/run); it installs what it needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export GOTOOLCHAIN := local
# Node 24 comes from the npm `node` package (a devDependency), so `make test` installs the Node it
# needs like every other dependency; putting node_modules/.bin first makes every recipe, `npx`
# and the test servers' child processes run on it rather than the machine's Node.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

# Debian packages the tests use: Redis for BullMQ, ripgrep for the toolbox's grep, openssl
# for the control plane's certificates, git for clones, Chromium for the eval report's
# rendering test (test/e2e/evals.test.ts, driven by playwright-core; it downloads no browser),
# iproute2 for the real node and the egress benchmark's shaped link (ip, tc).
SYSTEM_PACKAGES := redis-server:redis-server ripgrep:rg openssl:openssl git:git chromium:chromium iproute2:tc

# The fragments, in an order that matters: make expands a rule's prerequisites when it reads
# the rule, so a variable used there (TOOLBOX_BUNDLE in exec.mk) must be defined by a fragment
# read before it. A glob read them alphabetically, exec.mk before toolbox.mk, and bench-exec
# lost its prerequisites. Variables first (toolbox, control plane, images), then the fragments
# that use them. test/unit/makefile.test.ts checks the prerequisites make actually sees.
include mk/toolbox.mk mk/control-plane.mk mk/images.mk mk/exec.mk mk/demo.mk mk/bench.mk mk/real-node.mk mk/release.mk mk/forge.mk

.PHONY: help
help: ## Show the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sort | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

node_modules: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch node_modules

.PHONY: system-packages
system-packages: ## Install the Debian packages the tests need, when missing
	@missing=""; for pair in $(SYSTEM_PACKAGES); do \
	  command -v "$${pair#*:}" >/dev/null 2>&1 || missing="$$missing $${pair%%:*}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

.PHONY: crds
crds: node_modules ## Generate crds/ from the zod schemas in operator/src/api
	npx tsx operator/tools/generate-crd.ts

.PHONY: typecheck
typecheck: node_modules ## Type-check everything
	npx tsc -p tsconfig.json

.PHONY: lint
lint: node_modules ## Check formatting (Prettier) and lint rules (typescript-eslint, type-aware)
	npx prettier --check --log-level warn .
	npx eslint --max-warnings 0 .

.PHONY: format
format: node_modules ## Format the tree with Prettier and apply the linter's safe fixes
	npx prettier --write --log-level warn .
	npx eslint --fix .

.PHONY: test
test: node_modules system-packages toolbox control-plane forge typecheck lint real-node sandbox-image operator-image redis-image ## Run every test tier (unit, toolbox, integration, e2e, faults, real-node)
	npx vitest run --project unit
	npx vitest run --project toolbox
	npx vitest run --project integration
	npx vitest run --project e2e
	npx vitest run --project faults
	npx vitest run --project real-node

.PHONY: test-faults
test-faults: node_modules system-packages toolbox control-plane ## Reliability tier only (faults injected on purpose)
	npx vitest run --project faults

.PHONY: test-unit
test-unit: node_modules ## Unit tier only
	npx vitest run --project unit

.PHONY: test-integration
test-integration: node_modules system-packages toolbox control-plane forge ## Integration tier only
	npx vitest run --project integration

