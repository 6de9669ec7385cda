// `make release` as people who do not clone the repository meet it: the release script builds
// into an empty directory (with a real OCI image layout for the operator and none for the
// sandbox), then the npm tarball is installed offline with an empty npm cache and run (help,
// `get` against the API server, a scripted `run --local` on the toolbox it ships), npx runs
// it from the tarball, the real krew installs the archive against the manifest's sha256, and
// helm renders the packaged chart with the images the release could and could not pin.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { controlPlaneBin, createNamespace, kubeconfigPath, kubectl, redisUrl } from '../support/cluster.ts';
import { helm } from '../support/helm.ts';
import { krewBinary } from '../support/krew.ts';
import { createLocalWorkspace, writeLocalManifest } from '../support/local-workspace.ts';
import { runProcess, type ProcessResult } from '../support/run-process.ts';

const root = new URL('../../', import.meta.url).pathname;
const version = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
const NAMESPACE = 'release-test';

let base: string;
let out: string;
let build: ProcessResult;
let operatorDigest: string;
/** The npm prefix the tarball was installed into. */
let prefix: string;

const sha256 = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');
const asset = (name: string) => path.join(out, name);
const npmTarball = () => asset(`chamvi-kubectl-codingrun-${version}.tgz`);
const krewArchive = () => asset(`kubectl-codingrun-v${version}.tar.gz`);
/** npm with a cache of its own that starts empty: what installs can only come from the tarball. */
const npm = (args: string[], cwd: string, cache: string) =>
  runProcess('npm', args, {
    cwd,
    env: { ...process.env, npm_config_cache: cache, npm_config_update_notifier: 'false' },
    stdin: 'ignore',
    timeoutMs: 60_000,
  });

/** An OCI image layout as buildah writes one: a config and a manifest blob, index.json tagged with the version. */
function writeOciLayout(dir: string): string {
  const blob = (content: string) => {
    const digest = sha256(content);
    writeFileSync(path.join(dir, 'blobs/sha256', digest), content);
    return { digest: `sha256:${digest}`, size: Buffer.byteLength(content) };
  };
  mkdirSync(path.join(dir, 'blobs/sha256'), { recursive: true });
  writeFileSync(path.join(dir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  const config = blob(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] }, config: {} }));
  const manifest = blob(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
      layers: [],
    }),
  );
  const index = {
    schemaVersion: 2,
    manifests: [
      {
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        ...manifest,
        annotations: { 'org.opencontainers.image.ref.name': version },
      },
    ],
  };
  writeFileSync(path.join(dir, 'index.json'), JSON.stringify(index));
  return manifest.digest;
}

beforeAll(async () => {
  base = mkdtempSync(path.join(tmpdir(), 'chamvi-release-test-'));
  out = path.join(base, 'release');
  operatorDigest = writeOciLayout(path.join(base, 'operator-oci'));
  build = await runProcess(
    path.join(root, 'node_modules/.bin/tsx'),
    [
      'operator/tools/release/build-release.ts',
      '--out',
      out,
      '--helm',
      path.join(controlPlaneBin(), 'helm'),
      '--operator-oci',
      path.join(base, 'operator-oci'),
      '--sandbox-oci',
      path.join(base, 'no-sandbox-oci'),
    ],
    { cwd: root, env: { ...process.env, SOURCE_DATE_EPOCH: '1700000000' }, stdin: 'ignore', timeoutMs: 120_000 },
  );
  expect(build.stderr).toBe('');
  expect(build.code).toBe(0);
}, 150_000);

afterAll(() => {
  if (base) rmSync(base, { recursive: true, force: true });
});

describe('make release', () => {
  it('writes the npm tarball, the krew archive and manifest, the chart and SHA256SUMS of each', () => {
    const sums = readFileSync(asset('SHA256SUMS'), 'utf8').trim().split('\n');
    const listed = sums.map((line) => line.split('  ')[1]);
    expect(listed.sort()).toEqual(
      [
        `chamvi-kubectl-codingrun-${version}.tgz`,
        `chamvi-operator-${version}.tgz`,
        'codingrun.yaml',
        `kubectl-codingrun-v${version}.tar.gz`,
      ].sort(),
    );
    for (const line of sums) {
      const [sum, file] = line.split('  ');
      expect(sha256(readFileSync(asset(file!))), file).toBe(sum);
    }
    expect(build.stdout).toContain('Nothing was published');
  });

  it('installs the npm tarball offline with an empty cache, and the plugin runs', async () => {
    prefix = path.join(base, 'prefix');
    const installed = await npm(
      ['install', '--global', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, npmTarball()],
      base,
      path.join(base, 'npm-cache-install'),
    );
    expect(installed.code, installed.stderr).toBe(0);
    const packageDir = path.join(prefix, 'lib/node_modules/@chamvi/kubectl-codingrun');
    expect(JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8'))).not.toHaveProperty('dependencies');
    const help = await runProcess(path.join(prefix, 'bin/kubectl-codingrun'), ['--help'], { stdin: 'ignore' });
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^kubectl-codingrun: watch, approve and inspect CodingRuns/);
  });

  it('runs with npx from the tarball, offline', async () => {
    const work = path.join(base, 'npx-work');
    mkdirSync(work);
    const result = await npm(
      ['exec', '--offline', '--yes', `--package=${npmTarball()}`, '--', 'kubectl-codingrun', '--help'],
      work,
      path.join(base, 'npm-cache-npx'),
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^kubectl-codingrun: watch, approve and inspect CodingRuns/);
  });

  it('the installed plugin reads runs from the API server with the client it bundles', async () => {
    await createNamespace(NAMESPACE);
    const run = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'packaged', namespace: NAMESPACE },
      spec: {
        task: 'Greet',
        repository: { url: 'https://github.com/acme/hello.git' },
        model: { provider: 'scripted', scriptRef: { name: 'script' } },
      },
    };
    expect((await kubectl(['create', '-f', '-'], { input: JSON.stringify(run) })).code).toBe(0);
    const result = await runProcess(
      path.join(prefix, 'bin/kubectl-codingrun'),
      ['get', '-n', NAMESPACE, '--kubeconfig', kubeconfigPath()],
      { env: { ...process.env, KUBECONFIG: '' }, stdin: 'ignore' },
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^NAME\b/);
    expect(result.stdout).toMatch(/^packaged\b/m);
  });

  it('the installed plugin runs a scripted run --local on the toolbox it ships', async () => {
    const workspace = createLocalWorkspace('chamvi-release-local-');
    try {
      const file = writeLocalManifest(workspace, {
        name: 'packaged',
        task: 'Greet the world.',
        turns: [
          { toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }] },
          { text: 'Done.' },
        ],
      });
      // No CHAMVI_TOOLBOX_PATH and a prefix outside the checkout: only the shipped toolbox.mjs is there to find.
      const result = await runProcess(path.join(prefix, 'bin/kubectl-codingrun'), ['run', '-f', file, '--local'], {
        cwd: workspace.work,
        env: { PATH: process.env.PATH ?? '', HOME: workspace.work, TMPDIR: workspace.pluginTmp, REDIS_URL: redisUrl() },
        stdin: 'ignore',
        timeoutMs: 60_000,
      });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain('-Hello\n+Hello, world\n');
    } finally {
      rmSync(workspace.work, { recursive: true, force: true });
    }
  });

  it('krew installs the archive against the manifest, and kubectl finds the plugin', async () => {
    const krew = krewBinary();
    const krewRoot = path.join(base, 'krew');
    const env = { ...process.env, KREW_ROOT: krewRoot, KUBECONFIG: kubeconfigPath() };
    const installed = await runProcess(krew, ['install', `--manifest=${asset('codingrun.yaml')}`, `--archive=${krewArchive()}`], {
      env,
      stdin: 'ignore',
    });
    expect(installed.code, installed.stderr).toBe(0);
    const viaKubectl = await runProcess(path.join(controlPlaneBin(), 'kubectl'), ['codingrun', '--help'], {
      env: { ...env, PATH: `${path.join(krewRoot, 'bin')}:${process.env.PATH}` },
      stdin: 'ignore',
    });
    expect(viaKubectl.code, viaKubectl.stderr).toBe(0);
    expect(viaKubectl.stdout).toMatch(/^kubectl-codingrun: watch, approve and inspect CodingRuns/);

    // The control: krew checks the sha256, so a manifest naming another archive's is refused.
    const tampered = path.join(base, 'tampered.yaml');
    writeFileSync(tampered, readFileSync(asset('codingrun.yaml'), 'utf8').replaceAll(sha256(readFileSync(krewArchive())), '0'.repeat(64)));
    const refused = await runProcess(krew, ['install', `--manifest=${tampered}`, `--archive=${krewArchive()}`], {
      env: { ...env, KREW_ROOT: path.join(base, 'krew-tampered') },
      stdin: 'ignore',
    });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/checksum|sha256/i);
  });

  it('packages the chart at the version, the operator image by tag and digest, the sandbox by tag where it had no image', async () => {
    const chart = asset(`chamvi-operator-${version}.tgz`);
    const shown = await helm(['show', 'chart', chart]);
    expect(shown.stdout).toMatch(new RegExp(`^version: ${version.replaceAll('.', '\\.')}$`, 'm'));
    expect(shown.stdout).toMatch(new RegExp(`^appVersion: ${version.replaceAll('.', '\\.')}$`, 'm'));
    const rendered = await helm([
      'template',
      'chamvi',
      chart,
      '--namespace',
      'chamvi-system',
      '--set',
      'config.allowRepo={https://github.com/acme/*}',
    ]);
    expect(rendered.code, rendered.stderr).toBe(0);
    const objects = parseAllDocuments(rendered.stdout).map(
      (document) => document.toJS() as { kind?: string; data?: Record<string, string>; spec?: any } | null,
    );
    const deployment = objects.find((object) => object?.kind === 'Deployment');
    expect(deployment?.spec.template.spec.containers[0].image).toBe(`ghcr.io/chamvi/chamvi-operator:${version}@${operatorDigest}`);
    const config = objects.find((object) => object?.kind === 'ConfigMap' && object.data?.['config.yaml'])?.data?.['config.yaml'];
    expect(config).toMatch(new RegExp(`sandboxImage: ghcr.io/chamvi/chamvi-sandbox:${version.replaceAll('.', '\\.')}\\n`));
    expect(build.stdout).toMatch(/sandbox image: .* by tag only/);
  });
});
