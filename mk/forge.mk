# A real forge for the publish tests (issue #14): Gitea built from its Go module into the cache,
# once per machine (test/support/forge/build-gitea.sh). Only the Go module proxy is needed.

.PHONY: forge
forge: ## Build the Gitea the publish tests push to (cached in ~/.cache/chamvi-operator)
	nice -n 10 bash test/support/forge/build-gitea.sh
