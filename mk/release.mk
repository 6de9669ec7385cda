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

# The images too: build both with buildah (make operator-image, make sandbox-image; cached by
# content), unpack their OCI archives into the layouts above, and release with their digests.
.PHONY: release-with-images
release-with-images: operator-image sandbox-image ## make release with both images built here, pinned by digest in the chart
	@for name in operator sandbox; do \
	  archive=$$(sed -n 's/^ARCHIVE=//p' $(HOME)/.cache/chamvi-operator/images/chamvi-$$name.env); \
	  rm -rf dist/images/chamvi-$$name && mkdir -p dist/images/chamvi-$$name && tar -xf "$$archive" -C dist/images/chamvi-$$name; \
	done
	$(MAKE) release
