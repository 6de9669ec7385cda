// THIRD-PARTY-NOTICES.md for a bundle that has npm packages inside: their licenses (MIT, ISC,
// Apache-2.0, BSD) ask that their notices travel with copies, and a bundle is a copy. The
// packages are the ones esbuild's metafile says went in, not the whole lockfile.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Metafile } from 'esbuild';

export interface BundledPackage {
  name: string;
  version: string;
  license: string;
  /** The package's LICENSE/COPYING/NOTICE texts; empty when it ships none. */
  texts: string[];
}

/** The package directories (relative to the working directory) of the metafile's inputs. */
export function bundledPackageDirectories(metafiles: readonly Metafile[]): string[] {
  const directories = new Set<string>();
  for (const metafile of metafiles) {
    for (const input of Object.keys(metafile.inputs)) {
      // node_modules/@scope/name/... or node_modules/a/node_modules/b/...: the innermost package.
      const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
      if (match) directories.add(match[1]!);
    }
  }
  return [...directories].sort();
}

export function readBundledPackage(root: string, directory: string): BundledPackage {
  const full = path.join(root, directory);
  const manifest = JSON.parse(readFileSync(path.join(full, 'package.json'), 'utf8')) as { name: string; version: string; license?: string };
  const texts = readdirSync(full)
    .filter((file) => /^(licen[cs]e|copying|notice)(\.(md|txt|markdown))?$/i.test(file))
    .sort()
    .map((file) => readFileSync(path.join(full, file), 'utf8').trim());
  return { name: manifest.name, version: manifest.version, license: manifest.license ?? 'UNKNOWN', texts };
}

export function renderNotices(product: string, packages: readonly BundledPackage[]): string {
  const unique = new Map(packages.map((item) => [`${item.name}@${item.version}`, item]));
  const sections = [...unique.values()]
    .sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version))
    .map(
      (item) =>
        `## ${item.name}@${item.version} (${item.license})\n\n${item.texts.length ? item.texts.map((text) => '```\n' + text + '\n```').join('\n\n') : 'The package ships no license file; its package.json says ' + item.license + '.'}\n`,
    );
  return `# Third-party notices\n\n${product} contains the following npm packages, bundled into it.\n\n${sections.join('\n')}`;
}

export function noticesFor(root: string, product: string, metafiles: readonly Metafile[]): string {
  const packages = bundledPackageDirectories(metafiles)
    .filter((directory) => existsSync(path.join(root, directory, 'package.json')))
    .map((directory) => readBundledPackage(root, directory));
  return renderNotices(product, packages);
}
