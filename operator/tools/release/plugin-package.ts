// The kubectl-codingrun npm package: package.json for a package that is one bundled file (and
// the toolbox that run --local starts), so installing it fetches nothing else and `npx` works.
import { NODE_MAJOR } from '../bundle.ts';

/** Scoped to the project's npm organisation, like its images under ghcr.io/chamvi. */
export const PLUGIN_PACKAGE_NAME = '@chamvi/kubectl-codingrun';
export const PLUGIN_COMMAND = 'kubectl-codingrun';
/** The bundle's file name inside the npm package and the krew archive. */
export const PLUGIN_BUNDLE_FILE = 'kubectl-codingrun.mjs';
/** Beside the plugin bundle, where run --local looks for it (cli/local/local-sandbox-factory.ts). */
export const TOOLBOX_FILE = 'toolbox.mjs';
export const NOTICES_FILE = 'THIRD-PARTY-NOTICES.md';
export const PROJECT_URL = 'https://github.com/chamvi/chamvi-operator';

export interface PluginPackageJson {
  name: string;
  version: string;
  description: string;
  license: string;
  homepage: string;
  repository: { type: 'git'; url: string };
  bugs: { url: string };
  keywords: string[];
  type: 'module';
  bin: Record<string, string>;
  engines: { node: string };
  files: string[];
}

export function pluginPackageJson(version: string): PluginPackageJson {
  return {
    name: PLUGIN_PACKAGE_NAME,
    version,
    description: 'kubectl codingrun: watch, approve and inspect CodingRuns of chamvi-operator, or run one locally.',
    license: 'Apache-2.0',
    homepage: PROJECT_URL,
    repository: { type: 'git', url: `git+${PROJECT_URL}.git` },
    bugs: { url: `${PROJECT_URL}/issues` },
    keywords: ['kubectl-plugin', 'kubernetes', 'coding-agent', 'chamvi'],
    type: 'module',
    bin: { [PLUGIN_COMMAND]: PLUGIN_BUNDLE_FILE },
    engines: { node: `>=${NODE_MAJOR}` },
    // No dependencies: every npm package is inside the bundle. npm adds package.json, README
    // and LICENSE itself.
    files: [PLUGIN_BUNDLE_FILE, TOOLBOX_FILE, NOTICES_FILE],
  };
}
