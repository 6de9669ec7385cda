// Security #11.10: a run starts its sandbox only from the operator's image or an image an
// admin listed, and a listed image is pulled with the run namespace's credentials every time.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { isImageAllowed } from '../../operator/src/reconcile/allow-images.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';

const sandboxImage = 'ghcr.io/chamvi/chamvi-sandbox:0.1.0';
const config = { sandboxImage, allowImages: ['registry.example/team-a/*', 'python:3.12', 'mirror.example/**'] };

describe('security #11.10 allowImages', () => {
  it('allows no image other than the sandbox image by default', () => {
    const defaults = loadOperatorConfig({}, {});
    expect(defaults.allowImages).toEqual([]);
    expect(isImageAllowed(undefined, defaults)).toEqual({ allowed: true });
    expect(isImageAllowed(defaults.sandboxImage, defaults)).toEqual({ allowed: true });
    const decision = isImageAllowed('registry.example/tenant-a/private:1', defaults);
    expect(decision).toMatchObject({
      allowed: false,
      message: expect.stringContaining(`runs only its sandbox image ${defaults.sandboxImage}`),
    });
    expect((decision as { message: string }).message).toContain('allowImages');
  });

  it.each([
    'registry.example/team-a/tool:1',
    'registry.example/team-a/tool@sha256:' + 'a'.repeat(64),
    'python:3.12',
    'mirror.example/x/y/z:2',
    sandboxImage,
  ])('allows %s', (image) => {
    expect(isImageAllowed(image, config)).toEqual({ allowed: true });
  });

  it.each([
    ['another team of the registry', 'registry.example/team-b/tool:1'],
    ['a nested path under a one-segment glob', 'registry.example/team-a/sub/tool:1'],
    ['a look-alike registry', 'registry.example.evil.io/team-a/tool:1'],
    ['another tag of an exact entry', 'python:3.13'],
    ['the same image written with its registry', 'docker.io/library/python:3.12'],
    ['another tenant image already on the node', 'registry.example/tenant-a/private:1'],
  ])('refuses %s', (_, image) => {
    expect(isImageAllowed(image, config).allowed).toBe(false);
  });

  it.each([
    ['upper-case path', 'registry.example/Team-A/tool:1'],
    ['a space', 'registry.example/team-a/tool :1'],
    ['a dot-dot path', 'registry.example/team-a/../team-b/tool:1'],
    ['a control character', 'registry.example/team-a/tool:1\u001b[2K'],
  ])('refuses %s as no image reference, even when a glob would match it', (_, image) => {
    const decision = isImageAllowed(image, { sandboxImage, allowImages: ['**'] });
    expect(decision).toMatchObject({ allowed: false, message: expect.stringContaining('not an image reference') });
    expect((decision as { message: string }).message).not.toMatch(/[\u0000-\u001f]/);
  });

  it('reads allowImages from CHAMVI_ALLOW_IMAGES', () => {
    expect(loadOperatorConfig({}, { CHAMVI_ALLOW_IMAGES: 'a.example/x/*, b.example/y:1' }).allowImages).toEqual([
      'a.example/x/*',
      'b.example/y:1',
    ]);
  });
});

describe('security #11.10 sandbox pull policy', () => {
  const podConfig = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1', allowImages: ['python:3.12'] }, {});
  const pod = (sandbox: Record<string, unknown>) =>
    buildSandboxPod(
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'fix', namespace: 'agents', uid: 'uid-1' },
        spec: codingRunSpec.parse({
          task: 't',
          repository: { url: 'https://github.com/acme/x' },
          model: { provider: 'scripted', scriptRef: { name: 's' } },
          sandbox,
        }),
      } as ParsedCodingRun,
      podConfig,
    );

  it('pulls any image other than the sandbox image with Always, so the kubelet checks the namespace may pull it', () => {
    const custom = pod({ image: 'python:3.12' });
    expect(custom.spec!.containers[0]!.imagePullPolicy).toBe('Always');
    // The init container copies the toolbox from the operator's own image, which every run may use.
    expect(custom.spec!.initContainers![0]!.imagePullPolicy).toBe('IfNotPresent');
  });

  it('keeps IfNotPresent for the sandbox image, named or by default', () => {
    expect(pod({}).spec!.containers[0]!.imagePullPolicy).toBe('IfNotPresent');
    expect(pod({ image: 'chamvi/sandbox:1' }).spec!.containers[0]!.imagePullPolicy).toBe('IfNotPresent');
  });
});
