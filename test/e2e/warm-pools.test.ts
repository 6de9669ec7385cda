// Warm sandbox pools on the whole product (operator process, real API server, kwok pods
// running the real toolbox, real git, the scripted model): the pool fills, runs started at
// once each claim a different pod (never one pod for two runs), a claimed sandbox holds only
// its run's files, claimed pods go with their run and are never handed out again, the pool
// refills after claims, and shrinks when sized down.
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunTiming } from '../../operator/src/api/index.ts';
import { WARM_POOL_LABEL } from '../../operator/src/reconcile/warm-pool.ts';
import { kubectl, kubeconfigPath, redisUrl } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, finishedRun } from '../support/namespaced-runs.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { startE2eOperator } from '../support/e2e-operator.ts';

const NS = 'e2e-warm';
const POOL = 'default';
const RUNS = ['warm-a', 'warm-b', 'warm-c', 'warm-d', 'warm-e'];

interface RunStatus {
  phase?: string;
  message?: string;
  podName?: string;
  timings?: RunTiming[];
  result?: { diff: string };
}

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;
const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

function configFile(size: number): string {
  const path = join(root, `config-${size}.json`);
  writeFileSync(path, JSON.stringify({ warmPools: [{ name: POOL, namespace: NS, size }] }));
  return path;
}

/** The pool's unclaimed pods: name, Ready, being deleted. */
async function poolPods(): Promise<Array<{ name: string; ready: boolean; deleting: boolean }>> {
  const listed = await kubectl(['get', 'pods', '-n', NS, '-l', `${WARM_POOL_LABEL}=${POOL}`, '-o', 'json']);
  const items = (
    JSON.parse(listed.stdout) as {
      items: Array<{
        metadata: { name: string; deletionTimestamp?: string };
        status?: { conditions?: Array<{ type: string; status: string }> };
      }>;
    }
  ).items;
  return items.map((pod) => ({
    name: pod.metadata.name,
    ready: pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false,
    deleting: pod.metadata.deletionTimestamp !== undefined,
  }));
}

const readyCount = async () => (await poolPods()).filter((pod) => pod.ready && !pod.deleting).length;
const liveCount = async () => (await poolPods()).filter((pod) => !pod.deleting).length;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-warm-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n' });
  ({ operator, registrar } = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-warm',
    redisPrefix: `warm${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    env: { CHAMVI_CONFIG: configFile(3) },
  }));
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('a warm pool', () => {
  it('fills to its size with Ready pods that belong to no run', async () => {
    await eventually(async () => ((await readyCount()) === 3 ? true : undefined), 60_000, 'three Ready pool pods');
    const owners = await kubectl([
      'get',
      'pods',
      '-n',
      NS,
      '-l',
      `${WARM_POOL_LABEL}=${POOL}`,
      '-o',
      'jsonpath={.items[*].metadata.ownerReferences}',
    ]);
    expect(owners.stdout.trim()).toBe('');
  }, 90_000);

  it("deletes a pod planted with the pool's labels, which no run is ever given", async () => {
    // Someone who may create pods in the namespace copies a pool pod: its labels and spec, their own name.
    const [model] = (await poolPods()).filter((pod) => pod.ready && !pod.deleting);
    const copy = JSON.parse((await kubectl(['get', 'pod', model!.name, '-n', NS, '-o', 'json'])).stdout) as {
      metadata: { labels: Record<string, string> };
      spec: Record<string, unknown>;
    };
    const planted = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'planted', labels: copy.metadata.labels }, spec: copy.spec };
    // It takes the place of a pool pod that went (so the pool does not see one too many).
    await kubectl(['delete', 'pod', model!.name, '-n', NS, '--wait=false']);
    await applyIn(NS, [planted]);
    // Deleted as a pod the pool did not make, not as one too many (which the pool trims too).
    await operator.waitForLog('replaced pods with the pool label that this replica did not make');
    await eventually(
      async () => (!(await poolPods()).some((pod) => pod.name === 'planted' && !pod.deleting) ? true : undefined),
      30_000,
      'the planted pod deleted',
    );
    await eventually(async () => ((await readyCount()) === 3 ? true : undefined), 60_000, 'three Ready pool pods');
  }, 90_000);

  it('gives runs started at once each a pod of its own, holding only its own files; claimed pods go with their run', async () => {
    const pool = new Set((await poolPods()).map((pod) => pod.name));
    // Each run writes the workspace listing into the tracked README (so its diff shows what
    // the sandbox held before the run touched it), then leaves a mark a later user of the pod would see.
    const objects = RUNS.flatMap((name) => [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `${name}-script` },
        data: {
          'script.json': JSON.stringify({
            turns: [
              {
                toolCalls: [
                  { toolName: 'bash', input: { command: 'ls -A | sort > README.md' } },
                  { toolName: 'bash', input: { command: `echo ${name} > mark-${name}.txt` } },
                ],
              },
              { text: 'Listed.' },
            ],
          }),
        },
      },
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name },
        spec: {
          task: 'List the workspace.',
          repository: { url: repoUrl },
          model: { provider: 'scripted', scriptRef: { name: `${name}-script` } },
        },
      },
    ]);
    await applyIn(NS, objects);
    const statuses = await Promise.all(RUNS.map((name) => finishedRun<RunStatus>(NS, name, 120_000))).catch(async (error: unknown) => {
      // What the runs and the operator said, to tell a stuck run from a slow one.
      const phases = await kubectl([
        'get',
        'crun',
        '-n',
        NS,
        '-o',
        'jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.podName} {.status.message}{"\\n"}{end}',
      ]);
      const said = operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-6);
      throw new Error(`${String(error)}\n${phases.stdout}\n${JSON.stringify(said)}`);
    });
    for (const [index, status] of statuses.entries()) expect(status.phase, `${RUNS[index]}: ${status.message}`).toBe('Succeeded');

    const podNames = statuses.map((status) => status.podName!);
    expect(new Set(podNames).size, `pods: ${podNames.join(', ')}`).toBe(RUNS.length);
    const claimed = statuses.filter((status) => status.timings?.some((entry) => entry.phase === 'SandboxClaimed'));
    // At least the three Ready when the runs came were claimed; later runs took refills or fresh pods.
    const failures = operator.lines.filter((line) => (line.level ?? 0) >= 40).map((line) => `${String(line.msg)}: ${String(line.err)}`);
    expect(claimed.length, `pods ${podNames.join(', ')}; operator warnings: ${failures.slice(-5).join(' | ')}`).toBeGreaterThanOrEqual(3);
    for (const status of claimed) expect(status.podName).toMatch(new RegExp(`^${POOL}-warm-`));
    expect(podNames.filter((name) => pool.has(name)).length).toBeGreaterThanOrEqual(3);

    for (const [index, status] of statuses.entries()) {
      // The workspace held the clone and nothing else: no other run's mark, no leftovers.
      expect(status.result?.diff, RUNS[index]).toContain('+.git\n+README.md\n');
      for (const other of RUNS.filter((name) => name !== RUNS[index])) expect(status.result?.diff).not.toContain(`mark-${other}`);
    }
    // A claimed pod is the run's: it is deleted with the run's end, never returned to the pool.
    await eventually(
      async () => {
        const left = await kubectl(['get', 'pods', '-n', NS, '-o', 'jsonpath={.items[*].metadata.name}']);
        const names = new Set(left.stdout.split(/\s+/).filter(Boolean));
        return podNames.some((name) => names.has(name)) ? undefined : true;
      },
      30_000,
      'the runs’ pods deleted',
    );
  }, 180_000);

  it('refills after claims', async () => {
    await eventually(async () => ((await readyCount()) === 3 ? true : undefined), 60_000, 'three Ready pool pods again').catch(
      async (error: unknown) => {
        // What the pool held and what the loop did, to tell a loop that stopped from a slow one.
        const pods = await kubectl(['get', 'pods', '-n', NS, '-o', 'wide', '--show-labels']);
        const said = operator.lines.filter((line) => /warm pool|lease|claim/i.test(String(line.msg))).slice(-12);
        throw new Error(`${String(error)}\n${pods.stdout}\n${said.map((line) => JSON.stringify(line)).join('\n')}`);
      },
    );
  }, 90_000);

  // A claimed run goes from no status to Running in one write, made after its agent is queued:
  // the prepare job may read the run before that write, without the template it names recorded
  // in status.template (nor Accepted), and must not take that for a template that is missing.
  it('gives runs that name a CodingRunTemplate pool pods, and they run what the template says', async () => {
    await eventually(async () => ((await readyCount()) === 3 ? true : undefined), 60_000, 'three Ready pool pods');
    const names = ['templated-a', 'templated-b', 'templated-c'];
    await applyIn(NS, [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'templated-script' },
        data: {
          'script.json': JSON.stringify({
            turns: [{ toolCalls: [{ toolName: 'bash', input: { command: 'echo templated > README.md' } }] }, { text: 'Done.' }],
          }),
        },
      },
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRunTemplate',
        metadata: { name: 'pooled' },
        spec: {
          task: 'Say templated.',
          repository: { url: repoUrl },
          model: { provider: 'scripted', scriptRef: { name: 'templated-script' } },
        },
      },
      ...names.map((name) => ({
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name },
        spec: { templateRef: { name: 'pooled' } },
      })),
    ]);
    const statuses = await Promise.all(names.map((name) => finishedRun<RunStatus>(NS, name, 120_000)));
    for (const [index, status] of statuses.entries()) {
      expect(status.phase, `${names[index]}: ${status.message}`).toBe('Succeeded');
      expect(status.result?.diff).toContain('+templated');
    }
    const claimed = statuses.filter((status) => status.timings?.some((entry) => entry.phase === 'SandboxClaimed'));
    expect(
      claimed.length,
      `runs given a pool pod: ${JSON.stringify(statuses.map((status) => [status.podName, status.timings]))}`,
    ).toBeGreaterThanOrEqual(1);
  }, 180_000);

  it('shrinks when sized down', async () => {
    await operator.kill();
    operator = new OperatorProcess({
      kubeconfig: kubeconfigPath(),
      env: {
        REDIS_URL: redisUrl(),
        CHAMVI_REDIS_PREFIX: `warm-shrink${Date.now()}`,
        CHAMVI_ALLOW_REPO: `file://${join(root, 'git')}/*`,
        CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
        CHAMVI_WATCH_NAMESPACES: NS,
        CHAMVI_LEADER_ELECTION_NAMESPACE: `${NS}-lease`,
        CHAMVI_IDENTITY: 'e2e-warm-2',
        CHAMVI_CONFIG: configFile(1),
      },
    });
    await operator.waitForLog('caches synced; reconciling', 60_000);
    await eventually(async () => ((await liveCount()) === 1 ? true : undefined), 60_000, 'one pool pod left');
    // And it stays there: the loop neither refills past the size nor empties it.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await liveCount()).toBe(1);
  }, 120_000);
});
