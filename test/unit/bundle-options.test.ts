// The one bundling script (operator/tools/bundle.ts): what each bundle is built for, and that
// the Makefile fragments and both Dockerfiles go through it instead of calling esbuild with
// flags of their own.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BUNDLES, bundleOptions, NODE_MAJOR, type BundleName } from '../../operator/tools/bundle.ts';
import { dockerfileInstructions } from '../support/dockerfile.ts';

const read = (path: string) => readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), 'utf8');
const names = Object.keys(BUNDLES) as BundleName[];
const BUILD_FILES = ['operator/Dockerfile', 'sandbox-image/Dockerfile', 'mk/images.mk', 'mk/toolbox.mk', 'mk/release.mk'];

describe('bundle options', () => {
  it.each(names)('%s targets the Node of the images, as ESM for node', (name) => {
    const options = bundleOptions(name, '/tmp/out.mjs');
    expect(options).toMatchObject({ target: `node${NODE_MAJOR}`, platform: 'node', format: 'esm', bundle: true });
  });

  it('bundles every npm package into the files that ship without node_modules', () => {
    expect(bundleOptions('cli-standalone', '/tmp/x.mjs').packages).toBe('bundle');
    expect(bundleOptions('toolbox', '/tmp/x.mjs').packages).toBe('bundle');
    // Bundled CommonJS code needs require(); the banner makes one.
    expect(bundleOptions('cli-standalone', '/tmp/x.mjs').banner?.js).toMatch(/^#!\/usr\/bin\/env node\n.*createRequire/);
    expect(bundleOptions('toolbox', '/tmp/x.mjs').banner?.js).toMatch(/^import \{ createRequire/);
  });

  it('keeps npm packages external where the image installs them', () => {
    expect(bundleOptions('operator', '/tmp/x.mjs')).toMatchObject({ packages: 'external', sourcemap: true });
    expect(bundleOptions('cli', '/tmp/x.mjs')).toMatchObject({ packages: 'external', banner: { js: '#!/usr/bin/env node' } });
  });

  it('the Dockerfiles run the images on the Node the bundles target', () => {
    for (const file of ['operator/Dockerfile', 'sandbox-image/Dockerfile']) {
      const bases = dockerfileInstructions(read(file), 'FROM');
      expect(bases.length).toBeGreaterThan(0);
      for (const base of bases) expect(base).toMatch(new RegExp(`^FROM node:${NODE_MAJOR}-`));
    }
  });

  it("the operator image puts the process launcher beside the operator's bundle, where main.ts looks for it", () => {
    const dockerfile = read('operator/Dockerfile');
    const out = (name: string) => new RegExp(`bundle\\.ts ${name} (\\S+)`).exec(dockerfile)?.[1];
    expect(out('operator')).toBe('dist/main.mjs');
    // main.ts: process-launcher-main with its own extension, beside it.
    expect(out('process-launcher')).toBe('dist/process-launcher-main.mjs');
    expect(read('operator/src/main.ts')).toContain('`./process-launcher-main${extname(fileURLToPath(import.meta.url))}`');
  });

  it('the Makefile fragments and Dockerfiles bundle only through bundle.ts, with known bundle names', () => {
    const calls: string[] = [];
    for (const file of BUILD_FILES) {
      const text = read(file);
      expect(text, `${file} calls esbuild itself`).not.toMatch(/\besbuild\s+\S+\.ts/);
      for (const match of text.matchAll(/tsx operator\/tools\/bundle\.ts (\S+)/g)) calls.push(match[1]!);
    }
    expect(calls.length).toBeGreaterThanOrEqual(5);
    for (const name of calls) expect(names).toContain(name);
  });
});
