// The krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2) for the plugin's
// archive. The plugin is JavaScript, so one archive serves every platform krew lists; it
// needs node on PATH, which the manifest's caveats say (krew cannot install node).
import { stringify } from 'yaml';
import { NODE_MAJOR } from '../bundle.ts';
import { PLUGIN_COMMAND, PROJECT_URL } from './plugin-package.ts';

export const KREW_PLUGIN_NAME = 'codingrun';
/** The launcher inside the archive: a shell script that runs the bundle with node. */
export const KREW_LAUNCHER = PLUGIN_COMMAND;
export const KREW_PLATFORMS = [
  { os: 'linux', arch: 'amd64' },
  { os: 'linux', arch: 'arm64' },
  { os: 'darwin', arch: 'amd64' },
  { os: 'darwin', arch: 'arm64' },
] as const;

export interface KrewManifestInput {
  version: string;
  /** Where users download the archive from (the release's asset). */
  uri: string;
  /** Lowercase hex sha256 of the archive. */
  sha256: string;
}

export function archiveName(version: string): string {
  return `${PLUGIN_COMMAND}-v${version}.tar.gz`;
}

export function releaseAssetUri(version: string): string {
  return `${PROJECT_URL}/releases/download/v${version}/${archiveName(version)}`;
}

export function krewManifest({ version, uri, sha256 }: KrewManifestInput) {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`krew needs the archive's sha256 as 64 lowercase hex digits, got "${sha256}"`);
  return {
    apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
    kind: 'Plugin',
    metadata: { name: KREW_PLUGIN_NAME },
    spec: {
      version: `v${version}`,
      homepage: PROJECT_URL,
      shortDescription: 'Watch, approve and inspect CodingRuns of chamvi-operator',
      description:
        'kubectl codingrun lists CodingRuns with their phase, steps and tokens, shows and\n' +
        'approves or denies the tool call a run waits on (bound to the sha256 of its input),\n' +
        "prints a finished run's diff, and runs a CodingRun on this machine (run --local).\n",
      caveats:
        `This plugin is JavaScript: it needs Node.js ${NODE_MAJOR} or later as \`node\` on PATH.\n` +
        '`kubectl codingrun run --local` also needs git and redis-server on PATH.\n',
      platforms: KREW_PLATFORMS.map(({ os, arch }) => ({
        selector: { matchLabels: { os, arch } },
        uri,
        sha256,
        files: [{ from: '*', to: '.' }],
        bin: KREW_LAUNCHER,
      })),
    },
  };
}

export function renderKrewManifest(input: KrewManifestInput): string {
  return stringify(krewManifest(input), { lineWidth: 0 });
}

/**
 * The launcher krew links onto PATH as kubectl-codingrun. krew links it by symlink, so it
 * follows the links to find the bundle beside it; it says what is missing when node is, or
 * when node is older than NODE_MAJOR (an older node dies inside the bundle with a TypeError
 * from undici that does not say so). `node --version` costs a few milliseconds: it starts no
 * JavaScript.
 */
export function krewLauncherScript(bundleFile: string): string {
  return `#!/bin/sh
# kubectl-codingrun from the krew archive: runs ${bundleFile} (beside this script) with node.
self=$0
while [ -L "$self" ]; do
  link=$(readlink "$self")
  case $link in
    /*) self=$link ;;
    *) self=$(dirname "$self")/$link ;;
  esac
done
if ! command -v node >/dev/null 2>&1; then
  echo "kubectl-codingrun: needs Node.js ${NODE_MAJOR} or later as 'node' on PATH" >&2
  exit 1
fi
version=$(node --version 2>/dev/null | tail -n 1)
version=\${version#v}
major=\${version%%.*}
case $major in
  '' | *[!0-9]*) major=0 ;;
esac
if [ "$major" -lt ${NODE_MAJOR} ]; then
  echo "kubectl-codingrun: needs Node.js ${NODE_MAJOR} or later as 'node' on PATH; $(command -v node) is Node.js \${version:-of unknown version}" >&2
  exit 1
fi
exec node "$(dirname "$self")/${bundleFile}" "$@"
`;
}
