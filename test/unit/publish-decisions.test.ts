// The pure half of publishing (publish/): what a run's spec.publish renders to, which forge a
// host speaks, and what is left to do given what the forge already has. A table each; real git
// only to show that the trailers read are the ones git reads.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codingRunSpec } from '../../operator/src/api/index.ts';
import { isBranchName, publishCredentialsRule } from '../../operator/src/api/publish-spec.ts';
import { repositoryUrlParts } from '../../operator/src/reconcile/canonical-repository-url.ts';
import { decidePullRequest, decidePush, describedBase, pullRequestBase } from '../../operator/src/publish/decide-publish.ts';
import { forgeFor } from '../../operator/src/publish/forge-for-host.ts';
import { defaultTitle, planPublish, publishedFor, type PlanInput } from '../../operator/src/publish/publish-plan.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { parseSpec, validateRun } from '../../operator/src/reconcile/validate-run.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { createRepository, git } from '../support/git-fixture.ts';

const input = (overrides: Partial<PlanInput> = {}): PlanInput => ({
  namespace: 'agents',
  name: 'fix-login',
  uid: '0b8f6e3a-1111-2222-3333-444455556666',
  task: 'Fix the login bug\n\nDetails follow.',
  publish: { branch: 'chamvi/{run}' },
  summary: 'Fixed the expiry check and added a test.',
  filesChanged: 2,
  insertions: 40,
  deletions: 3,
  steps: 7,
  totalTokens: 12345,
  ...overrides,
});

describe('planPublish', () => {
  it('renders the default branch from the run name and titles the commit with the first line of the task', () => {
    const result = planPublish(input());
    expect(result).toMatchObject({ ok: true, plan: { branch: 'chamvi/fix-login', title: 'Fix the login bug' } });
    if (!result.ok) return;
    expect(result.plan.pullRequest).toBeUndefined();
    expect(result.plan.commitMessage).toMatch(/^Fix the login bug\n\n/);
    expect(publishedFor(result.plan.commitMessage)).toEqual({
      run: 'agents/fix-login',
      branch: result.plan.branch,
      uid: '0b8f6e3a-1111-2222-3333-444455556666',
    });
  });

  it('defaults the pull request body to the summary plus the size and usage', () => {
    const result = planPublish(input({ publish: { branch: '{namespace}/{run}', pullRequest: { draft: false, labels: [] } } }));
    if (!result.ok) throw new Error(result.message);
    expect(result.plan.branch).toBe('agents/fix-login');
    expect(result.plan.pullRequest!.body.replaceAll('\u00a0', ' ')).toContain('Fixed the expiry check and added a test.');
    expect(result.plan.pullRequest!.body).toContain('2 files changed, +40 −3; 7 steps, 12345 tokens');
  });

  it('keeps a given title and body', () => {
    const result = planPublish(input({ publish: { branch: 'b', pullRequest: { title: 'T', body: 'B', draft: true, labels: ['x'] } } }));
    expect(result).toMatchObject({ ok: true, plan: { title: 'T', pullRequest: { title: 'T', body: 'B', draft: true, labels: ['x'] } } });
  });

  it('refuses a template that renders to no branch name', () => {
    expect(planPublish(input({ name: 'a', publish: { branch: '{run}.lock' } }))).toMatchObject({ ok: false });
  });

  it('cuts a long first line to 72 characters', () => {
    expect(defaultTitle('x'.repeat(100))).toHaveLength(72);
  });
});

describe('branch names', () => {
  it.each([
    ['chamvi/fix-login', true],
    ['feature/a.b_c', true],
    ['-x', false],
    ['a..b', false],
    ['a/', false],
    ['a.lock', false],
    ['a b', false],
    ['a@{b', false],
    ['a//b', false],
    // git would make refs/heads/HEAD and refs/heads/refs/heads/main of these.
    ['HEAD', false],
    ['refs/heads/main', false],
    ['head', true],
    ['my-refs/x', true],
    // git refuses these per part, not only at the end of the name.
    ['team.lock/fix-1', false],
    ['a/.hidden', false],
    ['x.lockfile/y', true],
  ])('%s is a branch name: %s', (name, ok) => expect(isBranchName(name)).toBe(ok));

  it('the schema refuses a template with a part git refuses (team.lock/{run}), before the run is created', () => {
    const base = {
      task: 't',
      repository: { url: 'https://x/y.git', credentialsSecretRef: { name: 's' } },
      model: { provider: 'scripted', scriptRef: { name: 'c' } },
    };
    expect(codingRunSpec.safeParse({ ...base, publish: { branch: 'team.lock/{run}' } }).success).toBe(false);
    expect(codingRunSpec.safeParse({ ...base, publish: { branch: 'team/{run}' } }).success).toBe(true);
  });

  it('the schema refuses a template git would refuse, before the run is created', () => {
    const base = {
      task: 't',
      repository: { url: 'https://x/y.git', credentialsSecretRef: { name: 's' } },
      model: { provider: 'scripted', scriptRef: { name: 'c' } },
    };
    expect(codingRunSpec.safeParse({ ...base, publish: { branch: 'a..b' } }).success).toBe(false);
    expect(codingRunSpec.safeParse({ ...base, publish: { branch: 'chamvi/{run}' } }).success).toBe(true);
    expect(codingRunSpec.safeParse({ ...base, publish: { branch: 'refs/heads/main' } }).success).toBe(false);
    const based = (pullRequest: object) => codingRunSpec.safeParse({ ...base, publish: { pullRequest } }).success;
    expect(based({ base: 'release' })).toBe(true);
    expect(based({ base: 'HEAD' })).toBe(false);
    expect(based({ base: 'a..b' })).toBe(false);
    expect(based({ labels: ['bug', 'good first issue'] })).toBe(true);
    expect(based({ labels: ['bug,urgent'] })).toBe(false);
    const noToken = { ...base, repository: { url: 'https://x/y.git' }, publish: {} };
    expect(codingRunSpec.safeParse(noToken).success).toBe(false);
  });

  it("the schema refuses a title of more than one line: its lines would become the commit message's trailers", () => {
    const base = {
      task: 't',
      repository: { url: 'https://x/y.git', credentialsSecretRef: { name: 's' } },
      model: { provider: 'scripted', scriptRef: { name: 'c' } },
    };
    const titled = (title: string) => codingRunSpec.safeParse({ ...base, publish: { pullRequest: { title } } });
    expect(titled('Fix the login').success).toBe(true);
    expect(titled('Fix\n\nChamvi-Run: agents/fix\nChamvi-Run-Uid: u').success).toBe(false);
    expect(titled('Fix\rthe login').success).toBe(false);
  });
});

describe('forgeFor', () => {
  const parts = (url: string) => repositoryUrlParts(url)!;
  it.each([
    ['https://github.com/acme/app.git', [], { kind: 'github', apiURL: 'https://api.github.com', repository: 'acme/app' }],
    ['https://gitlab.com/acme/sub/app.git', [], { kind: 'gitlab', apiURL: 'https://gitlab.com/api/v4', repository: 'acme/sub/app' }],
    [
      'http://127.0.0.1:3000/o/r.git',
      [{ host: '127.0.0.1:3000', kind: 'gitea' as const }],
      { kind: 'gitea', apiURL: 'http://127.0.0.1:3000/api/v1', repository: 'o/r' },
    ],
    [
      'https://git.acme.dev/o/r.git',
      [{ host: '*.acme.dev', kind: 'gitlab' as const }],
      { kind: 'gitlab', apiURL: 'https://git.acme.dev/api/v4' },
    ],
    [
      'https://ghe.acme.dev/o/r',
      [{ host: 'ghe.acme.dev', kind: 'github' as const, apiURL: 'https://ghe.acme.dev/api/v3/' }],
      { apiURL: 'https://ghe.acme.dev/api/v3' },
    ],
  ])('%s', (url, entries, expected) => expect(forgeFor(parts(url), entries)).toMatchObject(expected));

  it('knows no forge for an unlisted host, a port that differs, or ssh', () => {
    expect(forgeFor(parts('https://git.internal/o/r.git'), [])).toBeUndefined();
    expect(forgeFor(parts('http://127.0.0.1:3001/o/r.git'), [{ host: '127.0.0.1:3000', kind: 'gitea' }])).toBeUndefined();
    expect(forgeFor(parts('git@github.com:o/r.git'), [])).toBeUndefined();
  });
});

describe('decidePush', () => {
  const ours = 'a'.repeat(40);
  const other = 'b'.repeat(40);
  const made = (run: string, branch = 'chamvi/fix', uid = 'u') =>
    `Title\n\nChamvi-Run: ${run}\nChamvi-Run-Branch: ${branch}\nChamvi-Run-Uid: ${uid}\n`;
  it.each([
    ['no branch yet: create it', undefined, { action: 'create' }],
    ['the branch already holds this commit (a retry): nothing', { commit: ours, message: made('agents/fix') }, { action: 'none' }],
    [
      'made by the operator for this very run (its uid; a publish tried again): move it from what was seen',
      { commit: other, message: made('agents/fix') },
      { action: 'move', from: other },
    ],
    [
      'made for an earlier run of this name, deleted and made again (another uid): refused',
      { commit: other, message: made('agents/fix', 'chamvi/fix', 'uid-of-bobs-run') },
      { action: 'refuse' },
    ],
    ['made for another run: refused', { commit: other, message: made('agents/other') }, { action: 'refuse' }],
    [
      'made for this run name on another branch (a merge copied the commit here): refused',
      { commit: other, message: made('agents/fix', 'chamvi/other') },
      { action: 'refuse' },
    ],
    [
      'made by an operator from before the branch trailer: refused',
      { commit: other, message: 'Title\n\nChamvi-Run: agents/fix\nChamvi-Run-Uid: u\n' },
      { action: 'refuse' },
    ],
    ['a human branch (main): refused', { commit: other, message: 'Initial commit\n' }, { action: 'refuse' }],
    [
      "a human commit that quotes the run's trailers in its body: refused",
      { commit: other, message: `Squash of #12\n\n* ${made('agents/fix').replaceAll('\n', '\n* ')}\nReviewed-by: Bea\n` },
      { action: 'refuse' },
    ],
  ])('%s', (_, remote, expected) => {
    expect(
      decidePush({ branch: 'chamvi/fix', commit: ours, run: 'agents/fix', uid: 'u', remote, protectedBranches: ['main'] }),
    ).toMatchObject(expected);
  });

  it("never moves the default branch or the pull request's base, even when its head is the operator's commit for this run", () => {
    // A fast-forward or rebase merge of the run's pull request puts exactly that commit at the head of main.
    const merged = { commit: other, message: made('agents/fix') };
    for (const branch of ['main', 'release-1']) {
      const decision = decidePush({
        branch,
        commit: ours,
        run: 'agents/fix',
        uid: 'u',
        remote: merged,
        protectedBranches: ['main', 'release-1'],
      });
      expect(decision).toMatchObject({ action: 'refuse' });
      expect((decision as { message: string }).message).toContain('never moves');
    }
    // The same head on a branch of the run's own is moved.
    expect(
      decidePush({ branch: 'chamvi/fix', commit: ours, run: 'agents/fix', uid: 'u', remote: merged, protectedBranches: ['main'] }),
    ).toEqual({
      action: 'move',
      from: other,
    });
  });

  it("moves no existing branch when the repository's default branch cannot be told", () => {
    // Even one the run made under that name: it may be the default branch now.
    const merged = { commit: other, message: made('agents/fix', 'main') };
    const decision = decidePush({
      branch: 'main',
      commit: ours,
      run: 'agents/fix',
      uid: 'u',
      remote: merged,
      protectedBranches: ['release'],
      defaultBranchUnknown: true,
    });
    expect(decision).toMatchObject({ action: 'refuse', message: expect.stringContaining('cannot be told') as unknown });
    expect(
      decidePush({
        branch: 'chamvi/fix',
        commit: ours,
        run: 'agents/fix',
        uid: 'u',
        remote: undefined,
        protectedBranches: [],
        defaultBranchUnknown: true,
      }),
    ).toEqual({
      action: 'create',
    });
  });

  it("never moves a shared branch a merge copied the run's commit to, though no spec names it as a base", () => {
    // Run agents/fix's pull request from chamvi/fix was rebase-merged into release; the run is
    // re-created with publish.branch release and no pull request (so release is no base).
    const merged = { commit: other, message: made('agents/fix', 'chamvi/fix') };
    const decision = decidePush({
      branch: 'release',
      commit: ours,
      run: 'agents/fix',
      uid: 'u',
      remote: merged,
      protectedBranches: ['main'],
    });
    expect(decision).toMatchObject({
      action: 'refuse',
      message: expect.stringContaining('did not make for run agents/fix on this branch'),
    });
  });

  it('protects a base however it was spelt: refs/heads/release and heads/release are the branch release', () => {
    const merged = { commit: other, message: made('agents/fix') };
    for (const base of ['refs/heads/release', 'heads/release', 'release']) {
      const decision = decidePush({
        branch: 'release',
        commit: ours,
        run: 'agents/fix',
        uid: 'u',
        remote: merged,
        protectedBranches: [base],
      });
      expect(decision, base).toMatchObject({ action: 'refuse' });
    }
  });
});

describe("a run deleted and made again under its name does not take the first run's branch and pull request", () => {
  // Bob's run agents/fix-login published chamvi/fix-login (pull request #42, approved). Alice,
  // who may delete and create runs but push nothing, deletes it and creates her own
  // fix-login: same name, another uid.
  const BOB = '0b8f6e3a-1111-2222-3333-444455556666';
  const ALICE = '7c2d9e41-aaaa-bbbb-cccc-ddddeeeeffff';
  const ours = 'a'.repeat(40);
  const head = 'b'.repeat(40);
  const planned = (uid: string) => {
    const result = planPublish(input({ uid }));
    if (!result.ok) throw new Error(result.message);
    return result.plan;
  };
  const push = (uid: string, message: string) =>
    decidePush({
      branch: 'chamvi/fix-login',
      commit: ours,
      run: 'agents/fix-login',
      uid,
      remote: { commit: head, message },
      protectedBranches: ['main'],
    });

  it("refuses the branch of another run of the name, naming the branch, that run's uid and what to do", () => {
    const decision = push(ALICE, planned(BOB).commitMessage);
    expect(decision).toMatchObject({ action: 'refuse' });
    const { message } = decision as { message: string };
    expect(message).toContain('branch chamvi/fix-login');
    expect(message).toContain(`uid ${BOB}`);
    expect(message).toContain('close that pull request and delete the branch');
    expect(message).toContain('spec.publish.branch');
  });

  it('moves the branch for the same run tried again (its own uid), from the head it saw', () => {
    expect(push(BOB, planned(BOB).commitMessage)).toEqual({ action: 'move', from: head });
  });

  it("does not take a Chamvi-Run-Uid line written above the trailer block for the run's uid", () => {
    const operatorTrailers = planned(BOB).commitMessage.slice(planned(BOB).commitMessage.indexOf('Chamvi-Run: '));
    // In the body, a paragraph of its own; and in the trailer paragraph, above the operator's lines.
    const inBody = `Fix the login bug\n\nThe model wrote:\nChamvi-Run-Uid: ${ALICE}\n\n${operatorTrailers}`;
    const inBlock = `Fix the login bug\n\nChamvi-Run-Uid: ${ALICE}\n${operatorTrailers}`;
    expect(push(ALICE, inBody)).toMatchObject({ action: 'refuse' });
    expect(push(ALICE, inBlock)).toMatchObject({ action: 'refuse' });
    // git reads two uids in that paragraph: the head is no run's, not even Bob's.
    expect(push(BOB, inBlock)).toMatchObject({ action: 'refuse' });
  });

  it('takes no branch whose head has no uid trailer (an operator from before it)', () => {
    const withoutUid = 'Fix the login bug\n\nChamvi-Run: agents/fix-login\nChamvi-Run-Branch: chamvi/fix-login\n';
    expect(push(BOB, withoutUid)).toMatchObject({ action: 'refuse' });
  });
});

describe('publishedFor reads the trailers git reads', () => {
  const TRAILERS = 'Chamvi-Run: a/b\nChamvi-Run-Branch: chamvi/b\nChamvi-Run-Uid: u1';
  it.each([
    ["the operator's message", `Title\n\nMade by CodingRun a/b.\n\n${TRAILERS}\n`, { run: 'a/b', branch: 'chamvi/b', uid: 'u1' }],
    [
      'a forged uid in a paragraph of the body',
      `Title\n\nChamvi-Run-Uid: u2\n\n${TRAILERS}\n`,
      { run: 'a/b', branch: 'chamvi/b', uid: 'u1' },
    ],
    ['a forged uid in the trailer paragraph (git reads two)', `Title\n\nChamvi-Run-Uid: u2\n${TRAILERS}\n`, undefined],
    ['another trailer in the paragraph', `Title\n\nSigned-off-by: x <x@y>\n${TRAILERS}\n`, undefined],
    ['a second uid after the block', `Title\n\n${TRAILERS}\nChamvi-Run-Uid: u2\n`, undefined],
    ['the trailers alone (git takes them for the subject)', `${TRAILERS}\n`, undefined],
    ['a blank first line and the trailers', `\n\n\n${TRAILERS}\n`, undefined],
    ['a value of two words', `Title\n\n${TRAILERS} u2\n`, undefined],
  ])('%s', (_, message, expected) => {
    expect(publishedFor(message)).toEqual(expected);
    const dir = mkdtempSync(join(tmpdir(), 'chamvi-trailers-'));
    try {
      createRepository(dir);
      writeFileSync(join(dir, 'message'), message);
      const commit = git(['commit-tree', 'HEAD^{tree}', '-F', 'message'], dir).trim();
      const read = git(['log', '-1', '--format=%(trailers:only,unfold)', commit], dir).trim();
      // Whenever publishedFor names a run, git reads exactly those three trailers, each once.
      if (expected)
        expect(read).toBe(`Chamvi-Run: ${expected.run}\nChamvi-Run-Branch: ${expected.branch}\nChamvi-Run-Uid: ${expected.uid}`);
      else expect(read).not.toBe(TRAILERS);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('pullRequestBase', () => {
  const plan = (base?: string, pullRequest = true) => ({
    branch: 'chamvi/x',
    title: 't',
    commitMessage: 'm',
    ...(pullRequest ? { pullRequest: { title: 't', body: 'b', draft: false, labels: [], base } } : {}),
  });
  // The last two arguments: spec.repository.revision, and the ref it names on the remote (the
  // lookup's revisionRef, git's rules: a tag before a branch), none for a commit id or a name the remote lacks.
  it.each([
    ['the publish spec base, as a short name', plan('refs/heads/release'), 'v1', 'refs/tags/v1', 'release'],
    ['the publish spec base, whatever the remote has of the revision', plan('release'), 'gone', undefined, 'release'],
    ['else the branch the revision names', plan(), 'develop', 'refs/heads/develop', 'develop'],
    ['a revision that names a tag: the default branch', plan(), 'v1.2.0', 'refs/tags/v1.2.0', undefined],
    ['a revision that names another kind of ref: the default branch', plan(), 'refs/pull/1/head', 'refs/pull/1/head', undefined],
    ['a commit id: the default branch', plan(), 'a'.repeat(40), undefined, undefined],
    ['no revision: the default branch', plan(), undefined, undefined, undefined],
    ['no pull request, and a revision the remote lacks: nothing to refuse', plan(undefined, false), 'gone', undefined, undefined],
  ])('%s', (_, given, revision, revisionRef, expected) => {
    expect(pullRequestBase(given, revision, revisionRef)).toEqual({ ok: true, base: expected });
  });

  it('refuses a revision the remote no longer has, rather than take the default branch for the base', () => {
    const decision = pullRequestBase(plan(), 'release/2.1', undefined);
    expect(decision).toEqual({
      ok: false,
      message: expect.stringContaining('"release/2.1" no longer names a branch or a tag on the remote'),
    });
    expect(!decision.ok && decision.message).toMatch(/set spec\.publish\.pullRequest\.base/);
  });
});

describe('pullRequestBase, given the ref the revision named when the run cloned it', () => {
  const plan = (base?: string, pullRequest = true) => ({
    branch: 'chamvi/x',
    title: 't',
    commitMessage: 'm',
    ...(pullRequest ? { pullRequest: { title: 't', body: 'b', draft: false, labels: [], base } } : {}),
  });
  // spec.repository.revision, the ref it names on the remote now, the ref it named at the clone, and the base.
  it.each([
    ['a branch it still names: that branch', plan(), 'release', 'refs/heads/release', 'refs/heads/release', 'release'],
    ['a tag it still names: the default branch', plan(), 'v1', 'refs/tags/v1', 'refs/tags/v1', undefined],
    ['the publish spec base, whatever the revision names now', plan('main'), 'release', 'refs/tags/release', 'refs/heads/release', 'main'],
    ['no pull request: no base to get wrong', plan(undefined, false), 'release', 'refs/tags/release', 'refs/heads/release', undefined],
    ['a commit id: the default branch', plan(), 'a'.repeat(40), undefined, undefined, undefined],
    // A state saved by an operator from before the clone recorded its ref: as before.
    ['no ref recorded at the clone (an older state): the ref named now', plan(), 'release', 'refs/tags/release', undefined, undefined],
  ])('%s', (_, given, revision, revisionRef, clonedRef, expected) => {
    expect(pullRequestBase(given, revision, revisionRef, clonedRef)).toEqual({ ok: true, base: expected });
  });

  it.each([
    ['a tag of the branch name pushed meanwhile (git takes a tag first)', 'refs/tags/release', 'refs/tags/release'],
    ['the branch deleted meanwhile', undefined, 'nothing'],
    ['the branch spelt otherwise now found under refs/ (refs/release)', 'refs/release', 'refs/release'],
  ])('refuses, rather than fall back to the default branch, a revision that names another ref now: %s', (_, now, said) => {
    const decision = pullRequestBase(plan(), 'release', now, 'refs/heads/release');
    expect(decision).toEqual({
      ok: false,
      message: expect.stringContaining('named refs/heads/release on the remote when the run cloned it'),
    });
    expect(!decision.ok && decision.message).toContain(`and names ${said} now`);
    expect(!decision.ok && decision.message).toMatch(/nothing was pushed.*set spec\.publish\.pullRequest\.base/);
  });

  it('refuses a tag the revision named at the clone that is a branch now (another kind of ref)', () => {
    expect(pullRequestBase(plan(), 'v1', 'refs/heads/v1', 'refs/tags/v1')).toMatchObject({ ok: false });
  });
});

describe('describedBase: the base the approver is shown before the remote is asked', () => {
  const plan = (base?: string) => ({
    branch: 'chamvi/x',
    title: 't',
    commitMessage: 'm',
    pullRequest: { title: 't', body: 'b', draft: false, labels: [], base },
  });
  const rule =
    "if the revision names a branch on the remote, the repository's default branch if it names a tag; publishing fails if it names neither, or another ref than when the run cloned it";
  it.each([
    ['the publish spec base, as a short name', plan('refs/heads/release'), 'v1.2.0', 'release'],
    ['a revision that may be a branch or a tag: the rule', plan(), 'v1.2.0', `v1.2.0 ${rule}`],
    ['a branch revision spelt in full, as a short name', plan(), 'refs/heads/release', `release ${rule}`],
    ['a commit id: the default branch', plan(), 'a'.repeat(40), "(the repository's default branch)"],
    ['no revision: the default branch', plan(), undefined, "(the repository's default branch)"],
  ])('%s', (_, given, revision, expected) => {
    expect(describedBase(given, revision)).toBe(expected);
  });
});

describe('decidePullRequest', () => {
  const pr = { number: 4, url: 'https://forge/pr/4', title: 'T', body: 'B' };
  it.each([
    ['none open: create', undefined, { action: 'create' }],
    ['open with the same title and body (a retry): keep', pr, { action: 'keep', pullRequest: pr }],
    ['the forge normalised line ends and trailing space: keep', { ...pr, body: 'B\r\n' }, { action: 'keep' }],
    ['open with another body: update it', { ...pr, body: 'old' }, { action: 'update', number: 4 }],
  ])('%s', (_, existing, expected) => expect(decidePullRequest(existing, { title: 'T', body: 'B' })).toMatchObject(expected));
});

describe('the branch rendered for the run is checked when the run is accepted, not after it has run', () => {
  const found = {
    secrets: { push: ['token'] },
    configMaps: { script: ['script.json'] },
    secretLabels: { push: { 'chamvi.dev/usable-by-runs': 'true' } },
  };
  const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {});
  const accept = (name: string, branch?: string) => {
    const run = codingRunFixture({
      metadata: { name },
      spec: { publish: { credentialsSecretRef: { name: 'push' }, ...(branch ? { branch } : {}) } },
    });
    const parsed = parseSpec(run);
    if (!parsed.ok) throw new Error(parsed.refusal.message);
    return validateRun(run, parsed.spec, config, found);
  };

  it('accepts the default chamvi/{run} for a plain run name (the control)', () => {
    expect(accept('fix-login')).toBeUndefined();
  });

  it.each([
    ['a run named fix.lock', 'fix.lock', undefined, 'chamvi/fix.lock'],
    ['a part ending .lock inside the name', 'fix.lock', '{run}/{namespace}', 'fix.lock/agents'],
    // A run name may have 253 characters; a branch 255.
    ['a name too long for a branch', 'r'.repeat(253), undefined, `chamvi/${'r'.repeat(253)}`],
  ])('refuses %s InvalidSpec, naming the rendered branch', (_, name, branch, rendered) => {
    expect(accept(name, branch)).toEqual({
      reason: 'InvalidSpec',
      message: expect.stringContaining(`spec.publish.branch renders to "${rendered}" for this run`),
    });
  });
});

describe('spec.publish credentials with a template (the CEL rule sees the run as stored)', () => {
  const own = { templateRef: { name: 'webapp' }, publish: {} };
  it('leaves a run that names a template to the operator, which checks the merged spec', () => {
    expect(publishCredentialsRule.holds(own)).toBe(true);
    expect(publishCredentialsRule.rule).toContain('has(self.templateRef)');
  });
  it('still refuses publish without any token in a run without a template', () => {
    expect(publishCredentialsRule.holds({ repository: { url: 'https://x/y.git' }, publish: {} })).toBe(false);
    expect(publishCredentialsRule.holds({ publish: {} })).toBe(false);
  });
  it('refuses the merged spec when the template gives no token either', () => {
    const run = codingRunFixture({ spec: { templateRef: { name: 'webapp' }, publish: {} } });
    const template = {
      name: 'webapp',
      spec: {
        task: 't',
        repository: { url: 'https://github.com/acme/webapp.git' },
        model: { provider: 'scripted', scriptRef: { name: 's' } },
      },
    };
    const parsed = parseSpec({
      ...run,
      spec: { templateRef: { name: 'webapp' }, publish: {} } as typeof run.spec,
      status: { template } as typeof run.status,
    });
    expect(parsed).toMatchObject({
      ok: false,
      refusal: { reason: 'InvalidSpec', message: expect.stringContaining('spec.publish needs a token') },
    });
    const given = {
      ...template,
      spec: { ...template.spec, repository: { ...template.spec.repository, credentialsSecretRef: { name: 'git' } } },
    };
    expect(
      parseSpec({
        ...run,
        spec: { templateRef: { name: 'webapp' }, publish: {} } as typeof run.spec,
        status: { template: given } as typeof run.status,
      }).ok,
    ).toBe(true);
  });
});
