// How runs end, on the whole product (operator process, real API server and Redis, kwok pods
// running the real toolbox, real git, the scripted model and a fake OpenAI server): every
// ending keeps the latest diff there is and says where it came from (result.diffSource),
// `kubectl codingrun cancel` ends a run in every phase, time waiting for a human does not
// count against budget.timeout, and the API server refusing a run's pod (a real
// ResourceQuota) shows in its status and an Event instead of leaving it without a phase.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { REFUSE_CLEANUP_FINALIZER, applyAdmissionPolicy } from '../support/admission-policy.ts';
import { createNamespace, kubectl } from '../support/cluster.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { createBareRepository, git } from '../support/git-fixture.ts';
import { applyIn, runStatus, eventsOf } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';
import { approveAsShown, runPlugin } from '../support/plugin.ts';

const NS = 'e2e-endings';
/** A namespace of its own for the ResourceQuota, so it refuses no other test's pods. */
const QUOTA_NS = 'e2e-endings-quota';
/** The controller steps in this long after budget.timeout (the agent's own deadline comes first). */
const GRACE_SECONDS = 2;

interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  steps?: number;
  approvalWaitSeconds?: number;
  result?: { diff: string; diffSource?: string; diffConfigMap?: string; filesChanged: number; revision?: string };
}

let root: string;
let repoUrl: string;
let e2e: E2eOperator;
let fake: FakeOpenAIServer;

const statusOf = (name: string, namespace = NS) => runStatus<RunStatus>(namespace, name);
const ended = (name: string, namespace = NS, timeoutMs = 90_000) =>
  eventually(
    async () => {
      const status = await statusOf(name, namespace);
      return status.phase === 'Succeeded' || status.phase === 'Failed' || status.phase === 'Cancelled' ? status : undefined;
    },
    timeoutMs,
    `${name} to end`,
  ).catch(async (error: unknown) => {
    const problems = e2e.operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-10);
    console.error(
      `${name}: ${JSON.stringify(await statusOf(name, namespace))}\n${problems.map((line) => JSON.stringify(line)).join('\n')}`,
    );
    throw error;
  });
const reached = (name: string, test: (status: RunStatus) => boolean, namespace = NS, timeoutMs = 60_000) =>
  eventually(
    async () => {
      const status = await statusOf(name, namespace);
      return test(status) ? status : undefined;
    },
    timeoutMs,
    `${name} to get there`,
  );

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});
function codingRun(name: string, model: object, spec: object = {}) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: { task: 'Make the README greet the whole world.', repository: { url: repoUrl }, model, ...spec },
  };
}
/** A scripted run: a script ConfigMap named after the run, and the run. */
const scriptedRun = (name: string, turns: object[], spec: object = {}) => [
  script(`${name}-script`, turns),
  codingRun(name, { provider: 'scripted', scriptRef: { name: `${name}-script` } }, spec),
];
/** A run of the real openai-compatible adapter against the fake server, answering as `model`. */
const fakeModelRun = (name: string, spec: object = {}) =>
  codingRun(name, { provider: 'openai-compatible', name, baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } }, spec);

const EDIT = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };
const FAKE_EDIT = {
  type: 'tool-calls',
  toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
} as const;
/** A model that commits its work: a diff taken against HEAD, not the cloned commit, would lose it. */
const FAKE_EDIT_COMMIT = {
  type: 'tool-calls',
  toolCalls: [
    ...FAKE_EDIT.toolCalls,
    { name: 'bash', arguments: { command: 'git -c user.name=m -c user.email=m@example.com commit -qam wip' } },
  ],
} as const;
const sleep = (seconds: number) => ({ toolName: 'bash', input: { command: `sleep ${seconds}`, timeoutMs: seconds * 1000 + 5000 } });
const EDITED = '-Hello\n+Hello, world\n';
/** Step 2 (a scripted model answers at once) is in its 60 s bash a moment after step 1's status lands. */
const bashUnderWay = () => new Promise((resolve) => setTimeout(resolve, 2_000));

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-endings-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n\nA small example repository.\n' });
  fake = await startFakeOpenAIServer();
  await createNamespace(QUOTA_NS, { restricted: true });
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-endings',
    redisPrefix: `endings${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    env: {
      CHAMVI_WATCH_NAMESPACES: `${NS},${QUOTA_NS}`,
      CHAMVI_DEADLINE_GRACE_SECONDS: String(GRACE_SECONDS),
      CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL,
    },
  });
  await applyIn(NS, [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
      stringData: { apiKey: 'sk-endings-0123456789' },
    },
  ]);
}, 120_000);

afterAll(async () => {
  await e2e?.stop();
  await fake?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('every ending keeps the latest diff there is (#13.3)', () => {
  // [name, objects, how the test ends it (after the edit), reason, diffSource]
  const endings: Array<[string, () => object[], ((name: string) => Promise<void>) | undefined, string, string]> = [
    [
      // The known bug: a tool call still running past budget.timeout + grace lost the diff.
      'deadline-at-controller',
      () => scriptedRun('deadline-at-controller', [{ toolCalls: [EDIT] }, { toolCalls: [sleep(60)] }], { budget: { timeout: '8s' } }),
      undefined,
      'DeadlineExceeded',
      'final',
    ],
    [
      'budget',
      () => scriptedRun('budget', [{ toolCalls: [EDIT] }, { text: 'never asked' }], { budget: { maxSteps: 1 } }),
      undefined,
      'BudgetExceeded',
      'final',
    ],
    ['model-auth', () => [fakeModelRun('model-auth')], undefined, 'ModelAuthFailed', 'final'],
    ['model-rejects', () => [fakeModelRun('model-rejects')], undefined, 'ModelRequestRejected', 'final'],
    [
      'pod-deleted',
      () => scriptedRun('pod-deleted', [{ toolCalls: [EDIT] }, { toolCalls: [sleep(60)] }]),
      async (name) => {
        // The snapshot of step 1 is stored before step 1's status is written; then step 2's bash starts.
        await reached(name, (status) => (status.steps ?? 0) >= 1);
        await bashUnderWay();
        const uid = (await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
        await kubectl(['delete', 'pod', sandboxPodName({ metadata: { name, uid } }), '-n', NS, '--wait=false']);
      },
      'SandboxLost',
      'snapshot',
    ],
  ];

  beforeAll(() => {
    fake.enqueueFor('model-auth', FAKE_EDIT_COMMIT, { type: 'error', status: 401, message: 'invalid api key' });
    fake.enqueueFor('model-rejects', FAKE_EDIT, { type: 'error', status: 400, message: 'context too long' });
  });

  it.each(endings)(
    '%s: ends with its reason and the edit made before it as the diff',
    async (name, objects, endIt, reason, source) => {
      await applyIn(NS, objects());
      if (endIt) await endIt(name);
      const status = await ended(name);
      expect(status, status.message).toMatchObject({ phase: 'Failed', reason });
      expect(status.result?.diffSource).toBe(source);
      expect(status.result?.diff).toContain(EDITED);
      // Whoever ended it, the diff is against the commit the run cloned, and says which.
      expect(status.result?.revision).toBe(git(['rev-parse', 'HEAD'], join(root, 'git', 'hello.git')).trim());
      expect(status.result?.diffConfigMap).toBeDefined();
      const kept = await kubectl(['get', 'configmap', status.result!.diffConfigMap!, '-n', NS, '-o', 'jsonpath={.data.diff}']);
      expect(kept.stdout).toContain('+Hello, world');
    },
    120_000,
  );
});

describe('kubectl codingrun cancel, in every phase (#13.4)', () => {
  const cancel = (name: string, namespace = NS) => runPlugin(['cancel', name, '-n', namespace, '--reason', 'wrong branch']);

  it('Running, with a bash call in flight: Cancelled at once, the diff taken from the sandbox, the pod gone', async () => {
    await applyIn(NS, scriptedRun('cancel-running', [{ toolCalls: [EDIT] }, { toolCalls: [sleep(60)] }, { text: 'never' }]));
    await reached('cancel-running', (status) => status.phase === 'Running' && (status.steps ?? 0) >= 1);
    await bashUnderWay();
    const started = Date.now();
    const result = await cancel('cancel-running');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('cancel requested');
    const status = await ended('cancel-running');
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(status).toMatchObject({ phase: 'Cancelled', reason: 'Cancelled', message: expect.stringContaining('wrong branch') });
    expect(status.result).toMatchObject({ diffSource: 'final', diff: expect.stringContaining(EDITED) });
    const uid = (await kubectl(['get', 'crun', 'cancel-running', '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
    await eventually(
      async () =>
        (await kubectl(['get', 'pod', sandboxPodName({ metadata: { name: 'cancel-running', uid } }), '-n', NS])).code !== 0 || undefined,
      30_000,
      'the sandbox pod to go',
    );
  }, 120_000);

  it('WaitingForApproval: Cancelled with the diff made before the call that waits, against the cloned commit', async () => {
    // Step 1 edits and commits: a diff taken against HEAD would be empty. The controller ends
    // this run, so it takes the diff against the commit the run's state says was cloned.
    const commit = { toolName: 'bash', input: { command: 'git -c user.name=m -c user.email=m@example.com commit -qam wip' } };
    await applyIn(
      NS,
      scriptedRun(
        'cancel-waiting',
        [{ toolCalls: [EDIT, commit] }, { toolCalls: [{ toolName: 'write_file', input: { path: 'x', content: 'x' } }] }],
        {
          approval: { tools: ['write_file'] },
        },
      ),
    );
    await reached('cancel-waiting', (status) => status.phase === 'WaitingForApproval');
    expect((await cancel('cancel-waiting')).code).toBe(0);
    const status = await ended('cancel-waiting');
    expect(status).toMatchObject({ phase: 'Cancelled', reason: 'Cancelled' });
    const cloned = git(['rev-parse', 'HEAD'], join(root, 'git', 'hello.git')).trim();
    expect(status.result).toMatchObject({ diffSource: 'final', diff: expect.stringContaining(EDITED), revision: cloned });
  }, 120_000);

  it('after it finished: a no-op that says so', async () => {
    await applyIn(NS, scriptedRun('cancel-finished', [{ toolCalls: [EDIT] }, { text: 'done' }]));
    const before = await ended('cancel-finished');
    expect(before.phase).toBe('Succeeded');
    const result = await cancel('cancel-finished');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('already ended Succeeded (Completed): nothing to cancel');
    const annotations = await kubectl(['get', 'crun', 'cancel-finished', '-n', NS, '-o', 'jsonpath={.metadata.annotations}']);
    expect(annotations.stdout).not.toContain('chamvi.dev/cancel');
    expect(await statusOf('cancel-finished')).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
  }, 120_000);
});

describe('human time is not the run’s time (#13.5)', () => {
  it('a run answered after longer than its whole budget.timeout still goes on and succeeds', async () => {
    await applyIn(
      NS,
      scriptedRun(
        'slow-human',
        [{ toolCalls: [EDIT] }, { toolCalls: [{ toolName: 'bash', input: { command: 'true' } }] }, { text: 'done' }],
        {
          budget: { timeout: '10s' },
          approval: { tools: ['bash'] },
        },
      ),
    );
    await reached('slow-human', (status) => status.phase === 'WaitingForApproval');
    // Past budget.timeout (10 s) and the controller's grace (2 s), waiting for a human.
    await new Promise((resolve) => setTimeout(resolve, 16_000));
    expect((await statusOf('slow-human')).phase).toBe('WaitingForApproval');
    const { approved } = await approveAsShown(['slow-human', '-n', NS]);
    expect(approved.code, approved.stderr).toBe(0);
    const status = await ended('slow-human');
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(status.approvalWaitSeconds).toBeGreaterThanOrEqual(16);
  }, 120_000);

  it('the approval timeout denies the call and the run goes on', async () => {
    await applyIn(
      NS,
      scriptedRun(
        'no-human',
        [{ toolCalls: [EDIT] }, { toolCalls: [{ toolName: 'bash', input: { command: 'true' } }] }, { text: 'done' }],
        {
          budget: { timeout: '20s' },
          approval: { tools: ['bash'], timeout: '3s' },
        },
      ),
    );
    const status = await ended('no-human');
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(status.result?.diff).toContain(EDITED);
    const uid = (await kubectl(['get', 'crun', 'no-human', '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const denied = await kubectl([
      'get',
      'events',
      '-n',
      NS,
      '--field-selector',
      `involvedObject.uid=${uid},reason=Denied`,
      '-o',
      'jsonpath={.items[*].message}',
    ]);
    expect(denied.stdout).toContain('no answer within spec.approval.timeout (3s)');
  }, 120_000);
});

describe('refusals by the API server show (#13.9)', () => {
  it('a ResourceQuota that refuses the pod: Pending with SandboxRefused and an Event; the run goes on once the quota allows it', async () => {
    await applyIn(QUOTA_NS, [{ apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'no-pods' }, spec: { hard: { pods: '0' } } }]);
    // The quota controller fills in status.hard; until then admission refuses pods anyway.
    await applyIn(QUOTA_NS, scriptedRun('over-quota', [{ toolCalls: [EDIT] }, { text: 'done' }]));
    const refused = await reached('over-quota', (status) => status.reason === 'SandboxRefused', QUOTA_NS, 30_000);
    expect(refused.phase).toBe('Pending');
    expect(refused.message).toMatch(/forbidden/);
    expect(refused.message).toContain('ResourceQuota');
    const uid = (await kubectl(['get', 'crun', 'over-quota', '-n', QUOTA_NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const events = await kubectl([
      'get',
      'events',
      '-n',
      QUOTA_NS,
      '--field-selector',
      `involvedObject.uid=${uid},reason=SandboxRefused`,
      '-o',
      'jsonpath={.items[*].type}',
    ]);
    expect(events.stdout).toBe('Warning');

    // Cancel while Pending: at once, nothing to keep.
    await applyIn(QUOTA_NS, scriptedRun('cancel-pending', [{ text: 'never' }]));
    await reached('cancel-pending', (status) => status.reason === 'SandboxRefused', QUOTA_NS, 30_000);
    expect((await runPlugin(['cancel', 'cancel-pending', '-n', QUOTA_NS])).code).toBe(0);
    expect(await ended('cancel-pending', QUOTA_NS, 30_000)).toMatchObject({ phase: 'Cancelled', reason: 'Cancelled' });

    await kubectl(['delete', 'resourcequota', 'no-pods', '-n', QUOTA_NS]);
    const status = await ended('over-quota', QUOTA_NS);
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
  }, 120_000);

  it("an admission policy that refuses the run's own finalizer: Pending with SandboxRefused naming it; the run goes on once it is gone", async () => {
    const policy = 'e2e-endings-no-finalizer';
    const label = 'e2e-endings/refuse-finalizer';
    const removePolicy = await applyAdmissionPolicy({
      name: policy,
      namespace: NS,
      operations: ['CREATE', 'UPDATE'],
      label,
      validation: { expression: REFUSE_CLEANUP_FINALIZER, message: 'this cluster refuses finalizers on these runs' },
    });
    try {
      // The policy takes a moment to be enforced: until a run carrying the finalizer is refused.
      const probe = { ...codingRun('finalizer-probe', { provider: 'scripted', scriptRef: { name: 'x' } }) };
      const labelled = (object: { metadata: object }, extra: object = {}) => ({
        ...object,
        metadata: { ...object.metadata, labels: { [label]: 'true' }, ...extra },
      });
      await eventually(
        async () => {
          const dryRun = await kubectl(['create', '--dry-run=server', '-n', NS, '-f', '-'], {
            input: stringify(labelled(probe, { finalizers: ['chamvi.dev/cleanup'] })),
          });
          return dryRun.code !== 0 && dryRun.stderr.includes(policy) ? true : undefined;
        },
        30_000,
        'the policy to be enforced',
      );
      const [runScript, run] = scriptedRun('no-finalizer', [{ toolCalls: [EDIT] }, { text: 'done' }]) as [object, { metadata: object }];
      await applyIn(NS, [runScript, labelled(run)]);
      const refused = await reached('no-finalizer', (status) => status.reason === 'SandboxRefused', NS, 30_000);
      expect(refused.phase).toBe('Pending');
      expect(refused.message).toContain("The API server refused the run's CodingRun no-finalizer");
      expect(refused.message).toContain(policy);
    } finally {
      await removePolicy();
    }
    const status = await ended('no-finalizer', NS);
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
  }, 120_000);

  it('a ResourceQuota that refuses the diff ConfigMap: the run still ends, with the bounded diff in status and the message saying why', async () => {
    await applyIn(QUOTA_NS, [script('no-room-script', [{ toolCalls: [EDIT] }, { text: 'done' }])]);
    const existing = (await kubectl(['get', 'configmaps', '-n', QUOTA_NS, '-o', 'name'])).stdout.trim().split('\n').length;
    await applyIn(QUOTA_NS, [
      {
        apiVersion: 'v1',
        kind: 'ResourceQuota',
        metadata: { name: 'no-more-configmaps' },
        spec: { hard: { configmaps: String(existing) } },
      },
    ]);
    try {
      await applyIn(QUOTA_NS, [codingRun('no-room', { provider: 'scripted', scriptRef: { name: 'no-room-script' } })]);
      const status = await ended('no-room', QUOTA_NS);
      expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
      expect(status.message).toContain('The full diff could not be kept: the API server refused its ConfigMap (HTTP 403');
      expect(status.result).toMatchObject({ diffSource: 'final', diff: expect.stringContaining(EDITED) });
      expect(status.result?.diffConfigMap).toBeUndefined();
      // The transcript's chunk is refused by the same quota: the run went on without it, and says so.
      const refused = await eventsOf(QUOTA_NS, 'involvedObject.name=no-room,reason=TranscriptNotStored', 'jsonpath={.items[*].message}');
      expect(refused).toContain('missing from the transcript: the API server refused its ConfigMap (HTTP 403');
    } finally {
      await kubectl(['delete', 'resourcequota', 'no-more-configmaps', '-n', QUOTA_NS]);
    }
  }, 120_000);

  it('a run whose name is longer than a label value (63) gets its pod and finishes', async () => {
    const name = `a-run-with-a-long-name-${'x'.repeat(60)}`;
    await applyIn(NS, scriptedRun(name, [{ toolCalls: [EDIT] }, { text: 'done' }]));
    const status = await ended(name);
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(status.result?.diff).toContain(EDITED);
  }, 120_000);
});
