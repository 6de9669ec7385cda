# The toolbox: the coding tools that run inside the sandbox (sandbox-image/toolbox/), bundled
# into one file that runs on plain node with no node_modules, its tests and its benchmark.

TOOLBOX_BUNDLE := sandbox-image/dist/toolbox.mjs
TOOLBOX_SOURCES := $(shell find sandbox-image/toolbox -name '*.ts' 2>/dev/null)

.PHONY: toolbox test-toolbox bench-toolbox toolbox-ripgrep

toolbox: $(TOOLBOX_BUNDLE) ## Bundle the toolbox into sandbox-image/dist/toolbox.mjs

# A file target: rebuilt only when a source (or the locked zod/esbuild, or the bundling
# script) changes. operator/tools/bundle.ts decides the flags (zod bundled in), as it does
# for the sandbox image.
$(TOOLBOX_BUNDLE): $(TOOLBOX_SOURCES) operator/tools/bundle.ts package-lock.json | node_modules
	npx tsx operator/tools/bundle.ts toolbox $@

# grep prefers ripgrep and the tests exercise all three engines, so rg must be present.
toolbox-ripgrep:
	@command -v rg >/dev/null 2>&1 || apt-get install -y -qq ripgrep || (apt-get update -qq && apt-get install -y -qq ripgrep)

test-toolbox: $(TOOLBOX_BUNDLE) toolbox-ripgrep ## Toolbox tier only (the bundled toolbox as a real process)
	npx vitest run --project toolbox

bench-toolbox: $(TOOLBOX_BUNDLE) toolbox-ripgrep ## Toolbox latency, grep, and bash with many processes in the sandbox, written to test/bench/results/toolbox.json
	npx tsx test/bench/toolbox-bench.ts
