// `make release`: builds into one directory everything people install without cloning the
// repository, at package.json's version, and publishes nothing (docs/release.md says how
// to publish with your own credentials):
//   @chamvi/kubectl-codingrun npm tarball   one bundled file, no dependencies (npx works)
//   kubectl-codingrun-vX.tar.gz + codingrun.yaml   the krew archive and manifest (its sha256)
//   chamvi-operator-X.tgz                   the Helm chart (helm package), images by tag, and
//                                           by digest when the built images are given
//   SHA256SUMS                              of all of the above
//
//   npx tsx operator/tools/release/build-release.ts --out DIR --helm PATH
//     [--operator-oci DIR] [--sandbox-oci DIR] [--registry ghcr.io/chamvi]
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { bundle, NODE_MAJOR } from '../bundle.ts';
import { releaseChartYaml, releaseValuesYaml, imageReference, type ReleaseImage } from './chart-release.ts';
import { archiveName, KREW_LAUNCHER, KREW_PLUGIN_NAME, krewLauncherScript, releaseAssetUri, renderKrewManifest } from './krew-manifest.ts';
import { ociLayoutDigest } from './oci-layout-digest.ts';
import {
  NOTICES_FILE,
  PLUGIN_BUNDLE_FILE,
  PLUGIN_COMMAND,
  PLUGIN_PACKAGE_NAME,
  pluginPackageJson,
  TOOLBOX_FILE,
} from './plugin-package.ts';
import { noticesFor } from './third-party-notices.ts';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const CHART = 'chamvi-operator';

const { values: options } = parseArgs({
  options: {
    out: { type: 'string', default: path.join(root, 'dist/release') },
    helm: { type: 'string', default: 'helm' },
    registry: { type: 'string', default: 'ghcr.io/chamvi' },
    'operator-oci': { type: 'string' },
    'sandbox-oci': { type: 'string' },
  },
});

const version = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
const out = path.resolve(options.out);
const staging = mkdtempSync(path.join(tmpdir(), 'chamvi-release-'));
// Archives carry the last commit's time, not now, so building a commit twice gives the same bytes.
const epoch = process.env.SOURCE_DATE_EPOCH ?? gitCommitTime();

function gitCommitTime(): string {
  try {
    return execFileSync('git', ['log', '-1', '--format=%ct'], { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    return '0';
  }
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** A tar.gz of `files` (names inside `dir`), owned by root, dated `epoch`, in name order. */
function reproducibleTarGz(dir: string, files: string[], target: string): void {
  const tar = execFileSync(
    'tar',
    [
      '--sort=name',
      `--mtime=@${epoch}`,
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      '--format=ustar',
      '-C',
      dir,
      '-cf',
      '-',
      ...files.sort(),
    ],
    {
      maxBuffer: 256 * 1024 * 1024,
    },
  );
  writeFileSync(target, gzipSync(tar, { level: 9 }));
}

/** The image of the release: the OCI layout's digest when one is given, else the tag alone. */
function releaseImage(name: string, layout: string | undefined): ReleaseImage & { source: string } {
  const image = { repository: `${options.registry}/${name}`, tag: version };
  if (!layout) return { ...image, source: 'no image given: by tag only' };
  if (!existsSync(layout)) return { ...image, source: `no image at ${layout}: by tag only` };
  return { ...image, digest: ociLayoutDigest(layout, version), source: `digest read from ${layout}` };
}

async function buildPluginFiles(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const metafiles = [
    await bundle('cli-standalone', path.join(dir, PLUGIN_BUNDLE_FILE)),
    await bundle('toolbox', path.join(dir, TOOLBOX_FILE)),
  ];
  writeFileSync(path.join(dir, NOTICES_FILE), noticesFor(root, `${PLUGIN_COMMAND} ${version}`, metafiles));
  copyFileSync(path.join(root, 'LICENSE'), path.join(dir, 'LICENSE'));
}

function pluginReadme(): string {
  return `# ${PLUGIN_PACKAGE_NAME}

\`kubectl codingrun\`: watch, approve and inspect the CodingRuns of
[chamvi-operator](https://github.com/chamvi/chamvi-operator), or run one on this machine.
Needs Node.js ${NODE_MAJOR} or later; \`run --local\` also needs git and redis-server on PATH.

\`\`\`sh
npx ${PLUGIN_PACKAGE_NAME} --help
npm install -g ${PLUGIN_PACKAGE_NAME}   # then: kubectl codingrun get -w
\`\`\`

One bundled file with no dependencies (THIRD-PARTY-NOTICES.md lists what is inside).
`;
}

async function main(): Promise<void> {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const plugin = path.join(staging, 'plugin');
  await buildPluginFiles(plugin);

  // npm: the plugin files, package.json and a README, packed as npm would publish them.
  const npmDir = path.join(staging, 'npm');
  cpSync(plugin, npmDir, { recursive: true });
  writeFileSync(path.join(npmDir, 'package.json'), `${JSON.stringify(pluginPackageJson(version), null, 2)}\n`);
  writeFileSync(path.join(npmDir, 'README.md'), pluginReadme());
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', out], {
      cwd: npmDir,
      encoding: 'utf8',
      env: { ...process.env, npm_config_loglevel: 'error' },
    }),
  ) as { filename: string }[];
  const npmTarball = packed[0]!.filename;

  // krew: the plugin files and the launcher krew links onto PATH; the manifest names the archive's sha256.
  const krewDir = path.join(staging, 'krew');
  cpSync(plugin, krewDir, { recursive: true });
  writeFileSync(path.join(krewDir, KREW_LAUNCHER), krewLauncherScript(PLUGIN_BUNDLE_FILE));
  chmodSync(path.join(krewDir, KREW_LAUNCHER), 0o755);
  const archive = path.join(out, archiveName(version));
  reproducibleTarGz(krewDir, readdirSync(krewDir), archive);
  const manifestFile = path.join(out, `${KREW_PLUGIN_NAME}.yaml`);
  writeFileSync(manifestFile, renderKrewManifest({ version, uri: releaseAssetUri(version), sha256: sha256(archive) }));

  // chart: a copy at the release's version, with the generated CRD and the release's images.
  const operatorImage = releaseImage('chamvi-operator', options['operator-oci']);
  const sandboxImage = releaseImage('chamvi-sandbox', options['sandbox-oci']);
  const chartDir = path.join(staging, 'chart', CHART);
  cpSync(path.join(root, 'charts', CHART), chartDir, { recursive: true });
  copyFileSync(path.join(root, 'crds/chamvi.dev_codingruns.yaml'), path.join(chartDir, 'files/crd/chamvi.dev_codingruns.yaml'));
  writeFileSync(path.join(chartDir, 'Chart.yaml'), releaseChartYaml(readFileSync(path.join(chartDir, 'Chart.yaml'), 'utf8'), version));
  writeFileSync(
    path.join(chartDir, 'values.yaml'),
    releaseValuesYaml(readFileSync(path.join(chartDir, 'values.yaml'), 'utf8'), {
      version,
      operator: operatorImage,
      sandbox: sandboxImage,
    }),
  );
  const helmEnv = {
    ...process.env,
    HELM_CACHE_HOME: path.join(staging, 'helm/cache'),
    HELM_CONFIG_HOME: path.join(staging, 'helm/config'),
    HELM_DATA_HOME: path.join(staging, 'helm/data'),
  };
  execFileSync(options.helm, ['lint', '--strict', chartDir], { env: helmEnv, stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync(options.helm, ['package', chartDir, '--destination', out], { env: helmEnv, stdio: ['ignore', 'ignore', 'inherit'] });
  const chartPackage = `${CHART}-${version}.tgz`;

  const assets = [npmTarball, path.basename(archive), path.basename(manifestFile), chartPackage];
  writeFileSync(path.join(out, 'SHA256SUMS'), assets.map((file) => `${sha256(path.join(out, file))}  ${file}\n`).join(''));
  rmSync(staging, { recursive: true, force: true });

  say(`release ${version} in ${path.relative(process.cwd(), out) || out}:`);
  for (const file of [...assets, 'SHA256SUMS']) say(`  ${file}`);
  for (const [label, image] of [
    ['operator image', operatorImage],
    ['sandbox image', sandboxImage],
  ] as const) {
    say(`  chart's ${label}: ${imageReference(image)} (${image.source})`);
  }
  if (!operatorImage.digest || !sandboxImage.digest) {
    say('NOTE: the chart pins an image by tag only where no built image was given; no digest was made up.');
    say('      Build the images, then: make release OPERATOR_OCI=DIR SANDBOX_OCI=DIR (docs/release.md).');
  }
  say('Nothing was published. To publish with your own credentials, see docs/release.md.');
}

try {
  await main();
} catch (error) {
  rmSync(staging, { recursive: true, force: true });
  process.stderr.write(`release: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
