// The decisions of `make release` (operator/tools/release/): the npm package's manifest, the
// krew manifest's shape (what krew v1alpha2 requires of a plugin), the chart's version and
// image references, and digests read from an OCI image layout only when the image is there.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { imageReference, releaseChartYaml, releaseValuesYaml } from '../../operator/tools/release/chart-release.ts';
import { archiveName, krewManifest, releaseAssetUri, renderKrewManifest } from '../../operator/tools/release/krew-manifest.ts';
import { ociLayoutDigest } from '../../operator/tools/release/oci-layout-digest.ts';
import { pluginPackageJson } from '../../operator/tools/release/plugin-package.ts';
import { bundledPackageDirectories } from '../../operator/tools/release/third-party-notices.ts';

const SHA = 'a'.repeat(64);
const sha256 = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('the npm package of the plugin', () => {
  const manifest = pluginPackageJson('1.2.3');

  it('has no dependencies to install, so npx needs nothing but the tarball', () => {
    expect(manifest).not.toHaveProperty('dependencies');
    expect(manifest).not.toHaveProperty('optionalDependencies');
    expect(manifest).not.toHaveProperty('peerDependencies');
  });

  it('runs the bundle as kubectl-codingrun, ships it with the toolbox, and requires Node 24', () => {
    expect(manifest.bin).toEqual({ 'kubectl-codingrun': 'kubectl-codingrun.mjs' });
    expect(manifest.files).toEqual(expect.arrayContaining(['kubectl-codingrun.mjs', 'toolbox.mjs']));
    expect(manifest.engines.node).toBe('>=24');
    expect(manifest).toMatchObject({ version: '1.2.3', license: 'Apache-2.0', type: 'module' });
  });
});

describe('the krew manifest', () => {
  const yaml = renderKrewManifest({ version: '1.2.3', uri: releaseAssetUri('1.2.3'), sha256: SHA });
  const manifest = parse(yaml) as {
    apiVersion: string;
    kind: string;
    metadata: { name: string };
    spec: Record<string, unknown> & { platforms: Array<Record<string, unknown>> };
  };

  it('is a krew v1alpha2 Plugin named codingrun at the release version', () => {
    expect(manifest.apiVersion).toBe('krew.googlecontainertools.github.com/v1alpha2');
    expect(manifest.kind).toBe('Plugin');
    // krew: the name is the command after `kubectl`, lowercase letters, digits and dashes.
    expect(manifest.metadata.name).toMatch(/^[a-z0-9][a-z0-9-]*$/);
    expect(manifest.spec.version).toBe('v1.2.3');
    expect(manifest.spec.shortDescription).toEqual(expect.any(String));
    expect(manifest.spec.caveats).toMatch(/Node\.js 24/);
  });

  it('gives every platform the archive, its sha256, the launcher and a selector', () => {
    expect(manifest.spec.platforms.length).toBeGreaterThan(0);
    const selectors = new Set<string>();
    for (const platform of manifest.spec.platforms) {
      expect(platform.uri).toBe(`https://github.com/chamvi/chamvi-operator/releases/download/v1.2.3/${archiveName('1.2.3')}`);
      expect(platform.sha256).toBe(SHA);
      expect(platform.bin).toBe('kubectl-codingrun');
      const labels = (platform.selector as { matchLabels: { os: string; arch: string } }).matchLabels;
      expect(['linux', 'darwin']).toContain(labels.os);
      expect(['amd64', 'arm64']).toContain(labels.arch);
      selectors.add(`${labels.os}/${labels.arch}`);
    }
    expect(selectors.size).toBe(manifest.spec.platforms.length);
  });

  it('refuses a sha256 that is not one', () => {
    expect(() => krewManifest({ version: '1.2.3', uri: releaseAssetUri('1.2.3'), sha256: '' })).toThrow(/sha256/);
    expect(() => krewManifest({ version: '1.2.3', uri: releaseAssetUri('1.2.3'), sha256: SHA.toUpperCase() })).toThrow(/sha256/);
  });
});

describe('the chart of a release', () => {
  const values =
    'image:\n  repository: old/operator\n  # -- tag comment\n  tag: ""\n  digest: ""\nconfig:\n  sandboxImage: old/sandbox:0.0.1\n';
  const digest = `sha256:${SHA}`;

  it('takes the release version as version and appVersion', () => {
    const chart = parse(releaseChartYaml('apiVersion: v2\nname: c\nversion: 0.0.1\nappVersion: "0.0.1"\n', '1.2.3')) as Record<
      string,
      string
    >;
    expect(chart).toMatchObject({ version: '1.2.3', appVersion: '1.2.3' });
  });

  it('names the images by tag and digest when the release read a digest, keeping comments', () => {
    const text = releaseValuesYaml(values, {
      version: '1.2.3',
      operator: { repository: 'r/op', tag: '1.2.3', digest },
      sandbox: { repository: 'r/sb', tag: '1.2.3', digest },
    });
    expect(parse(text)).toEqual({ image: { repository: 'r/op', tag: '1.2.3', digest }, config: { sandboxImage: `r/sb:1.2.3@${digest}` } });
    expect(text).toContain('# -- tag comment');
  });

  it('names an image by tag alone when there is no digest, and clears a stale one', () => {
    const stale = values.replace('digest: ""', `digest: "sha256:${'b'.repeat(64)}"`);
    const text = releaseValuesYaml(stale, {
      version: '1.2.3',
      operator: { repository: 'r/op', tag: '1.2.3' },
      sandbox: { repository: 'r/sb', tag: '1.2.3' },
    });
    expect(parse(text)).toEqual({ image: { repository: 'r/op', tag: '1.2.3', digest: '' }, config: { sandboxImage: 'r/sb:1.2.3' } });
    expect(imageReference({ repository: 'r/sb', tag: '1.2.3' })).toBe('r/sb:1.2.3');
  });
});

describe('image digests from an OCI image layout', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** A layout as buildah push oci:DIR writes it: oci-layout, index.json and the manifest blob. */
  function layout(manifests: Array<{ body: string; tag?: string; stored?: string }>): string {
    dir = mkdtempSync(path.join(tmpdir(), 'chamvi-oci-layout-'));
    mkdirSync(path.join(dir, 'blobs/sha256'), { recursive: true });
    writeFileSync(path.join(dir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
    const descriptors = manifests.map(({ body, tag, stored }) => {
      writeFileSync(path.join(dir!, 'blobs/sha256', sha256(body)), stored ?? body);
      return {
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        digest: `sha256:${sha256(body)}`,
        size: body.length,
        ...(tag ? { annotations: { 'org.opencontainers.image.ref.name': tag } } : {}),
      };
    });
    writeFileSync(path.join(dir, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: descriptors }));
    return dir;
  }

  it('is the digest of the manifest index.json names, checked against its blob', () => {
    const body = '{"schemaVersion":2,"layers":[]}';
    expect(ociLayoutDigest(layout([{ body, tag: '1.2.3' }]), '1.2.3')).toBe(`sha256:${sha256(body)}`);
  });

  it('picks the release tag when the layout holds several images', () => {
    const wanted = '{"schemaVersion":2,"n":2}';
    expect(
      ociLayoutDigest(
        layout([
          { body: '{"schemaVersion":2,"n":1}', tag: '1.0.0' },
          { body: wanted, tag: '1.2.3' },
        ]),
        '1.2.3',
      ),
    ).toBe(`sha256:${sha256(wanted)}`);
  });

  it('refuses a layout whose blob does not hash to the digest, or that is not a layout', () => {
    expect(() => ociLayoutDigest(layout([{ body: '{"a":1}', stored: '{"a":2}' }]))).toThrow(/hashes to/);
    const empty = mkdtempSync(path.join(tmpdir(), 'chamvi-oci-layout-'));
    try {
      expect(() => ociLayoutDigest(empty)).toThrow(/not an OCI image layout/);
    } finally {
      rmSync(empty, { recursive: true });
    }
  });

  it('refuses to guess between several images without the release tag', () => {
    expect(() => ociLayoutDigest(layout([{ body: '{"n":1}' }, { body: '{"n":2}' }]), '1.2.3')).toThrow(/lists 0 images tagged 1.2.3/);
  });
});

describe('third-party notices', () => {
  it('lists each npm package the bundle took files from, nested and scoped ones included', () => {
    const inputs = Object.fromEntries(
      [
        'operator/src/cli/main.ts',
        'node_modules/zod/v4/core/core.js',
        'node_modules/zod/index.js',
        'node_modules/@ai-sdk/openai/dist/index.mjs',
        'node_modules/a/node_modules/b/lib/x.js',
      ].map((file) => [file, { bytes: 1, imports: [] }]),
    );
    expect(bundledPackageDirectories([{ inputs, outputs: {} }])).toEqual([
      'node_modules/@ai-sdk/openai',
      'node_modules/a/node_modules/b',
      'node_modules/zod',
    ]);
  });
});
