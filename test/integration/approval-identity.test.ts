// Approvals with identity (#15.5), enforced by the real API server: the chart's approval policy
// (templates/approval-policy.yaml) and user ClusterRoles (templates/user-roles.yaml) applied to
// the local control plane, and three users (ServiceAccounts, impersonated with kubectl --as,
// and the plugin run with a real token of one of them) bound to chamvi-view, chamvi-edit and
// chamvi-approver. An answer must name its sender; an approver cannot create or change runs; a
// viewer cannot answer; with separation of duties the creator cannot approve its own run.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import {
  APPROVAL_ANNOTATION,
  APPROVER_ANNOTATION,
  CREATOR_ANNOTATION,
  TEMPLATE_WRITER_ANNOTATION,
} from '../../operator/src/reconcile/approval-answer.ts';
import type { CodingRunTemplate } from '../../operator/src/api/coding-run-template.ts';
import { writersOf } from '../../operator/src/reconcile/continue-from-pin.ts';
import { withTemplate } from '../../operator/src/reconcile/run-template.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl } from '../support/cluster.ts';
import { chartDir, helm, templateKubeVersion } from '../support/helm.ts';
import { approveAsShown, pluginPath } from '../support/plugin.ts';
import { runProcess } from '../support/run-process.ts';

const NS = 'approval-identity';
/**
 * Where the approver's ServiceAccount lives: with separation of duties, no ServiceAccount of the
 * runs' own namespace may answer (its run authors can act as any of them).
 */
const APPROVERS_NS = 'approval-identity-approvers';
const RELEASE = 'approvals';
const user = (name: string) => `system:serviceaccount:${NS}:${name}`;
const VIEWER = user('vic');
const EDITOR = user('alice');
const APPROVER = `system:serviceaccount:${APPROVERS_NS}:bob`;
/** A ServiceAccount of the runs' namespace that may approve, as a CI deployer with `edit` would. */
const DEPLOYER = user('deployer');
const WRITER = user('carol');
/** The chart's operator ServiceAccount for release RELEASE, as the policy names it. */
const OPERATOR = user(`${RELEASE}-chamvi-operator`);

let root: string;
/**
 * The cluster-scoped objects applied (policies, bindings, the user ClusterRoles), removed after
 * the file: left behind, they hold the names a `helm install` of the chart in another test
 * file (chart.test.ts) must own.
 */
const applied: string[] = [];

async function ok(args: string[], input?: string): Promise<string> {
  const result = await kubectl(args, input === undefined ? {} : { input });
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

/** The chart's approval policy (bound to this namespace only) and user roles, as `helm install` would render them on this server. */
async function installPolicy(separationOfDuties: boolean): Promise<void> {
  const rendered = await helm([
    'template',
    RELEASE,
    chartDir,
    '--namespace',
    NS,
    // This server's version and no --api-versions, as `helm template | kubectl apply` renders it.
    ...templateKubeVersion().slice(0, 2),
    '--show-only',
    'templates/approval-policy.yaml',
    '--show-only',
    'templates/user-roles.yaml',
    '--set',
    `approvalPolicy.separationOfDuties=${separationOfDuties}`,
    '--set',
    `approvalPolicy.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=${NS}`,
  ]);
  if (rendered.code !== 0) throw new Error(rendered.stderr);
  applied.push(rendered.stdout);
  await ok(['apply', '-f', '-'], rendered.stdout);
  // A new policy takes a moment to be enforced: wait until a nameless answer is refused.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const probe = await kubectl([
      'annotate',
      'crun',
      'probe',
      '-n',
      NS,
      `${APPROVAL_ANNOTATION}=probe-${Date.now()}`,
      '--overwrite',
      '--dry-run=server',
    ]);
    if (probe.code !== 0 && probe.stderr.includes('must name who gives it')) return;
    if (Date.now() > deadline) throw new Error(`the approval policy is not enforced: ${probe.stderr || probe.stdout}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const run = (name: string, annotations: Record<string, string> = {}) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace: NS, annotations },
  spec: {
    task: 'Fix it',
    repository: { url: 'https://github.com/acme/app.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
    approval: { tools: ['bash'] },
  },
});

const as = (who: string, args: string[], input?: string) => kubectl([...args, '--as', who], input === undefined ? {} : { input });
const answer = (who: string, name: string, approver: string, extra: string[] = []) =>
  as(who, [
    'annotate',
    'crun',
    name,
    '-n',
    NS,
    `${APPROVAL_ANNOTATION}={"id":"s1-c1","decision":"deny","reason":"no"}`,
    `${APPROVER_ANNOTATION}=${approver}`,
    '--overwrite',
    ...extra,
  ]);

/** Writes the run's status as the operator would (no operator runs here): a merge patch of the subresource. */
const patchStatus = (name: string, status: object) =>
  ok(['patch', 'crun', name, '-n', NS, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);

/** A run of WRITER's that continues run `first` (spec.continueFrom), as YAML to create. */
function continuing(name: string): string {
  const follow = run(name, { [CREATOR_ANNOTATION]: WRITER });
  return stringify({ ...follow, spec: { ...follow.spec, continueFrom: { name: 'first' } } });
}

/** A run of WRITER's made from the CodingRunTemplate `template` (spec.templateRef). */
const fromTemplate = (name: string, template: string) => ({
  ...run(name, { [CREATOR_ANNOTATION]: WRITER }),
  spec: { templateRef: { name: template } },
});

/** Approves run `name` as user `who` of group `group`, naming `who` as the approver. */
const approveAsGroupMember = (group: string, name: string, who: string) =>
  kubectl([
    'annotate',
    'crun',
    name,
    '-n',
    NS,
    `${APPROVAL_ANNOTATION}={"id":"s1-c1","decision":"approve"}`,
    `${APPROVER_ANNOTATION}=${who}`,
    '--overwrite',
    '--as',
    who,
    '--as-group',
    group,
  ]);

/** Makes the run look as the operator leaves one waiting for approval (no operator runs here). */
async function waitingForApproval(name: string): Promise<void> {
  const input = '{"command":"make test"}';
  const pendingApproval = {
    id: 's1-c1',
    toolName: 'bash',
    input,
    inputBytes: Buffer.byteLength(input),
    inputSha256: createHash('sha256').update(input).digest('hex'),
    requestedAt: new Date().toISOString(),
  };
  await patchStatus(name, { phase: 'WaitingForApproval', pendingApproval });
}

/** A kubeconfig holding a real token of the ServiceAccount: the plugin runs as that user, not as the admin. */
async function kubeconfigOf(serviceAccount: string, namespace = NS): Promise<string> {
  const token = (await ok(['create', 'token', serviceAccount, '-n', namespace, '--duration=1h'])).trim();
  const config = parse(readFileSync(kubeconfigPath(), 'utf8'));
  for (const each of config.users) each.user = { token };
  const path = join(root, `${serviceAccount}.kubeconfig`);
  writeFileSync(path, stringify(config), { mode: 0o600 });
  return path;
}

const annotationsOf = async (name: string) =>
  (JSON.parse(await ok(['get', 'crun', name, '-n', NS, '-o', 'json'])) as { metadata: { annotations?: Record<string, string> } }).metadata
    .annotations ?? {};

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-approval-identity-'));
  await createNamespace(NS);
  await createNamespace(APPROVERS_NS);
  for (const name of ['vic', 'alice', 'deployer']) await ok(['create', 'serviceaccount', name, '-n', NS]);
  await ok(['create', 'serviceaccount', 'bob', '-n', APPROVERS_NS]);
  for (const [name, role, namespace] of [
    ['vic', 'chamvi-view', NS],
    ['alice', 'chamvi-edit', NS],
    ['deployer', 'chamvi-edit', NS],
    ['bob', 'chamvi-approver', APPROVERS_NS],
  ] as const) {
    await ok(['create', 'rolebinding', `${name}-${role}`, '-n', NS, `--clusterrole=${role}`, `--serviceaccount=${namespace}:${name}`]);
  }
  // Writers of schedules and evals (the user roles do not grant them), and the operator's
  // ServiceAccount, which creates the runs of both.
  await ok(['create', 'serviceaccount', 'carol', '-n', NS]);
  await ok(['create', 'serviceaccount', `${RELEASE}-chamvi-operator`, '-n', NS]);
  await ok([
    'create',
    'role',
    'run-owner-writer',
    '-n',
    NS,
    '--verb=get,create,update,patch',
    '--resource=codingschedules.chamvi.dev,codingevals.chamvi.dev,codingruntemplates.chamvi.dev',
  ]);
  for (const name of ['alice', 'carol'])
    await ok(['create', 'rolebinding', `${name}-run-owner-writer`, '-n', NS, '--role=run-owner-writer', `--serviceaccount=${NS}:${name}`]);
  await ok(['create', 'rolebinding', 'carol-chamvi-edit', '-n', NS, '--clusterrole=chamvi-edit', `--serviceaccount=${NS}:carol`]);
  await ok([
    'create',
    'rolebinding',
    'operator-chamvi-edit',
    '-n',
    NS,
    '--clusterrole=chamvi-edit',
    `--serviceaccount=${NS}:${RELEASE}-chamvi-operator`,
  ]);
  await ok(['apply', '-f', '-'], stringify(run('probe')));
  await installPolicy(false);
}, 120_000);

afterAll(async () => {
  for (const manifest of applied.reverse()) await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: manifest });
  await deleteNamespace(NS);
  await deleteNamespace(APPROVERS_NS);
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('#15.5 the three user roles, impersonated against the real API server', () => {
  it('chamvi-view reads runs, and can neither create one nor answer an approval', async () => {
    expect((await as(VIEWER, ['get', 'crun', 'probe', '-n', NS])).code).toBe(0);
    const create = await as(VIEWER, ['create', '-f', '-'], stringify(run('by-viewer')));
    expect(create.stderr).toMatch(/forbidden/i);
    const answered = await answer(VIEWER, 'probe', VIEWER);
    expect(answered.code).not.toBe(0);
    expect(answered.stderr).toMatch(/forbidden/i);
  });

  it('chamvi-approver cannot create a run, answers only in its own name, and changes nothing else', async () => {
    const create = await as(APPROVER, ['create', '-f', '-'], stringify(run('by-approver')));
    expect(create.code).not.toBe(0);
    expect(create.stderr).toMatch(/forbidden/i);
    const impostor = await answer(APPROVER, 'probe', EDITOR);
    expect(impostor.code).not.toBe(0);
    expect(impostor.stderr).toContain(`set the annotation chamvi.dev/approver to "${APPROVER}"`);
    const nameless = await as(APPROVER, [
      'annotate',
      'crun',
      'probe',
      '-n',
      NS,
      `${APPROVAL_ANNOTATION}={"id":"x","decision":"deny"}`,
      '--overwrite',
    ]);
    expect(nameless.stderr).toContain('must name who gives it');
    // Patch rights are for the answer only: the budget (mutable for editors) stays as it is.
    const budget = await as(APPROVER, ['patch', 'crun', 'probe', '-n', NS, '--type=merge', '-p', '{"spec":{"budget":{"maxSteps":999}}}']);
    expect(budget.code).not.toBe(0);
    expect(budget.stderr).toContain('may approve or deny CodingRuns but not change them');
    const cancel = await as(APPROVER, ['annotate', 'crun', 'probe', '-n', NS, 'chamvi.dev/cancel=stop', '--overwrite']);
    expect(cancel.stderr).toContain('may approve or deny CodingRuns but not change them');
    // An owner that does not exist would have the garbage collector delete the run, its record with it.
    const orphaning = JSON.stringify({
      metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'gone', uid: '00000000-0000-0000-0000-000000000000' }] },
    });
    const owner = await as(APPROVER, ['patch', 'crun', 'probe', '-n', NS, '--type=merge', '-p', orphaning]);
    expect(owner.code).not.toBe(0);
    expect(owner.stderr).toContain('may approve or deny CodingRuns but not change them');
    const honest = await answer(APPROVER, 'probe', APPROVER);
    expect(honest.stderr).toBe('');
    expect(await annotationsOf('probe')).toMatchObject({ [APPROVER_ANNOTATION]: APPROVER });
  });

  it('chamvi-edit creates runs, changes them, and answers in its own name only', async () => {
    expect((await as(EDITOR, ['create', '-f', '-'], stringify(run('by-editor')))).code).toBe(0);
    expect(
      (await as(EDITOR, ['patch', 'crun', 'by-editor', '-n', NS, '--type=merge', '-p', '{"spec":{"budget":{"maxSteps":9}}}'])).code,
    ).toBe(0);
    expect((await answer(EDITOR, 'by-editor', APPROVER)).stderr).toContain('must name who gives it');
    expect((await answer(EDITOR, 'by-editor', EDITOR)).code).toBe(0);
  });

  it('kubectl codingrun approve, run with a real token of the approver, names the approver the API server authenticated', async () => {
    await ok(['apply', '-f', '-'], stringify(run('plugin-approve')));
    await waitingForApproval('plugin-approve');
    const kubeconfig = await kubeconfigOf('bob', APPROVERS_NS);
    const asBob = (args: readonly string[]) =>
      runProcess(process.execPath, [pluginPath, '--kubeconfig', kubeconfig, ...args], {
        env: { ...process.env, KUBECONFIG: '' },
        stdin: 'ignore',
      });
    const { approved } = await approveAsShown(['plugin-approve', '-n', NS], asBob);
    expect(approved.stderr).toBe('');
    expect(approved.code).toBe(0);
    expect(approved.stdout).toContain(`approved by ${APPROVER}`);
    const annotations = await annotationsOf('plugin-approve');
    expect(annotations[APPROVER_ANNOTATION]).toBe(APPROVER);
    expect(JSON.parse(annotations[APPROVAL_ANNOTATION]!)).toMatchObject({ id: 's1-c1', decision: 'approve' });
  });
});

describe('#15.5 separation of duties, when configured', () => {
  beforeAll(async () => {
    await installPolicy(true);
    // Enforced once creating without naming the creator is refused: a run (the approvals
    // policy) and a schedule (the run-owners policy, a policy and binding of their own, which
    // the API server may take up a moment later: on a loaded machine the first schedule test
    // ran before it did).
    const deadline = Date.now() + 30_000;
    for (const probe of [stringify(run('sod-probe')), schedule('sod-probe', 'Probe')]) {
      while ((await as(EDITOR, ['create', '--dry-run=server', '-f', '-'], probe)).code === 0) {
        if (Date.now() > deadline) throw new Error('separation of duties is not enforced');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }, 60_000);

  it('a run must name its creator as the requesting user, and the name cannot change', async () => {
    const unnamed = await as(EDITOR, ['create', '-f', '-'], stringify(run('sod-unnamed')));
    expect(unnamed.stderr).toContain(`add the annotation chamvi.dev/created-by: "${EDITOR}"`);
    const someoneElse = await as(EDITOR, ['create', '-f', '-'], stringify(run('sod-other', { [CREATOR_ANNOTATION]: APPROVER })));
    expect(someoneElse.code).not.toBe(0);
    expect((await as(EDITOR, ['create', '-f', '-'], stringify(run('sod', { [CREATOR_ANNOTATION]: EDITOR })))).code).toBe(0);
    const renamed = await as(EDITOR, ['annotate', 'crun', 'sod', '-n', NS, `${CREATOR_ANNOTATION}=${APPROVER}`, '--overwrite']);
    expect(renamed.stderr).toContain('cannot change');
  });

  it('self-approval is refused; another approver may answer', async () => {
    const self = await answer(EDITOR, 'sod', EDITOR);
    expect(self.code).not.toBe(0);
    expect(self.stderr).toContain(`"${EDITOR}" created this CodingRun and may not answer its approvals`);
    expect((await annotationsOf('sod'))[APPROVAL_ANNOTATION]).toBeUndefined();
    expect((await answer(APPROVER, 'sod', APPROVER)).code).toBe(0);
  });

  it('the creator may not erase an answer either; an approver still answers and clears it, and the operator still sets its finalizer', async () => {
    expect((await as(EDITOR, ['create', '-f', '-'], stringify(run('sod-erase', { [CREATOR_ANNOTATION]: EDITOR })))).code).toBe(0);
    await waitingForApproval('sod-erase');
    expect((await answer(APPROVER, 'sod-erase', APPROVER)).code).toBe(0);
    const denied = await annotationsOf('sod-erase');
    // Removing both annotations named nobody and answered nothing, so the creator erased a deny before the operator read it.
    const erased = await as(EDITOR, ['annotate', 'crun', 'sod-erase', '-n', NS, `${APPROVAL_ANNOTATION}-`, `${APPROVER_ANNOTATION}-`]);
    expect(erased.code).not.toBe(0);
    expect(erased.stderr).toContain(`"${EDITOR}" created this CodingRun and may not answer its approvals`);
    // Either one alone leaves an answer that does not name the creator, who sent it.
    for (const removed of [APPROVAL_ANNOTATION, APPROVER_ANNOTATION]) {
      const half = await as(EDITOR, ['annotate', 'crun', 'sod-erase', '-n', NS, `${removed}-`]);
      expect(half.code).not.toBe(0);
      expect(half.stderr).toMatch(/may not answer its approvals|must name who gives it/);
    }
    expect(await annotationsOf('sod-erase')).toEqual(denied);
    // The operator writes none of these annotations: its finalizer goes on and off beside an answer.
    for (const finalizers of [['chamvi.dev/cleanup'], null]) {
      const finalizing = JSON.stringify({ metadata: { finalizers } });
      const patched = await as(OPERATOR, ['patch', 'crun', 'sod-erase', '-n', NS, '--type=merge', '-p', finalizing]);
      expect(patched.stderr).toBe('');
      expect(patched.code).toBe(0);
    }
    // Another approver answers anew, and may take their answer back.
    const approved = await as(APPROVER, [
      'annotate',
      'crun',
      'sod-erase',
      '-n',
      NS,
      `${APPROVAL_ANNOTATION}={"id":"s1-c1","decision":"approve","sha256":"${'0'.repeat(64)}"}`,
      `${APPROVER_ANNOTATION}=${APPROVER}`,
      '--overwrite',
    ]);
    expect(approved.stderr).toBe('');
    expect(approved.code).toBe(0);
    const cleared = await as(APPROVER, ['annotate', 'crun', 'sod-erase', '-n', NS, `${APPROVAL_ANNOTATION}-`, `${APPROVER_ANNOTATION}-`]);
    expect(cleared.stderr).toBe('');
    expect(cleared.code).toBe(0);
    expect(await annotationsOf('sod-erase')).not.toHaveProperty(APPROVAL_ANNOTATION);
  });

  it("a ServiceAccount of the run's namespace may not answer, though it may approve: its run authors can act as it", async () => {
    expect((await as(EDITOR, ['create', '-f', '-'], stringify(run('sod-deployer', { [CREATOR_ANNOTATION]: EDITOR })))).code).toBe(0);
    await waitingForApproval('sod-deployer');
    const deployer = await answer(DEPLOYER, 'sod-deployer', DEPLOYER);
    expect(deployer.code).not.toBe(0);
    expect(deployer.stderr).toContain(`"${DEPLOYER}" is a ServiceAccount of namespace ${NS}`);
    expect(deployer.stderr).toContain('from a ServiceAccount of another namespace');
    expect((await annotationsOf('sod-deployer'))[APPROVAL_ANNOTATION]).toBeUndefined();
    // One of another namespace, bound to chamvi-approver here, may.
    expect((await answer(APPROVER, 'sod-deployer', APPROVER)).code).toBe(0);
  });

  const schedule = (name: string, task: string, annotations: Record<string, string> = {}) =>
    stringify({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingSchedule',
      metadata: { name, namespace: NS, annotations },
      spec: {
        schedule: '0 6 * * 1-5',
        runTemplate: {
          // What a schedule's author would like its runs to say: the operator never copies it.
          metadata: { annotations: { [CREATOR_ANNOTATION]: APPROVER } },
          spec: {
            task,
            repository: { url: 'https://github.com/acme/app.git' },
            model: { provider: 'scripted', scriptRef: { name: 'script' } },
          },
        },
      },
    });

  it('a CodingSchedule names who last wrote its spec: at creation, and anew with every change of the spec', async () => {
    const unnamed = await as(EDITOR, ['create', '-f', '-'], schedule('nightly', 'Update the dependencies'));
    expect(unnamed.stderr).toContain(`set the annotation chamvi.dev/created-by: "${EDITOR}"`);
    expect(
      (await as(EDITOR, ['create', '-f', '-'], schedule('nightly', 'Update the dependencies', { [CREATOR_ANNOTATION]: EDITOR }))).code,
    ).toBe(0);
    // Carol rewrites the task: the schedule must now name her, not Alice.
    const kept = await as(WRITER, ['apply', '-f', '-'], schedule('nightly', 'Delete the tests', { [CREATOR_ANNOTATION]: EDITOR }));
    expect(kept.stderr).toContain(`set the annotation chamvi.dev/created-by: "${WRITER}"`);
    expect((await as(WRITER, ['apply', '-f', '-'], schedule('nightly', 'Delete the tests', { [CREATOR_ANNOTATION]: WRITER }))).code).toBe(
      0,
    );
    // A change of metadata alone keeps the name, and cannot move it.
    expect((await as(EDITOR, ['label', 'codingschedule', 'nightly', '-n', NS, 'team=web'])).code).toBe(0);
    const moved = await as(EDITOR, ['annotate', 'codingschedule', 'nightly', '-n', NS, `${CREATOR_ANNOTATION}=${EDITOR}`, '--overwrite']);
    expect(moved.stderr).toContain('changes only with the spec');
  });

  it('suspending a schedule or changing when it runs keeps its writer: the on-call engineer does not become it, nor can they', async () => {
    // Carol wrote nightly's task (the test before). Alice, on call, suspends it and moves its time.
    const suspend = await as(EDITOR, [
      'patch',
      'codingschedule',
      'nightly',
      '-n',
      NS,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { suspend: true, schedule: '0 7 * * 1-5', successfulRunsHistoryLimit: 5 } }),
    ]);
    expect(suspend.stderr).toBe('');
    expect(suspend.code).toBe(0);
    const stored = JSON.parse(await ok(['get', 'codingschedule', 'nightly', '-n', NS, '-o', 'json']));
    expect(stored.spec.suspend).toBe(true);
    expect(stored.metadata.annotations[CREATOR_ANNOTATION]).toBe(WRITER);
    // ...and cannot take the name with it: only a change of the task moves it.
    const taking = await as(EDITOR, [
      'patch',
      'codingschedule',
      'nightly',
      '-n',
      NS,
      '--type=merge',
      '-p',
      JSON.stringify({ metadata: { annotations: { [CREATOR_ANNOTATION]: EDITOR } }, spec: { suspend: false } }),
    ]);
    expect(taking.stderr).toContain('changes only with the spec');
    // A change of the task through templateRef names the one who makes it.
    const retargeted = await as(EDITOR, [
      'patch',
      'codingschedule',
      'nightly',
      '-n',
      NS,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { templateRef: { name: 'deps' } } }),
    ]);
    expect(retargeted.stderr).toContain(`set the annotation chamvi.dev/created-by: "${EDITOR}"`);
  });

  it("the operator's run names the schedule's writer, who then cannot approve it; without one the operator makes no run", async () => {
    // As schedule-reconciler.ts creates it (scheduled-run.ts copies the schedule's created-by).
    const scheduled = run('scheduled', { [CREATOR_ANNOTATION]: WRITER });
    expect((await as(OPERATOR, ['create', '-f', '-'], stringify(scheduled))).code).toBe(0);
    await waitingForApproval('scheduled');
    const self = await answer(WRITER, 'scheduled', WRITER);
    expect(self.stderr).toContain(`"${WRITER}" created this CodingRun and may not answer its approvals`);
    expect((await answer(APPROVER, 'scheduled', APPROVER)).code).toBe(0);
    // A schedule or eval with no writer named: the operator's run is refused, saying where to name one.
    const nameless = await as(OPERATOR, ['create', '-f', '-'], stringify(run('scheduled-nameless')));
    expect(nameless.stderr).toContain('names no creator');
    // Only the operator's ServiceAccount may make a run naming someone else.
    expect((await as(EDITOR, ['create', '-f', '-'], stringify(run('posing', { [CREATOR_ANNOTATION]: WRITER })))).code).not.toBe(0);
  });

  it('a CodingRunTemplate names its last writer, and a scheduled run made from it names them: they may not approve it, nor unname themselves', async () => {
    const template = (task: string, annotations: Record<string, string> = {}) =>
      stringify({
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRunTemplate',
        metadata: { name: 'deps', namespace: NS, annotations },
        spec: { task, repository: { url: 'https://github.com/acme/app.git' } },
      });
    const unnamed = await as(EDITOR, ['create', '-f', '-'], template('Update the dependencies'));
    expect(unnamed.stderr).toContain('the scheduled runs made from it name them in chamvi.dev/template-written-by');
    expect(unnamed.stderr).toContain(`set the annotation chamvi.dev/created-by: "${EDITOR}"`);
    expect((await as(EDITOR, ['create', '-f', '-'], template('Update the dependencies', { [CREATOR_ANNOTATION]: EDITOR }))).code).toBe(0);
    // Carol raises its budget: Alice stays its writer. Carol's change of what its runs may do names Carol.
    const budget = JSON.stringify({ spec: { budget: { maxSteps: 80 }, ttlSecondsAfterFinished: 600 } });
    expect((await as(WRITER, ['patch', 'codingruntemplate', 'deps', '-n', NS, '--type=merge', '-p', budget])).stderr).toBe('');
    const afterBudget = JSON.parse(await ok(['get', 'codingruntemplate', 'deps', '-n', NS, '-o', 'json']));
    expect(afterBudget.metadata.annotations[CREATOR_ANNOTATION]).toBe(EDITOR);
    const approvals = JSON.stringify({ spec: { approval: { tools: ['bash', 'write_file'] } } });
    const regated = await as(WRITER, ['patch', 'codingruntemplate', 'deps', '-n', NS, '--type=merge', '-p', approvals]);
    expect(regated.stderr).toContain(`set the annotation chamvi.dev/created-by: "${WRITER}"`);
    // As schedule-reconciler.ts creates it from Carol's schedule and Alice's template (scheduled-run.ts).
    const scheduled = run('from-template', { [CREATOR_ANNOTATION]: WRITER, [TEMPLATE_WRITER_ANNOTATION]: EDITOR });
    expect((await as(OPERATOR, ['create', '-f', '-'], stringify(scheduled))).code).toBe(0);
    await waitingForApproval('from-template');
    const templateWriter = await answer(EDITOR, 'from-template', EDITOR);
    expect(templateWriter.stderr).toContain(`"${EDITOR}" wrote the CodingRunTemplate this CodingRun was made from and may not answer`);
    const unnamedRun = await as(EDITOR, ['annotate', 'crun', 'from-template', '-n', NS, `${TEMPLATE_WRITER_ANNOTATION}-`]);
    expect(unnamedRun.stderr).toContain('chamvi.dev/template-written-by of a CodingRun cannot change');
    expect((await annotationsOf('from-template'))[APPROVAL_ANNOTATION]).toBeUndefined();
    expect((await answer(APPROVER, 'from-template', APPROVER)).code).toBe(0);
    // A run a person creates with spec.templateRef: the operator records the template's writer
    // in status.template when it accepts the run (run-template.ts), written here as it would.
    const own = fromTemplate('names-template', 'deps');
    expect((await as(WRITER, ['create', '-f', '-'], stringify(own))).code).toBe(0);
    // Until then nobody may answer: the policy cannot tell the template's writer from anyone else.
    await waitingForApproval('names-template');
    const early = await answer(EDITOR, 'names-template', EDITOR);
    expect(early.code).not.toBe(0);
    expect(early.stderr).toContain(
      'made from CodingRunTemplate deps, and the operator has not yet recorded who wrote it (status.template)',
    );
    expect((await answer(APPROVER, 'names-template', APPROVER)).stderr).toContain('has not yet recorded who wrote it');
    expect((await annotationsOf('names-template'))[APPROVAL_ANNOTATION]).toBeUndefined();
    await patchStatus('names-template', { template: { name: 'deps', writtenBy: EDITOR, spec: {} } });
    await waitingForApproval('names-template');
    const recordedWriter = await answer(EDITOR, 'names-template', EDITOR);
    expect(recordedWriter.stderr).toContain(`"${EDITOR}" wrote the CodingRunTemplate this CodingRun was made from and may not answer`);
    expect((await answer(APPROVER, 'names-template', APPROVER)).code).toBe(0);
  });

  it('who wrote the run a run continues (spec.continueFrom) may not answer it, once the operator has recorded them, nor anyone before', async () => {
    // Alice wrote `first`; Carol continues it. The operator records Alice when it accepts
    // Carol's run (continue-from-pin.ts), written here as it would.
    expect((await as(WRITER, ['create', '-f', '-'], continuing('continues'))).code).toBe(0);
    await waitingForApproval('continues');
    const early = await answer(APPROVER, 'continues', APPROVER);
    expect(early.code).not.toBe(0);
    expect(early.stderr).toContain('continues CodingRun first, and the operator has not yet recorded who wrote it (status.continuedFrom)');
    expect((await annotationsOf('continues'))[APPROVAL_ANNOTATION]).toBeUndefined();
    const continuedFrom = { name: 'first', uid: 'uid-first', writtenBy: ['someone-else', EDITOR] };
    await patchStatus('continues', { continuedFrom });
    const sourceWriter = await answer(EDITOR, 'continues', EDITOR);
    expect(sourceWriter.code).not.toBe(0);
    expect(sourceWriter.stderr).toContain(
      `"${EDITOR}" wrote the task of CodingRun first this CodingRun continues from (spec.continueFrom)`,
    );
    expect((await annotationsOf('continues'))[APPROVAL_ANNOTATION]).toBeUndefined();
    expect((await answer(APPROVER, 'continues', APPROVER)).code).toBe(0);
  });

  it("only the operator's ServiceAccount may name a template's writer on a run it creates; a person naming one is refused", async () => {
    // Named by anyone, the name would be carried into the runs that continue this one (continue-from-pin.ts writersOf).
    const padded = run('pads-writers', { [CREATOR_ANNOTATION]: EDITOR, [TEMPLATE_WRITER_ANNOTATION]: APPROVER });
    const refused = await as(EDITOR, ['create', '-f', '-'], stringify(padded));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('only the operator names the writer of the CodingRunTemplate a CodingRun was made from');
    expect((await kubectl(['get', 'crun', 'pads-writers', '-n', NS])).code).not.toBe(0);
    const scheduled = run('operator-names-writer', { [CREATOR_ANNOTATION]: WRITER, [TEMPLATE_WRITER_ANNOTATION]: EDITOR });
    expect((await as(OPERATOR, ['create', '-f', '-'], stringify(scheduled))).code).toBe(0);
  });

  it('a user whose name is over the 512 characters the operator records of writers may not answer: cut, it matched no record', async () => {
    // The operator recorded the source's writer as it records every name: its first 512 characters.
    const long = `dana-${'x'.repeat(600)}`;
    await ok(['create', 'rolebinding', 'long-names-approve', '-n', NS, '--clusterrole=chamvi-approver', '--group=long-names']);
    expect((await as(WRITER, ['create', '-f', '-'], continuing('continues-long'))).code).toBe(0);
    await patchStatus('continues-long', { continuedFrom: { name: 'first', uid: 'uid-first', writtenBy: [long.slice(0, 512)] } });
    await waitingForApproval('continues-long');
    const refused = await approveAsGroupMember('long-names', 'continues-long', long);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('characters long, over the 512 the operator records of the writers who may not answer');
    expect((await annotationsOf('continues-long'))[APPROVAL_ANNOTATION]).toBeUndefined();
    // Someone else, of the same group, with a name of a usual length, may.
    expect((await approveAsGroupMember('long-names', 'continues-long', 'erin')).code).toBe(0);
  });

  it('a writer with an emoji name, which the operator records as given, may not answer: a cut inside a pair matched nobody', async () => {
    // 301 code points (CEL's size(), within the policy's 512) but 601 UTF-16 units: a cut at 512
    // units ended in half a pair, stored as U+FFFD, and the writer answered.
    const emoji = `u${'😀'.repeat(300)}`;
    await ok(['create', 'rolebinding', 'emoji-names-approve', '-n', NS, '--clusterrole=chamvi-approver', '--group=emoji-names']);
    // The source run's creator, recorded by the operator's own code (continue-from-pin.ts writersOf).
    const source = codingRunFixture({
      metadata: { name: 'first', namespace: NS, uid: 'uid-first', annotations: { [CREATOR_ANNOTATION]: emoji } },
    });
    expect((await as(WRITER, ['create', '-f', '-'], continuing('continues-emoji'))).code).toBe(0);
    const continuedFrom = { name: 'first', uid: 'uid-first', writtenBy: writersOf(source) };
    await patchStatus('continues-emoji', { continuedFrom });
    await waitingForApproval('continues-emoji');
    const sourceWriter = await approveAsGroupMember('emoji-names', 'continues-emoji', emoji);
    expect(sourceWriter.code).not.toBe(0);
    expect(sourceWriter.stderr).toContain('wrote the task of CodingRun first this CodingRun continues from');
    expect((await annotationsOf('continues-emoji'))[APPROVAL_ANNOTATION]).toBeUndefined();
    expect((await approveAsGroupMember('emoji-names', 'continues-emoji', 'erin')).code).toBe(0);
    // The template's writer, recorded by the operator's own code (run-template.ts withTemplate).
    const template: CodingRunTemplate = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRunTemplate',
      metadata: { name: 'deps', namespace: NS, annotations: { [CREATOR_ANNOTATION]: emoji } },
      spec: { task: 'Update the dependencies' } as CodingRunTemplate['spec'],
    };
    const own = fromTemplate('names-template-emoji', 'deps');
    expect((await as(WRITER, ['create', '-f', '-'], stringify(own))).code).toBe(0);
    const recorded = withTemplate(codingRunFixture({ metadata: own.metadata, spec: own.spec as never }), template).status?.template;
    expect(recorded?.writtenBy).toBeDefined();
    await patchStatus('names-template-emoji', { template: { ...recorded, spec: {} } });
    await waitingForApproval('names-template-emoji');
    const templateWriter = await approveAsGroupMember('emoji-names', 'names-template-emoji', emoji);
    expect(templateWriter.code).not.toBe(0);
    expect(templateWriter.stderr).toContain('wrote the CodingRunTemplate this CodingRun was made from and may not answer');
    expect((await approveAsGroupMember('emoji-names', 'names-template-emoji', 'erin')).code).toBe(0);
  });

  it("a run whose template sets continueFrom takes no answer before the operator records the source's writers", async () => {
    // spec.continueFrom comes from the template (status.template.spec), not the run's own spec.
    const own = fromTemplate('template-continues', 'follow-up');
    expect((await as(WRITER, ['create', '-f', '-'], stringify(own))).code).toBe(0);
    const template = { name: 'follow-up', writtenBy: EDITOR, spec: { task: 'Go on', continueFrom: { name: 'first' } } };
    await patchStatus('template-continues', { template });
    await waitingForApproval('template-continues');
    const early = await answer(APPROVER, 'template-continues', APPROVER);
    expect(early.code).not.toBe(0);
    expect(early.stderr).toContain(
      'made from CodingRunTemplate follow-up, which continues another CodingRun (spec.continueFrom), and the operator has not yet recorded who wrote that one',
    );
    expect((await annotationsOf('template-continues'))[APPROVAL_ANNOTATION]).toBeUndefined();
    // Once recorded, the source's writers are refused and anyone else may answer.
    const continuedFrom = { name: 'first', uid: 'uid-first', writtenBy: [DEPLOYER] };
    await patchStatus('template-continues', { continuedFrom });
    expect((await answer(APPROVER, 'template-continues', APPROVER)).code).toBe(0);
  });
});
