// The chart's RBAC is exactly enough: the operator runs a CodingRun end to end with the
// identity of the chart's ServiceAccount (a real token of it, on an RBAC-enforcing API server),
// and taking one of a few verbs away from its ClusterRole makes the same run fail.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { controlPlaneBin, createNamespace, kubeconfigPath, kubectl, kubectlOk, redisUrl } from '../support/cluster.ts';
import { createHash } from 'node:crypto';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { auditLogFile } from '../support/control-plane/control-plane.ts';
import { templateKubeVersion } from '../support/helm.ts';

const RELEASE_NS = 'chamvi-rbac';
const NS = 'e2e-rbac';
const ROLE = 'chamvi-chamvi-operator';
const SERVICE_ACCOUNT = `system:serviceaccount:${RELEASE_NS}:chamvi-chamvi-operator`;
const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;
const chart = new URL('../../charts/chamvi-operator', import.meta.url).pathname;

let root: string;
let repoUrl: string;
let operatorKubeconfig: string;
let registrar: SandboxExecRegistrar;
let fake: FakeOpenAIServer;
let clusterRole: Record<string, any>;
/** Every rule of the chart's ClusterRole and Roles, as rendered by helm. */
let chartRules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
let runs = 0;

/** kubectl that throws with its stderr when it fails. */
const ok = (args: string[], input?: string) => kubectlOk(args, input === undefined ? {} : { input });

function startOperator(identity: string) {
  return new OperatorProcess({
    kubeconfig: operatorKubeconfig,
    env: {
      REDIS_URL: redisUrl(),
      CHAMVI_REDIS_PREFIX: `rbac${Date.now()}${identity}`,
      CHAMVI_ALLOW_REPO: `file://${join(root, 'git')}/*`,
      CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
      CHAMVI_WATCH_NAMESPACES: NS,
      CHAMVI_LEADER_ELECTION_NAMESPACE: RELEASE_NS,
      // The lease the chart's ConfigMap names, the one its Role grants by name.
      CHAMVI_CONFIG: join(root, 'operator-config.yaml'),
      CHAMVI_IDENTITY: identity,
      CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL,
    },
  });
}

interface RunOutcome {
  phase?: string;
  reason?: string;
  message?: string;
  result?: { diff: string; diffConfigMap?: string };
  /** Every line the operator logged, as JSON: where a refusal shows when no status could be written. */
  said: string[];
}

/** Starts an operator with the current RBAC, applies a fresh run and waits for it to end (or not). */
async function runOnce(timeoutMs: number, afterEnd?: (name: string) => Promise<void>): Promise<RunOutcome> {
  const name = `rbac-${++runs}`;
  const operator = startOperator(`rbac-op-${runs}`);
  try {
    await operator.waitForLog('became leader', 60_000);
    const run = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name, namespace: NS },
      spec: { task: 'Greet the world.', repository: { url: repoUrl }, model: { provider: 'scripted', scriptRef: { name: 'script' } } },
    };
    await ok(['apply', '-f', '-'], stringify(run));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = JSON.parse((await ok(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.status}'])) || '{}');
      if (status.phase === 'Succeeded' || status.phase === 'Failed' || Date.now() > deadline) {
        await afterEnd?.(name);
        return { ...status, said: operator.lines.map((line) => JSON.stringify(line)) };
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    await operator.kill('SIGKILL');
  }
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-rbac-'));
  repoUrl = createBareRepository(root);
  writeFileSync(join(root, 'operator-config.yaml'), stringify({ leaderElection: { leaseName: ROLE } }));

  await createNamespace(RELEASE_NS);
  await createNamespace(NS, { restricted: true });
  const rendered = execFileSync(
    join(controlPlaneBin(), 'helm'),
    [
      'template',
      'chamvi',
      chart,
      '-n',
      RELEASE_NS,
      '--show-only',
      'templates/serviceaccount.yaml',
      '--show-only',
      'templates/rbac.yaml',
      ...templateKubeVersion(),
    ],
    { encoding: 'utf8' },
  );
  await ok(['apply', '-n', RELEASE_NS, '-f', '-'], rendered);
  chartRules = parseAllDocuments(rendered)
    .map((document) => document.toJS() as { kind?: string; rules?: typeof chartRules } | null)
    .filter((object) => object?.kind === 'ClusterRole' || object?.kind === 'Role')
    .flatMap((object) => object!.rules ?? []);
  clusterRole = JSON.parse(await ok(['get', 'clusterrole', ROLE, '-o', 'json']));
  const script = {
    turns: [
      { toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }] },
      { text: 'done' },
    ],
  };
  await ok(
    ['apply', '-n', NS, '-f', '-'],
    stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'script' }, data: { 'script.json': JSON.stringify(script) } }),
  );

  // The operator's kubeconfig holds a real token of the chart's ServiceAccount (TokenRequest),
  // not impersonation: client-node's exec WebSocket does not send Impersonate-User, so
  // impersonation would let exec through as the admin and prove nothing.
  const token = (await ok(['create', 'token', 'chamvi-chamvi-operator', '-n', RELEASE_NS, '--duration=1h'])).trim();
  const config = parse(readFileSync(kubeconfigPath(), 'utf8'));
  for (const user of config.users) user.user = { token };
  operatorKubeconfig = join(root, 'operator-kubeconfig');
  writeFileSync(operatorKubeconfig, stringify(config));
  registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(root, 'workspaces') });
  fake = await startFakeOpenAIServer();
}, 120_000);

afterAll(async () => {
  await registrar?.stop();
  await fake?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

async function withoutVerb(resource: string, verb: string, test: () => Promise<void>) {
  const reduced = structuredClone(clusterRole);
  delete reduced.metadata.resourceVersion;
  for (const rule of reduced.rules) if (rule.resources.includes(resource)) rule.verbs = rule.verbs.filter((v: string) => v !== verb);
  await ok(['replace', '-f', '-'], JSON.stringify(reduced));
  try {
    await test();
  } finally {
    const restored = structuredClone(clusterRole);
    delete restored.metadata.resourceVersion;
    await ok(['replace', '-f', '-'], JSON.stringify(restored));
  }
}

/** A run's status as the API server holds it ({} before the operator wrote one; undefined once it is gone). */
async function statusOf(
  name: string,
): Promise<{ phase?: string; reason?: string; pendingApproval?: { id: string; input: string } } | undefined> {
  const result = await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.status}']);
  if (result.code !== 0) return /NotFound|not found/.test(result.stderr) ? undefined : {};
  return JSON.parse(result.stdout || '{}');
}

/** The paths of a run the plain scripted runs do not take, under one operator with the chart's identity. */
async function auditScenarios(): Promise<void> {
  const EDIT = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };
  const scriptMap = (name: string, turns: object[]) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name },
    data: { 'script.json': JSON.stringify({ turns }) },
  });
  const run = (name: string, spec: object) => ({
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: {
      task: 'Greet the world.',
      repository: { url: repoUrl },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
      ...spec,
    },
  });
  const scripted = (name: string) => ({ model: { provider: 'scripted', scriptRef: { name } } });
  await ok(
    ['apply', '-n', NS, '-f', '-'],
    [
      scriptMap('script-approval', [
        { toolCalls: [EDIT] },
        { toolCalls: [{ toolName: 'bash', input: { command: 'git diff --stat' } }] },
        { text: 'done' },
      ]),
      scriptMap('script-two-edits', [{ toolCalls: [EDIT] }, { toolCalls: [EDIT] }, { text: 'never reached' }]),
      scriptMap('script-slow', [
        { toolCalls: [EDIT] },
        { toolCalls: [{ toolName: 'bash', input: { command: 'sleep 10' } }] },
        { text: 'done' },
      ]),
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
        stringData: { apiKey: 'sk-rbac-audit-key' },
      },
    ]
      .map((object) => stringify(object))
      .join('---\n'),
  );
  fake.enqueue(
    {
      type: 'tool-calls',
      toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
      usage: { promptTokens: 10, completionTokens: 1 },
    },
    { type: 'text', text: 'Done.', usage: { promptTokens: 10, completionTokens: 1 } },
  );
  const operator = startOperator(`rbac-op-audit`);
  try {
    await operator.waitForLog('became leader', 60_000);
    await ok(
      ['apply', '-n', NS, '-f', '-'],
      [
        run('audit-approval', { ...scripted('script-approval'), approval: { tools: ['bash'] } }),
        run('audit-provider', {
          model: { provider: 'openai-compatible', name: 'fake-coder', baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } },
        }),
        run('audit-fails', { ...scripted('script-two-edits'), budget: { maxSteps: 1 } }),
        run('audit-deleted', scripted('script-slow')),
        run('audit-ttl', { ttlSecondsAfterFinished: 0 }),
      ]
        .map((object) => stringify(object))
        .join('---\n'),
    );
    const waiting = await eventually(
      async () => {
        const status = await statusOf('audit-approval');
        return status?.phase === 'WaitingForApproval' ? status : undefined;
      },
      90_000,
      'audit-approval to wait for approval',
    );
    const sha256 = createHash('sha256').update(waiting.pendingApproval!.input, 'utf8').digest('hex');
    await ok([
      'annotate',
      'crun',
      'audit-approval',
      '-n',
      NS,
      `chamvi.dev/approval=${JSON.stringify({ id: waiting.pendingApproval!.id, decision: 'approve', sha256 })}`,
      '--overwrite',
    ]);
    await eventually(
      async () =>
        (await statusOf('audit-deleted'))?.phase === 'Running' && ((await statusOf('audit-deleted')) as { steps?: number }).steps === 1
          ? true
          : undefined,
      90_000,
      'audit-deleted mid-step',
    );
    await ok(['delete', 'crun', 'audit-deleted', '-n', NS, '--wait=true', '--timeout=60s']);
    const ended = async (name: string) =>
      eventually(
        async () => {
          const status = await statusOf(name);
          return status && (status.phase === 'Succeeded' || status.phase === 'Failed') ? status : undefined;
        },
        90_000,
        `${name} to end`,
      );
    expect(await ended('audit-approval')).toMatchObject({ phase: 'Succeeded' });
    expect(await ended('audit-provider')).toMatchObject({ phase: 'Succeeded' });
    expect(await ended('audit-fails')).toMatchObject({ phase: 'Failed', reason: 'BudgetExceeded' });
    // Deleted by the operator itself once it ended (ttlSecondsAfterFinished: 0).
    await eventually(
      async () => ((await statusOf('audit-ttl')) === undefined ? true : undefined),
      90_000,
      'audit-ttl to be deleted by its TTL',
    );
  } finally {
    await operator.kill('SIGKILL');
  }
}

describe("the chart's RBAC", () => {
  it("lets the operator, as the chart's ServiceAccount, run a CodingRun end to end", async () => {
    expect((await ok(['auth', 'can-i', 'create', 'pods', '--subresource=exec', '-n', NS, '--as', SERVICE_ACCOUNT])).trim()).toBe('yes');
    expect((await kubectl(['auth', 'can-i', 'list', 'secrets', '-n', NS, '--as', SERVICE_ACCOUNT])).stdout.trim()).toBe('no');
    const status = await runOnce(90_000);
    expect(status).toMatchObject({ phase: 'Succeeded' });
    expect(status.result!.diff).toContain('+Hello, world');
  }, 150_000);

  // The operator execs over WebSocket, an upgraded GET, which this API server authorizes
  // with the get verb on pods/exec (create is for SPDY clients and newer servers).
  it('is needed verb by verb: without pods/exec get the run fails', async () => {
    await withoutVerb('pods/exec', 'get', async () => {
      const status = await runOnce(90_000);
      expect(status.phase).toBe('Failed');
      expect(status.message).toMatch(/exec into pod .* failed: Unexpected server response: 403/);
    });
  }, 150_000);

  // A refused ConfigMap does not throw the run's work away (#13.9): the run ends with the
  // bounded diff in status, and the status and the operator's log say which verb is missing.
  it('is needed verb by verb: without configmaps create neither the diff nor the transcript is kept, and the status says why', async () => {
    await withoutVerb('configmaps', 'create', async () => {
      const status = await runOnce(90_000);
      expect(status.phase).toBe('Succeeded');
      expect(status.message).toMatch(/The full diff could not be kept[\s\S]*cannot create resource \W*configmaps\W/);
      expect(status.result?.diffConfigMap).toBeUndefined();
      expect(status.said.some((line) => line.includes('transcript entry refused'))).toBe(true);
    });
  }, 150_000);

  it('is needed verb by verb: without codingruns/status update no run gets a status', async () => {
    await withoutVerb('codingruns/status', 'update', async () => {
      const status = await runOnce(15_000);
      expect(status.phase).toBeUndefined();
      // No status for the reason under test: the API server refused the operator's status write.
      const refused = status.said.filter((line) => /forbidden.*cannot (update|patch) resource \W*codingruns\/status\W/.test(line));
      expect(refused, status.said.slice(-30).join('\n')).not.toEqual([]);
    });
  }, 150_000);
  // Not a hand-copied list: the API server's audit log (Metadata level, this ServiceAccount only; see
  // test/support/control-plane/control-plane.ts) of real runs says which verbs the operator asked for:
  // the runs above, and, with one operator, a run that waits for and gets an approval, one that uses a
  // real provider's labelled Secret, one that fails mid-way (with its partial diff), one deleted mid-step
  // and one its ttlSecondsAfterFinished deletes, then one more deleted once it ended. The chart's
  // ClusterRole must grant those verbs and no more. It reads the log of every run in this file (the
  // refused ones retry and replace a diff ConfigMap): run the whole file, not this test alone.
  it('grants exactly the verbs the operator asked for in real runs (from the audit log)', async () => {
    await auditScenarios();
    const status = await runOnce(90_000, async (name) => {
      await ok(['delete', 'crun', name, '-n', NS, '--wait=true', '--timeout=60s']);
    });
    expect(status).toMatchObject({ phase: 'Succeeded' });
    const used = new Set<string>();
    for (const line of readFileSync(auditLogFile(inject('controlPlaneStateDir')), 'utf8').split('\n')) {
      if (!line) continue;
      const event = JSON.parse(line) as {
        user: { username: string };
        verb: string;
        objectRef?: { apiGroup?: string; resource?: string; subresource?: string };
      };
      if (event.user.username !== SERVICE_ACCOUNT || !event.objectRef?.resource) continue;
      const { apiGroup = '', resource, subresource } = event.objectRef;
      used.add(`${apiGroup}/${resource}${subresource ? `/${subresource}` : ''} ${event.verb}`);
    }
    const granted = new Set<string>();
    for (const rule of chartRules) {
      for (const group of rule.apiGroups)
        for (const resource of rule.resources) for (const verb of rule.verbs) granted.add(`${group}/${resource} ${verb}`);
    }
    expect([...used].filter((entry) => !granted.has(entry)).sort(), 'asked for but not granted').toEqual([]);
    // Granted but not asked for by these runs. Each entry must stay unused here (else it leaves this list);
    // this is a list to shrink (issue #20), not a licence to grant more.
    const notReachedHere: Record<string, string> = {
      // Used on paths these runs do not reach (the call site named):
      '/pods/exec create': 'exec over SPDY, or an API server that authorizes the WebSocket upgrade with create',
      'chamvi.dev/codingruns/finalizers update': 'owner references with blockOwnerDeletion under OwnerReferencesPermissionEnforcement',
      // CodingSchedules (kube/schedule-gateway.ts); these runs come from no schedule. test/e2e/schedules.test.ts uses them.
      'chamvi.dev/codingruns create': "a schedule's or a CodingEval's run (test/e2e/schedules.test.ts, evals.test.ts)",
      'chamvi.dev/codingschedules get': 'reconciling a schedule',
      'chamvi.dev/codingschedules/status update': 'a schedule writing its status',
      'chamvi.dev/codingruntemplates get': 'a schedule reading its templateRef',
      'chamvi.dev/codingevals/status update': "a CodingEval's status (test/e2e/evals.test.ts)",
      'networking.k8s.io/networkpolicies delete':
        "an isolation probe's policy (test/e2e/isolation.test.ts), a run's own policy an earlier build made (test/integration/controller.test.ts)",
      'networking.k8s.io/networkpolicies update':
        "replacing a namespace's sandbox NetworkPolicy someone edited (test/integration/sandbox-network-policies.test.ts)",
    };
    expect(
      Object.keys(notReachedHere).filter((entry) => used.has(entry)),
      'used now: take it off notReachedHere',
    ).toEqual([]);
    // Used by these runs or not depending on timing, so in neither list: the diff ConfigMap is
    // replaced when a final diff differs from the last snapshot (workers/run-resources.ts
    // writeDiff); chamvi-finished-runs is replaced when a TTL deletion is recorded (#15.2,
    // test/e2e/gitops-health.test.ts). A NetworkPolicy is read when a reconcile creates one the
    // watch has not delivered yet and this process did not make (run-reconciler.ts
    // ensureSandboxPolicy: 409, then a read of who holds the name); seen once in CI under load,
    // on 2026-12-01, when every run made its own. A run is read with a GET only when a write of
    // it met a conflict (run-reconciler.ts, run-status-writer.ts) or a job found neither the
    // leader's cache nor a recent copy (kube/recent-runs.ts): no such read is certain in these
    // runs, and a clean-clone CI run of 2026-12-05 asked for none.
    const sometimes = new Set(['/configmaps update', 'networking.k8s.io/networkpolicies get', 'chamvi.dev/codingruns get']);
    const unused = [...granted].filter((entry) => !used.has(entry) && !(entry in notReachedHere) && !sometimes.has(entry)).sort();
    expect(unused, 'granted but never asked for').toEqual([]);
    expect(
      Object.keys(notReachedHere).filter((entry) => !granted.has(entry)),
      'no longer granted',
    ).toEqual([]);
  }, 300_000);
});
