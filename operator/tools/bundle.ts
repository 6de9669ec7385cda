// The one bundling script: `make cli`, `make toolbox`, `make release`, the benchmarks' bundled
// operator and both Dockerfiles bundle through it, so the entry points, the Node target and
// esbuild's flags are decided here and nowhere else.
//   npx tsx operator/tools/bundle.ts <operator|cli|cli-standalone|toolbox> <outfile>
import { build, type BuildOptions, type Metafile } from 'esbuild';
import { chmod } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The Node the images ship and the npm package requires (engines). */
export const NODE_MAJOR = 24;
export const NODE_TARGET = `node${NODE_MAJOR}`;

const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));

const SHEBANG = '#!/usr/bin/env node';
// Bundled CommonJS code calls require() for node builtins; an ESM file has none, so the
// bundle makes one.
const REQUIRE_SHIM =
  "import { createRequire as __chamviCreateRequire } from 'node:module'; const require = __chamviCreateRequire(import.meta.url);";

export type BundleName = 'operator' | 'process-launcher' | 'egress-proxy' | 'cli' | 'cli-standalone' | 'toolbox';

interface BundleSpec {
  /** Entry point, relative to the repository root. */
  entry: string;
  /**
   * external: npm packages stay imports, resolved from a node_modules beside the bundle (the
   * operator image installs them; some resolve files at run time: client-node's exec, pino).
   * bundle: one file that needs nothing but node (the sandbox has no node_modules; the npm
   * package and the krew archive have no dependencies to install).
   */
  packages: 'external' | 'bundle';
  executable: boolean;
  sourcemap: boolean;
  why: string;
}

export const BUNDLES: Readonly<Record<BundleName, BundleSpec>> = {
  operator: {
    entry: 'operator/src/main.ts',
    packages: 'external',
    executable: false,
    sourcemap: true,
    why: 'the controller and step workers (operator image)',
  },
  'process-launcher': {
    entry: 'operator/src/process-launcher-main.ts',
    packages: 'bundle',
    executable: false,
    sourcemap: false,
    why: "the helper that starts the workers' git and tar, beside the operator's bundle as process-launcher-main.mjs (operator image)",
  },
  'egress-proxy': {
    entry: 'operator/src/egress-proxy-main.ts',
    packages: 'external',
    executable: false,
    sourcemap: true,
    why: "the egress proxy (operator image, the chart's egress proxy Deployment)",
  },
  cli: {
    entry: 'operator/src/cli/main.ts',
    packages: 'external',
    executable: true,
    sourcemap: false,
    why: 'kubectl-codingrun beside node_modules (operator image, make cli)',
  },
  'cli-standalone': {
    entry: 'operator/src/cli/main.ts',
    packages: 'bundle',
    executable: true,
    sourcemap: false,
    why: 'kubectl-codingrun with every package inside (npm package, krew archive)',
  },
  toolbox: {
    entry: 'sandbox-image/toolbox/main.ts',
    packages: 'bundle',
    executable: false,
    sourcemap: false,
    why: 'the coding tools, run by plain node in the sandbox',
  },
};

export function isBundleName(name: string): name is BundleName {
  return Object.hasOwn(BUNDLES, name);
}

/** esbuild's options for one bundle: a pure function, so a test can read the decisions. */
export function bundleOptions(name: BundleName, outfile: string): BuildOptions {
  const spec = BUNDLES[name];
  const banner = [spec.executable ? SHEBANG : '', spec.packages === 'bundle' ? REQUIRE_SHIM : ''].filter(Boolean).join('\n');
  return {
    absWorkingDir: repositoryRoot,
    entryPoints: [spec.entry],
    outfile: path.resolve(outfile),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: NODE_TARGET,
    packages: spec.packages,
    sourcemap: spec.sourcemap,
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
    ...(banner ? { banner: { js: banner } } : {}),
  };
}

/** Writes one bundle; the metafile says which files (and so which npm packages) went in. */
export async function bundle(name: BundleName, outfile: string): Promise<Metafile> {
  const options = bundleOptions(name, outfile);
  const result = await build(options);
  if (BUNDLES[name].executable) await chmod(options.outfile!, 0o755);
  return result.metafile!;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [name, outfile] = process.argv.slice(2);
  if (!name || !outfile || !isBundleName(name)) {
    process.stderr.write(`usage: bundle.ts <${Object.keys(BUNDLES).join('|')}> <outfile>\n`);
    process.exit(2);
  }
  await bundle(name, outfile);
}
