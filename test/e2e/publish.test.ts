// Issue #14 on the dev cluster: a run's result published to a real forge (Gitea built from its
// Go module, test/support/forge/) as a branch and a pull request, by the operator with the run's
// token; the sandbox never sees it. The operator reaches Gitea through a counting proxy, so the
// tests see every push and every pull request opened, and can kill the operator at the worst
// moment: after the forge made the pull request, before the operator heard of it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPROVAL_ANNOTATION } from '../../operator/src/reconcile/approval-answer.ts';
import { kubectl, kubectlOk } from '../support/cluster.ts';
import { startE2eOperator, startOperatorOnly, type E2eOperator } from '../support/e2e-operator.ts';
import { startForgeProxy, type ForgeProxy } from '../support/forge/forge-proxy.ts';
import { startGitea, type GiteaServer } from '../support/forge/gitea-server.ts';
import { applyIn, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';

const NS = 'e2e-publish';
const PREFIX = `e2epub${Date.now()}`;

interface Published {
  branch: string;
  commit: string;
  pullRequest?: { url: string; number: number };
}
interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  pendingApproval?: { id: string; toolName: string; input: string };
  result?: { summary: string; diff: string; diffConfigMap?: string; revision?: string; published?: Published };
}
interface GiteaPull {
  number: number;
  state: string;
  body: string;
  title: string;
  head: { ref: string; sha: string };
  base: { ref: string };
}

let root: string;
let gitea: GiteaServer;
let proxy: ForgeProxy;
let e2e: E2eOperator;

const SUMMARY = 'Added a greeting and a note for the team.';
const script = {
  turns: [
    {
      toolCalls: [
        { toolName: 'write_file', input: { path: 'greeting.txt', content: 'hello from the agent\n' } },
        { toolName: 'write_file', input: { path: 'docs/note.md', content: '# Note\n\nPublished by a run.\n' } },
      ],
    },
    { text: SUMMARY },
  ],
};

function operatorOptions() {
  return {
    namespace: NS,
    root,
    identity: 'e2e-publish',
    redisPrefix: PREFIX,
    allowRepo: `${proxy.origin}/**`,
    syncTimeoutMs: 60_000,
    env: {
      CHAMVI_PUBLISH_FORGES: JSON.stringify([{ host: proxy.origin.replace('http://', ''), kind: 'gitea' }]),
      CHAMVI_PUBLISH_AUTHOR_NAME: 'chamvi test',
      CHAMVI_PUBLISH_AUTHOR_EMAIL: 'chamvi@example.test',
      CHAMVI_JOB_LOCK_SECONDS: '4',
    },
  };
}

/** The run, its script and its push token (a Secret the run may use). */
async function applyRun(name: string, repository: string, token: string, spec: object = {}): Promise<void> {
  await applyIn(NS, [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `${name}-token`, labels: { 'chamvi.dev/usable-by-runs': 'true' } },
      stringData: { token },
    },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-script` }, data: { 'script.json': JSON.stringify(script) } },
    {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name },
      spec: {
        task: 'Add a greeting\n\nAnd a note for the team.',
        repository: { url: `${proxy.origin}/${gitea.user}/${repository}.git`, revision: 'main' },
        model: { provider: 'scripted', scriptRef: { name: `${name}-script` } },
        publish: { credentialsSecretRef: { name: `${name}-token` }, pullRequest: {} },
        ...spec,
      },
    },
  ]);
}

const pullsOf = async (repository: string) =>
  (await gitea.api<GiteaPull[]>('GET', `/repos/${gitea.user}/${repository}/pulls?state=all&limit=50`)).body;

const branchOf = async (repository: string, branch: string) =>
  (
    await gitea.api<{ commit?: { id: string } }>(
      'GET',
      `/repos/${gitea.user}/${repository}/branches/${encodeURIComponent(branch)}`,
      undefined,
      [404],
    )
  ).body;

/** What reached the forge for one repository: pushes and pull requests opened. */
const pushesTo = (repository: string) =>
  proxy.seen.filter((seen) => seen.method === 'POST' && seen.path.includes(`/${repository}.git/git-receive-pack`));
const pullsOpenedIn = (repository: string) =>
  proxy.seen.filter((seen) => seen.method === 'POST' && seen.path === `/api/v1/repos/${gitea.user}/${repository}/pulls`);

async function everythingSaid(name: string): Promise<string> {
  const status = await kubectlOk(['get', 'crun', name, '-n', NS, '-o', 'json']);
  const events = await kubectlOk(['get', 'events', '-n', NS, '-o', 'json']);
  const logs = [...e2e.operator.lines.map((line) => JSON.stringify(line)), ...e2e.operator.stderr].join('\n');
  return `${status}\n${events}\n${logs}`;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-publish-'));
  gitea = await startGitea();
  proxy = await startForgeProxy(gitea.origin);
  e2e = await startE2eOperator(operatorOptions());
}, 900_000);

afterAll(async () => {
  await e2e?.stop();
  await proxy?.close();
  await gitea?.close();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('issue #14 publishing to a real forge', () => {
  it('a run ends with a branch holding exactly its diff and one open pull request with its summary, even with the operator killed mid-publish', async () => {
    const repo = 'app';
    await gitea.createRepository(repo);
    // The worst moment: the forge has made the pull request, the operator has not heard of it.
    let killed = false;
    proxy.onAnswered = async (seen) => {
      if (killed || seen.method !== 'POST' || seen.path !== `/api/v1/repos/${gitea.user}/${repo}/pulls` || seen.status !== 201)
        return false;
      killed = true;
      await e2e.operator.kill('SIGKILL');
      return true;
    };
    await applyRun('publish-app', repo, gitea.token);
    await eventually(async () => (killed ? true : undefined), 180_000, 'the operator to open the pull request');
    proxy.onAnswered = undefined;
    const replacement = await startOperatorOnly(operatorOptions());
    const { registrar } = e2e;
    e2e = {
      operator: replacement,
      registrar,
      async stop() {
        await replacement.kill();
        await registrar.stop();
      },
    };

    const status = await finishedRun<RunStatus>(NS, 'publish-app', 180_000);
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    const published = status.result!.published!;
    expect(published.branch).toBe('chamvi/publish-app');
    expect(published.pullRequest?.number).toBeGreaterThan(0);
    expect(status.message).toContain(published.pullRequest!.url);

    // The branch holds the run's commit, whose parent is what the run cloned and whose change is the run's diff, exactly.
    expect((await branchOf(repo, published.branch)).commit?.id).toBe(published.commit);
    const clone = join(root, 'check-app');
    execFileSync('git', ['clone', '-q', `${gitea.origin}/${gitea.user}/${repo}.git`, clone]);
    execFileSync('git', ['fetch', '-q', 'origin', published.branch], { cwd: clone });
    expect(execFileSync('git', ['rev-parse', 'FETCH_HEAD^'], { cwd: clone, encoding: 'utf8' }).trim()).toBe(status.result!.revision);
    const pushed = execFileSync('git', ['diff', '--no-color', 'FETCH_HEAD^', 'FETCH_HEAD'], { cwd: clone, encoding: 'utf8' });
    expect(pushed).toBe(status.result!.diff);
    expect(pushed).toContain('+hello from the agent');
    expect(execFileSync('git', ['log', '-1', '--format=%an <%ae>%n%B', 'FETCH_HEAD'], { cwd: clone, encoding: 'utf8' })).toContain(
      'chamvi test <chamvi@example.test>\nAdd a greeting',
    );

    // One pull request, open, from the branch into main, with the summary; one push, one pull request opened.
    const pulls = await pullsOf(repo);
    expect(pulls).toHaveLength(1);
    expect(pulls[0]).toMatchObject({
      number: published.pullRequest!.number,
      state: 'open',
      title: 'Add a greeting',
      head: { ref: published.branch, sha: published.commit },
      base: { ref: 'main' },
    });
    expect(pulls[0]!.body).toContain(SUMMARY);
    expect(pushesTo(repo)).toHaveLength(1);
    expect(pullsOpenedIn(repo)).toHaveLength(1);
    // The publish did run twice: the second operator looked the branch and the pull request up again.
    expect(
      proxy.seen.filter((seen) => seen.method === 'GET' && seen.path.startsWith(`/api/v1/repos/${gitea.user}/${repo}/pulls?`)).length,
    ).toBeGreaterThanOrEqual(2);
  }, 600_000);

  it('a bad token ends PublishFailed with the forge refusal, the diff kept, and the token in no status, Event or log line', async () => {
    const repo = 'refused';
    await gitea.createRepository(repo);
    const bad = `badtoken${'0123456789abcdef'.repeat(2)}`;
    await applyRun('publish-refused', repo, bad);
    const status = await finishedRun<RunStatus>(NS, 'publish-refused', 180_000);
    expect(status).toMatchObject({ phase: 'Failed', reason: 'PublishFailed' });
    expect(status.message).toMatch(/Publishing failed: git (push|ls-remote) failed: .*(Authentication failed|401|denied)/is);
    // The diff is kept, and nothing reached the repository.
    expect(status.result?.diff).toContain('+hello from the agent');
    expect(status.result?.diffConfigMap).toBeTruthy();
    expect(status.result?.published).toBeUndefined();
    expect((await branchOf(repo, 'chamvi/publish-refused')).commit).toBeUndefined();
    // The control: the token was in play (git sent it, Basic-encoded) and the forge refused it.
    expect(proxy.seen.some((seen) => seen.path.includes(`/${repo}.git/`) && seen.status === 401)).toBe(true);
    const said = await everythingSaid('publish-refused');
    expect(said).toContain('PublishFailed');
    expect(said).not.toContain(bad);
    expect(said).not.toContain(Buffer.from(`x-access-token:${bad}`).toString('base64'));
  }, 600_000);

  it('approval.publish denied: the run ends Succeeded with nothing published and the reason said', async () => {
    const repo = 'denied';
    await gitea.createRepository(repo);
    await applyRun('publish-denied', repo, gitea.token, { approval: { publish: true } });
    const waiting = await eventually(
      async () => {
        const status = await runStatus<RunStatus>(NS, 'publish-denied');
        if (status.phase === 'Succeeded' || status.phase === 'Failed') throw new Error(`ended without waiting: ${JSON.stringify(status)}`);
        return status.phase === 'WaitingForApproval' ? status : undefined;
      },
      180_000,
      'the publish to wait for approval',
    );
    expect(waiting.pendingApproval).toMatchObject({ id: 'publish', toolName: 'publish' });
    const input = JSON.parse(waiting.pendingApproval!.input) as {
      branch: string;
      diff: { filesChanged: number; files: Array<{ path: string }> };
    };
    expect(input.branch).toBe('chamvi/publish-denied');
    expect(input.diff.filesChanged).toBe(2);
    expect(input.diff.files.map((file) => file.path).sort()).toEqual(['docs/note.md', 'greeting.txt']);
    // The diff is readable while it waits.
    expect(waiting.result?.diff).toContain('+hello from the agent');

    const answer = JSON.stringify({ id: 'publish', decision: 'deny', reason: 'not before the release' });
    expect((await kubectl(['annotate', 'crun', 'publish-denied', '-n', NS, `${APPROVAL_ANNOTATION}=${answer}`, '--overwrite'])).code).toBe(
      0,
    );
    const status = await finishedRun<RunStatus>(NS, 'publish-denied', 120_000);
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(status.result?.published).toBeUndefined();
    expect(status.message).toContain('not before the release');
    expect(
      await kubectlOk([
        'get',
        'events',
        '-n',
        NS,
        '--field-selector',
        'involvedObject.name=publish-denied,reason=PublishDenied',
        '-o',
        'name',
      ]),
    ).not.toBe('');
    expect((await branchOf(repo, 'chamvi/publish-denied')).commit).toBeUndefined();
    expect(pushesTo(repo)).toHaveLength(0);
    expect(await pullsOf(repo)).toHaveLength(0);
  }, 600_000);

  it('a run cancelled while its branch is pushed opens no pull request, and an Event says what was pushed', async () => {
    const repo = 'cancelled';
    await gitea.createRepository(repo);
    // The cancel lands while the push is at the forge: the run ends Cancelled before the job
    // hears the push's answer, then the job must not go on to the pull request.
    let cancelled = false;
    proxy.onAnswered = async (seen) => {
      if (cancelled || seen.method !== 'POST' || !seen.path.includes(`/${repo}.git/git-receive-pack`)) return false;
      cancelled = true;
      await kubectlOk(['annotate', 'crun', 'publish-cancelled', '-n', NS, 'chamvi.dev/cancel=changed my mind']);
      await eventually(
        async () => ((await runStatus<RunStatus>(NS, 'publish-cancelled')).phase === 'Cancelled' ? true : undefined),
        60_000,
        'the cancel',
      );
      return false;
    };
    await applyRun('publish-cancelled', repo, gitea.token);
    const status = await finishedRun<RunStatus>(NS, 'publish-cancelled', 180_000);
    expect(status).toMatchObject({ phase: 'Cancelled', reason: 'Cancelled' });
    expect(cancelled).toBe(true);
    const uid = await kubectlOk(['get', 'crun', 'publish-cancelled', '-n', NS, '-o', 'jsonpath={.metadata.uid}']);
    const said = await eventually(
      async () =>
        (await kubectlOk([
          'get',
          'events',
          '-n',
          NS,
          '--field-selector',
          `involvedObject.uid=${uid},reason=Published`,
          '-o',
          'jsonpath={.items[*].message}',
        ])) || undefined,
      60_000,
      'the Event saying what was pushed',
    );
    proxy.onAnswered = undefined;
    expect(said).toContain('Pushed branch chamvi/publish-cancelled (no pull request opened): the run ended Cancelled');
    expect(pushesTo(repo)).toHaveLength(1);
    expect(pullsOpenedIn(repo)).toHaveLength(0);
    expect(await pullsOf(repo)).toHaveLength(0);
  }, 600_000);

  it('a re-created run of the same name cannot force-push the default branch after its pull request was fast-forwarded into it', async () => {
    // The attack: the first run's pull request is merged fast-forward, so main's head is the
    // operator's commit for this run name, trailers and all. A run made again under that name,
    // told to publish to main, would find "its own" commit there and force-push over main.
    const repo = 'protected';
    await gitea.createRepository(repo);
    await applyRun('publish-again', repo, gitea.token);
    const first = await finishedRun<RunStatus>(NS, 'publish-again', 180_000);
    expect(first).toMatchObject({ phase: 'Succeeded' });
    const number = first.result!.published!.pullRequest!.number;
    await gitea.api('POST', `/repos/${gitea.user}/${repo}/pulls/${number}/merge`, { Do: 'fast-forward-only' });
    const merged = first.result!.published!.commit;
    expect((await branchOf(repo, 'main')).commit?.id).toBe(merged);

    await kubectlOk(['delete', 'crun', 'publish-again', '-n', NS, '--wait=true', '--timeout=120s']);
    // From the commit before the merge, so that the change is made again and there is something to push.
    await applyRun('publish-again', repo, gitea.token, {
      repository: { url: `${proxy.origin}/${gitea.user}/${repo}.git`, revision: first.result!.revision },
      publish: { credentialsSecretRef: { name: 'publish-again-token' }, branch: 'main' },
    });
    const again = await finishedRun<RunStatus>(NS, 'publish-again', 180_000);
    expect(again).toMatchObject({ phase: 'Failed', reason: 'PublishFailed' });
    expect(again.message).toContain(
      "branch main is the repository's default branch or the pull request's base, which the operator never moves",
    );
    expect((await branchOf(repo, 'main')).commit?.id).toBe(merged);
  }, 600_000);

  it("a run deleted and made again under its name leaves the first run's branch and pull request alone", async () => {
    // The attack: Bob's run published chamvi/publish-taken and its pull request. Someone who may
    // delete and create runs, but push nothing, deletes it and creates a run of the same name
    // whose model writes a backdoor. Its commit differs (its uid), so without the guard the
    // operator force-pushed the branch, and Bob's pull request showed her change.
    const repo = 'taken';
    await gitea.createRepository(repo);
    await applyRun('publish-taken', repo, gitea.token);
    const first = await finishedRun<RunStatus>(NS, 'publish-taken', 180_000);
    expect(first).toMatchObject({ phase: 'Succeeded' });
    const { commit, pullRequest } = first.result!.published!;
    const bobsRun = JSON.parse(await kubectlOk(['get', 'crun', 'publish-taken', '-n', NS, '-o', 'json'])) as { metadata: { uid: string } };

    await kubectlOk(['delete', 'crun', 'publish-taken', '-n', NS, '--wait=true', '--timeout=120s']);
    const backdoor = {
      turns: [{ toolCalls: [{ toolName: 'write_file', input: { path: 'greeting.txt', content: 'backdoor\n' } }] }, { text: SUMMARY }],
    };
    await applyIn(NS, [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'publish-taken-backdoor' },
        data: { 'script.json': JSON.stringify(backdoor) },
      },
    ]);
    await applyRun('publish-taken', repo, gitea.token, { model: { provider: 'scripted', scriptRef: { name: 'publish-taken-backdoor' } } });
    const again = await finishedRun<RunStatus>(NS, 'publish-taken', 180_000);
    expect(again).toMatchObject({ phase: 'Failed', reason: 'PublishFailed' });
    expect(again.message).toContain(
      `branch chamvi/publish-taken was made for another run named ${NS}/publish-taken (uid ${bobsRun.metadata.uid})`,
    );
    expect(again.message).toContain('close that pull request and delete the branch');
    expect((await branchOf(repo, 'chamvi/publish-taken')).commit?.id).toBe(commit);
    const pulls = await pullsOf(repo);
    expect(pulls).toHaveLength(1);
    expect(pulls[0]).toMatchObject({ number: pullRequest!.number, state: 'open', head: { sha: commit } });
    expect(pushesTo(repo)).toHaveLength(1);
  }, 600_000);
});
