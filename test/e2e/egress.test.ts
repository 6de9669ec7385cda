// Issue #12 end to end on the local control plane: the operator, the egress proxy as its own
// process, a real npm registry on loopback published as registry.test, and a run whose setup
// is `npm ci` with the real npm client. Allowed, the install goes through the proxy and the run
// succeeds; not allowed, the proxy refuses and the run ends SetupFailed naming the host.
// (kwok enforces no NetworkPolicy: that a sandbox cannot go around the proxy is the real-node
// tier's test. Here the tools use the proxy because the pod's environment says so.)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { kubectlOk, kubeconfigPath } from '../support/cluster.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { EgressProxyProcess, TEST_EGRESS_KEY } from '../support/egress-proxy-process.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, eventsOf, finishedRun } from '../support/namespaced-runs.ts';
import { startNpmRegistryServer, type NpmRegistryServer } from '../support/npm-registry-server.ts';
import { operatorStory, type RunStatus } from '../support/fault-fixture.ts';

const NS = 'e2e-egress';
let root: string;
let repoUrl: string;
let registry: NpmRegistryServer;
let proxy: EgressProxyProcess;
let e2e: E2eOperator;
let registryHost: string;

type EgressRunStatus = RunStatus & {
  egress?: { allowed: number; denied: number; hosts: Array<{ host: string; allowed: number; denied: number; rule?: string }> };
};

function codingRun(name: string, allow: string[]) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: {
      task: 'Install the dependencies.',
      repository: { url: repoUrl },
      model: { provider: 'scripted', scriptRef: { name: 'done' } },
      sandbox: {
        // A cache inside the workspace: each run starts with none, so every tarball comes
        // through the proxy (a warm cache shared with this machine would hide a refusal).
        setup: "npm ci --cache ./.npm-cache --no-audit --no-fund --loglevel=http && node -e \"console.log(require('left-pad')('ok', 5))\"",
        egress: { allow },
      },
    },
  };
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-egress-'));
  registry = await startNpmRegistryServer([
    { name: 'left-pad', version: '1.3.0', files: { 'index.js': "module.exports = (s, n) => String(s).padStart(n, ' ');\n" } },
  ]);
  registryHost = `registry.test:${registry.port}`;
  const lock = registry.lockEntry('left-pad', `http://${registryHost}`);
  repoUrl = createBareRepository(root, {
    'README.md': 'An app with one dependency.\n',
    '.gitignore': 'node_modules/\n.npm-cache/\n',
    '.npmrc': `registry=http://${registryHost}/\n`,
    'package.json': JSON.stringify({ name: 'app', version: '1.0.0', dependencies: { 'left-pad': '1.3.0' } }, null, 2),
    'package-lock.json': JSON.stringify(
      {
        name: 'app',
        version: '1.0.0',
        lockfileVersion: 3,
        requires: true,
        packages: {
          '': { name: 'app', version: '1.0.0', dependencies: { 'left-pad': '1.3.0' } },
          'node_modules/left-pad': lock,
        },
      },
      null,
      2,
    ),
  });
  proxy = await EgressProxyProcess.start(kubeconfigPath(), {
    allowEgress: [registryHost, 'other.test'],
    // The registry listens on loopback, as an internal registry listens on a private address:
    // the admin names it, and only it.
    allowPrivateDestinations: [registryHost],
    hostAliases: { 'registry.test': '127.0.0.1' },
    watchNamespaces: [NS],
    statusFlushSeconds: 1,
  });
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-egress',
    redisPrefix: `e2eegress${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    env: {
      CHAMVI_ALLOW_EGRESS: `${registryHost},other.test`,
      CHAMVI_EGRESS_KEY: TEST_EGRESS_KEY,
      CHAMVI_EGRESS_PROXY_HOST: '127.0.0.1',
      CHAMVI_EGRESS_PROXY_PORT: String(proxy.port),
    },
  });
  await applyIn(NS, [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'done' },
      data: { 'script.json': JSON.stringify({ turns: [{ text: 'Installed.' }] }) },
    },
  ]);
}, 180_000);

afterAll(async () => {
  await e2e?.stop();
  await proxy?.kill();
  await registry?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

// A run that never finishes leaves only a timeout: print what the operator and the proxy said.
beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    const proxyLines = proxy.lines.slice(-60).map((line) => JSON.stringify(line));
    console.error(`the operator's story:\n${operatorStory(e2e.operator, 60)}\nthe proxy's last log lines:\n${proxyLines.join('\n')}`);
  });
});

describe('egress by name, end to end', () => {
  it('installs dependencies with npm ci through the proxy when the registry is allowed', async () => {
    await applyIn(NS, [codingRun('allowed', [registryHost])]);
    const status = await finishedRun<EgressRunStatus>(NS, 'allowed', 120_000);
    expect(status, status.message).toMatchObject({ phase: 'Succeeded' });
    expect(registry.requests).toContain('/left-pad/-/left-pad-1.3.0.tgz');
    const uid = (await kubectlOk(['get', 'crun', 'allowed', '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).trim();
    expect(proxy.audit.some((line) => line.runUid === uid && line.decision === 'allowed' && line.host === 'registry.test')).toBe(true);
  });

  it('ends SetupFailed naming the host when the run does not allow the registry', async () => {
    const before = registry.requests.length;
    await applyIn(NS, [codingRun('denied', ['other.test'])]);
    const status = await finishedRun<EgressRunStatus>(NS, 'denied', 120_000);
    expect(status).toMatchObject({ phase: 'Failed', reason: 'SetupFailed' });
    expect(status.message).toContain('registry.test');
    expect(status.message).toContain('403');
    expect(registry.requests.length).toBe(before);
    expect(await eventsOf(NS, 'involvedObject.name=denied,reason=EgressDenied', 'jsonpath={.items[*].message}')).toContain(registryHost);
  });

  it('refuses at acceptance a run asking beyond allowEgress, naming the host', async () => {
    await applyIn(NS, [codingRun('beyond', ['registry.npmjs.org'])]);
    const status = await finishedRun<EgressRunStatus>(NS, 'beyond', 60_000);
    expect(status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(status.message).toContain('"registry.npmjs.org"');
  });
});
