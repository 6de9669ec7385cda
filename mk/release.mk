# `make release`: the npm package, the krew archive and manifest, the packaged Helm chart and
# SHA256SUMS in dist/release/, at package.json's version. Builds locally and publishes nothing:
# docs/release.md lists the publishing steps you run with your own credentials.
# The chart pins the images by digest only when given their OCI image layouts:
#   make release OPERATOR_OCI=dist/images/chamvi-operator SANDBOX_OCI=dist/images/chamvi-sandbox
# A layout that is absent leaves that image by tag, and the release says so.

RELEASE_DIR ?= dist/release
OPERATOR_OCI ?= dist/images/chamvi-operator
SANDBOX_OCI ?= dist/images/chamvi-sandbox

.PHONY: release

release: node_modules ## Build the release artifacts into dist/release (publishes nothing; docs/release.md)
	@test -x "$(HELM)" || { echo "release: no helm at $(HELM); run make control-plane (it builds helm) or pass HELM=path"; exit 1; }
	npx tsx operator/tools/release/build-release.ts --out $(RELEASE_DIR) --helm $(HELM) \
	  --registry $(IMAGE_REGISTRY) --operator-oci $(OPERATOR_OCI) --sandbox-oci $(SANDBOX_OCI)
