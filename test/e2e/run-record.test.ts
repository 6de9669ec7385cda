// The run record (issue #13 items 1 and 2) on the whole product: the operator process, real
// Redis, kwok pods running the real toolbox, the scripted model, and the plugin as a process.
// `kubectl codingrun logs -f` prints each step as it lands and exits with the run's code; a
// 300-step run's transcript is complete, bounded and readable after the run ended, with only
// a namespace Role that reads ConfigMaps and CodingRuns; Events carry transitions, not steps.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { RECORD_LABEL, STEPS_PER_CHUNK } from '../../operator/src/record/transcript-chunks.ts';
import type { TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';
import { kubeconfigPath, kubectl, kubectlOk } from '../support/cluster.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';
import { pluginPath, runPlugin, startPlugin } from '../support/plugin.ts';
import { runProcess } from '../support/run-process.ts';

const NS = 'e2e-record';
/** 96 KiB of base64 noise: gzip cannot shrink it, so only the transcript's bounds keep a step small. */
const NOISE = randomBytes(72 * 1024).toString('base64');

interface RunStatus {
  phase?: string;
  reason?: string;
  steps?: number;
}

let root: string;
let repoUrl: string;
let e2e: E2eOperator;

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});
const codingRun = (name: string, scriptName: string, spec: object = {}) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name },
  spec: {
    task: 'Make the README greet the whole world.',
    repository: { url: repoUrl },
    model: { provider: 'scripted', scriptRef: { name: scriptName } },
    ...spec,
  },
});
const READ = { toolName: 'read_file', input: { path: 'README.md' } };
const ECHO = { toolName: 'bash', input: { command: 'echo hi' } };

const jsonLines = (text: string) =>
  text
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as TranscriptEntry & { kind: string; phase?: string; reason?: string });

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-record-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n\nA small example repository.\n', 'noise.txt': NOISE });
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-record',
    redisPrefix: `record${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
  });
}, 120_000);

afterAll(async () => {
  await e2e?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('kubectl codingrun logs -f', () => {
  it('prints each step of a live run as it lands, then the outcome, and exits 0 when the run Succeeded', async () => {
    // The run waits for a human at steps 2 and 3. Once the plugin shows step 2, it is following;
    // what the run does after the first answer must reach it while the run waits again.
    await applyIn(NS, [
      script('follow-script', [{ toolCalls: [READ] }, { toolCalls: [ECHO] }, { toolCalls: [ECHO] }, { text: 'Greeted.' }]),
      codingRun('follow', 'follow-script', { approval: { tools: ['bash'] } }),
    ]);
    const plugin = startPlugin(['logs', 'follow', '-n', NS, '-f']);
    const approve = async (id: string) => {
      const status = await runStatus<RunStatus & { pendingApproval: { id: string; input: string } }>(NS, 'follow');
      expect(status.pendingApproval.id).toBe(id);
      const sha256 = createHash('sha256').update(status.pendingApproval.input, 'utf8').digest('hex');
      const answer = JSON.stringify({ id, decision: 'approve', sha256 });
      await kubectlOk(['annotate', 'crun', 'follow', '-n', NS, `chamvi.dev/approval=${answer}`, '--overwrite']);
      return sha256;
    };
    await eventually(async () => (/waits for approval s2-c2/.test(plugin.output()) ? true : undefined), 90_000, 'step 2 in the output');
    expect(plugin.output()).toMatch(
      /^step 1 at .*\n  → read_file \{"path":"README.md"\}\n    ok .*\nstep 2 at .*\n  → bash \{"command":"echo hi"\}\n    … waits for approval s2-c2 /m,
    );
    const first = await approve('s2-c2');
    // Step 3's entry is written before its status says it waits: from then the plugin has seconds,
    // not the half minute after which an idle watch is cut and the plugin lists the chunks again.
    await eventually(
      async () =>
        (await runStatus<RunStatus & { pendingApproval?: { id: string } }>(NS, 'follow')).pendingApproval?.id === 's3-c3'
          ? true
          : undefined,
      90_000,
      'the run to wait at step 3',
    );
    const parked = Date.now();
    await eventually(async () => (/waits for approval s3-c3/.test(plugin.output()) ? true : undefined), 60_000, 'step 3 in the output');
    expect(Date.now() - parked).toBeLessThan(10_000);
    expect(plugin.output()).toMatch(
      new RegExp(`^step 2 approval s2-c2 of bash approved \\(sha256 ${first}\\) .*\\n  → bash .*\\n    ok `, 'm'),
    );
    expect(plugin.child.exitCode).toBeNull();

    await approve('s3-c3');
    const result = await plugin.result;
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines.filter((line) => /^step \d+ /.test(line)).map((line) => line.split(' ').slice(0, 3).join(' '))).toEqual([
      'step 1 at',
      'step 2 at',
      'step 2 approval',
      'step 3 at',
      'step 3 approval',
      'step 4 at',
    ]);
    expect(result.stdout).toContain('  | Greeted.');
    expect(lines.at(-1)).toMatch(/^codingrun\/follow Succeeded \(Completed\): .*\[4 steps, 3 tool calls, \d+ tokens\]$/);
  }, 180_000);

  it('exits 1 with the reason when the run fails, as JSON lines ending in the outcome', async () => {
    await applyIn(NS, [
      script('budget-script', [{ toolCalls: [READ] }, { text: 'never' }]),
      codingRun('budget', 'budget-script', { budget: { maxSteps: 1 } }),
    ]);
    const result = await runPlugin(['logs', 'budget', '-n', NS, '-f', '-o', 'json']);
    expect(result.code, result.stderr).toBe(1);
    const entries = jsonLines(result.stdout);
    expect(entries.map((entry) => entry.kind)).toEqual(['step', 'outcome']);
    expect(entries.at(-1)).toMatchObject({ kind: 'outcome', phase: 'Failed', reason: 'BudgetExceeded' });
  }, 150_000);
});

describe('the transcript of a 300-step run', () => {
  const STEPS = 300;

  it('is complete, bounded and readable after the run ended; Events hold its transitions, not its steps', async () => {
    const turns = [
      ...Array.from({ length: STEPS - 1 }, () => ({ toolCalls: [{ toolName: 'read_file', input: { path: 'noise.txt' } }] })),
      { text: 'Read it all.' },
    ];
    await applyIn(NS, [script('long-script', turns), codingRun('long', 'long-script', { budget: { maxSteps: STEPS, timeout: '30m' } })]);
    const status = await finishedRun<RunStatus>(NS, 'long', 420_000);
    expect(status).toMatchObject({ phase: 'Succeeded', steps: STEPS });

    const result = await runPlugin(['logs', 'long', '-n', NS, '-o', 'json']);
    expect(result.code, result.stderr).toBe(0);
    const lines = jsonLines(result.stdout);
    // A finished run's record ends with its outcome, from status.
    expect(lines.at(-1)).toMatchObject({ kind: 'outcome', phase: 'Succeeded', steps: STEPS });
    const entries = lines.slice(0, -1);
    expect(entries.map((entry) => entry.step)).toEqual(Array.from({ length: STEPS }, (_, index) => index + 1));
    // Each step's 72 KiB of noise reached the model bounded (64 KiB) and the transcript cut further, marked.
    for (const entry of entries.slice(0, -1)) {
      const output = entry.calls![0]!.result!.output;
      expect(output.cutFrom).toBeGreaterThan(60_000);
      expect(output.text.length).toBeLessThanOrEqual(2048);
    }
    expect(entries.at(-1)!.text?.text).toBe('Read it all.');

    const uid = await kubectlOk(['get', 'crun', 'long', '-n', NS, '-o', 'jsonpath={.metadata.uid}']);
    const chunks = JSON.parse(
      await kubectlOk(['get', 'configmaps', '-n', NS, '-l', `chamvi.dev/run-uid=${uid},${RECORD_LABEL}=transcript`, '-o', 'json']),
    ).items as Array<{ binaryData: Record<string, string> }>;
    expect(chunks).toHaveLength(Math.ceil(STEPS / STEPS_PER_CHUNK));
    const bytes = chunks.map((chunk) => Buffer.byteLength(JSON.stringify(chunk)));
    expect(Math.max(...bytes)).toBeLessThan(512 * 1024);

    const events = JSON.parse(await kubectlOk(['get', 'events', '-n', NS, '--field-selector', `involvedObject.uid=${uid}`, '-o', 'json']))
      .items as Array<{ reason: string }>;
    expect(events.map((event) => event.reason)).not.toContain('Step');
    expect(events.length).toBeLessThan(12);
  }, 480_000);

  it("is readable with only a Role in the run's namespace (get, list, watch on codingruns and configmaps), and not without it", async () => {
    const role = (name: string, resources: string[]) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace: NS },
      rules: [
        { apiGroups: ['chamvi.dev'], resources: ['codingruns'], verbs: ['get', 'list', 'watch'] },
        ...(resources.length > 0 ? [{ apiGroups: [''], resources, verbs: ['get', 'list', 'watch'] }] : []),
      ],
    });
    const reader = async (name: string, resources: string[]) => {
      await kubectlOk(['apply', '-f', '-'], {
        input: [
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: NS } },
          role(name, resources),
          {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'RoleBinding',
            metadata: { name, namespace: NS },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
            subjects: [{ kind: 'ServiceAccount', name, namespace: NS }],
          },
        ]
          .map((object) => stringify(object))
          .join('---\n'),
      });
      const token = (await kubectlOk(['create', 'token', name, '-n', NS, '--duration=1h'])).trim();
      const config = parse(readFileSync(kubeconfigPath(), 'utf8')) as { users: Array<{ user: object }> };
      for (const user of config.users) user.user = { token };
      const file = join(root, `${name}-kubeconfig`);
      writeFileSync(file, stringify(config));
      // Only this kubeconfig: a token of the ServiceAccount, no client certificate of the admin.
      return runProcess(process.execPath, [pluginPath, '--kubeconfig', file, 'logs', 'long', '-n', NS, '--step', '300'], {
        env: { ...process.env, KUBECONFIG: '' },
      });
    };
    const allowed = await reader('transcript-reader', ['configmaps']);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(allowed.stdout).toMatch(/^step 300 at /);
    expect(allowed.stdout).toContain('  | Read it all.');
    const refused = await reader('runs-only-reader', []);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/forbidden/);
    // The admin's kubectl agrees: the reader may do no more than read.
    expect(
      (await kubectl(['auth', 'can-i', 'get', 'secrets', '-n', NS, '--as', `system:serviceaccount:${NS}:transcript-reader`])).stdout.trim(),
    ).toBe('no');
  }, 60_000);
});
