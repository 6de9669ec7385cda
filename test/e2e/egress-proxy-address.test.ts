// Issue #12: the operator follows the egress proxy Service's ClusterIP. The Service is deleted
// and created again with another address (what a reinstall or a GitOps prune and re-sync does);
// the next run's sandbox gets the new address in its proxy variables, while the sandbox that
// already runs keeps the one it was given. Real API server (it allocates and checks the
// ClusterIPs), the operator as a process reading the Service as the chart configures it
// (egressProxy.service). Each run waits for an approval, so its sandbox pod stays to be read.
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { PROXY_ADDRESS_TTL_MS } from '../../operator/src/egress/egress-proxy-address.ts';
import { createNamespace, kubectl, kubectlOk } from '../support/cluster.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { TEST_EGRESS_KEY } from '../support/egress-proxy-process.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';

const NS = 'e2e-proxy-address';
const PROXY_NS = 'e2e-proxy-address-infra';
const SERVICE = 'egress-proxy';
/** Inside the control plane's Service range (10.96.0.0/16), away from what it allocates by itself. */
const FIRST_IP = '10.96.250.10';
const SECOND_IP = '10.96.250.20';

let root: string;
let repoUrl: string;
let e2e: E2eOperator;

function proxyService(clusterIP: string) {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: SERVICE, namespace: PROXY_NS },
    spec: { clusterIP, selector: { 'app.kubernetes.io/name': 'chamvi-egress-proxy' }, ports: [{ name: 'proxy', port: 3128 }] },
  };
}

function gatedRun(name: string) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: {
      task: 'Install the dependencies.',
      repository: { url: repoUrl },
      model: { provider: 'scripted', scriptRef: { name: 'install' } },
      approval: { tools: ['bash'] },
      sandbox: { egress: { allow: ['registry.test'] } },
    },
  };
}

/** HTTPS_PROXY of the run's sandbox pod, once the pod exists. */
async function proxyVariable(run: string): Promise<string> {
  return eventually(
    async () => {
      const pods = JSON.parse(await kubectlOk(['get', 'pods', '-n', NS, '-l', `chamvi.dev/run=${run}`, '-o', 'json'])) as {
        items: { spec: { containers: { env?: { name: string; value?: string }[] }[] } }[];
      };
      return pods.items[0]?.spec.containers[0]?.env?.find((variable) => variable.name === 'HTTPS_PROXY')?.value;
    },
    60_000,
    `the sandbox pod of ${run}`,
  );
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-proxy-address-'));
  repoUrl = createBareRepository(root, { 'README.md': 'An app.\n' });
  await createNamespace(PROXY_NS);
  await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(proxyService(FIRST_IP)) });
  const config = join(root, 'operator.yaml');
  writeFileSync(
    config,
    stringify({
      allowEgress: ['registry.test'],
      egressKey: TEST_EGRESS_KEY,
      egressProxy: { service: SERVICE, namespace: PROXY_NS, port: 3128 },
    }),
  );
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-proxy-address',
    redisPrefix: `e2eproxyaddress${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    env: { CHAMVI_CONFIG: config },
  });
  await applyIn(NS, [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'install' },
      data: {
        'script.json': JSON.stringify({ turns: [{ toolCalls: [{ toolName: 'bash', input: { command: 'npm ci' } }] }, { text: 'done' }] }),
      },
    },
  ]);
}, 180_000);

afterAll(async () => {
  await kubectl(['delete', 'crun', '--all', '-n', NS, '--wait=false']);
  await e2e?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('the egress proxy address', () => {
  it('a sandbox gets the ClusterIP the proxy Service has when the sandbox is created', async () => {
    await applyIn(NS, [gatedRun('first')]);
    expect(await proxyVariable('first')).toMatch(new RegExp(`@${FIRST_IP.replaceAll('.', '\\.')}:3128$`));
  });

  it('after the Service is created again with a new ClusterIP, the next sandbox gets the new one; the running one keeps its own', async () => {
    await kubectlOk(['delete', 'service', SERVICE, '-n', PROXY_NS, '--wait=true']);
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(proxyService(SECOND_IP)) });
    // Past the cache of the address read for the first sandbox.
    await new Promise((resolve) => setTimeout(resolve, PROXY_ADDRESS_TTL_MS + 1000));
    await applyIn(NS, [gatedRun('second')]);
    expect(await proxyVariable('second')).toMatch(new RegExp(`@${SECOND_IP.replaceAll('.', '\\.')}:3128$`));
    expect(await proxyVariable('first')).toMatch(new RegExp(`@${FIRST_IP.replaceAll('.', '\\.')}:3128$`));
    expect(e2e.operator.logged('egress proxy address').map((line) => line.address)).toEqual([FIRST_IP, SECOND_IP]);
  });
});
