// GitLab runs a merge request description's lines that start with `/` as quick actions, as
// the token's user, on create and on every update. The default body is the model's final
// message, so a model could retarget, un-draft, approve or close the request. Against a real
// loopback HTTP server that stores what it is sent, as GitLab would, and hands it back.
// The body is made inert when it is planned, for GitLab (or a forge not known): the body an
// approver approves (its sha256) is the one GitLab stores; GitHub and Gitea get the author's
// body as written, and GitLab shows it as written, a code block's `/` lines too. It was escaped by the adapter as `\/` before, which the
// code block showed as typed (`\/src/app/login.ts`), in a body the approver had not seen.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { ForgeKind } from '../../operator/src/publish/forge-kinds.ts';
import { GitLabForge } from '../../operator/src/publish/gitlab-forge.ts';
import { publishApprovalInput } from '../../operator/src/publish/publish-approval-input.ts';
import { planPublish } from '../../operator/src/publish/publish-plan.ts';
import { withoutQuickActions } from '../../operator/src/publish/without-quick-actions.ts';
import { countDiff } from '../../operator/src/reconcile/kept-diff.ts';
import { fencedAndOutside, gitlabCommandLines } from '../support/forge-body-reading.ts';

const TOKEN = 'glpat-quick-actions-0123456789';
const BODY = 'Fixed the login.\n/target_branch release\n  /ready\n\r/approve\nPaths such as src/a.ts stay as they are.\n';

let server: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** A GitLab that keeps the one merge request's description (and, from its creation, its branches) as sent. */
async function gitlab(): Promise<{ origin: string; sent: string[] }> {
  const sent: string[] = [];
  let stored: string | undefined;
  let branches: { source_branch?: string; target_branch?: string } = {};
  server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => {
      const mr = () => ({ iid: 7, web_url: 'https://gitlab.example/acme/app/-/merge_requests/7', title: 'Fix', description: stored });
      response.setHeader('content-type', 'application/json');
      if (request.method === 'POST' || request.method === 'PUT') {
        const sentMergeRequest = JSON.parse(text) as { description: string; source_branch?: string; target_branch?: string };
        stored = sentMergeRequest.description;
        if (request.method === 'POST')
          branches = { source_branch: sentMergeRequest.source_branch, target_branch: sentMergeRequest.target_branch };
        sent.push(stored);
        response.end(JSON.stringify(mr()));
      } else
        response.end(JSON.stringify(stored === undefined ? [] : [{ ...mr(), ...branches, source_project_id: 1, target_project_id: 1 }]));
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, sent };
}

const run = (body?: string): ParsedCodingRun => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'fix-login', namespace: 'agents', uid: 'uid-1' },
  spec: codingRunSpec.parse({
    task: 'Fix the login',
    repository: { url: 'https://gitlab.example/acme/app.git' },
    model: { provider: 'scripted', scriptRef: { name: 's' } },
    publish: { credentialsSecretRef: { name: 'push' }, pullRequest: body === undefined ? {} : { body } },
  }),
});
const DIFF = 'diff --git a/src/x.ts b/src/x.ts\n--- a/src/x.ts\n+++ b/src/x.ts\n@@ -1 +1 @@\n-a\n+b\n';
const kept = { source: 'final' as const, diff: DIFF, truncated: false, ...countDiff(DIFF), configMap: 'fix-login-diff' };

/** The run's plan as publishing makes it (for `forge`, when known), and the body's sha256 its approver approves. */
function planned(parsed: ParsedCodingRun, summary: string, forge?: ForgeKind) {
  const result = planPublish({
    forge,
    namespace: 'agents',
    name: 'fix-login',
    uid: 'uid-1',
    task: parsed.spec.task,
    publish: parsed.spec.publish!,
    summary,
    ...countDiff(DIFF),
    steps: 3,
    totalTokens: 100,
  });
  if (!result.ok) throw new Error(result.message);
  const approved = publishApprovalInput(parsed, result.plan, kept, 'a'.repeat(64)).pullRequest!;
  return { plan: result.plan, approved };
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe('GitLab: the body runs no quick action', () => {
  it('stores the default body the approver approved, its /paths shown as written, with no line GitLab runs', async () => {
    const { origin, sent } = await gitlab();
    const forge = new GitLabForge({ apiURL: origin, repository: 'acme/app', token: TOKEN });
    const summary = 'Changed two files:\n/src/x.ts: check the token\n/docs/setup.md: say so\n/close';
    const { plan, approved } = planned(run(), summary);
    const pr = plan.pullRequest!;
    await forge.createPullRequest({ branch: plan.branch, base: 'main', title: pr.title, body: pr.body, draft: pr.draft, labels: [] });
    const [stored] = sent;
    expect(gitlabCommandLines(stored!)).toEqual([]);
    // As a reader sees it: the model's lines in the code block, each as written.
    expect(fencedAndOutside(stored!).fenced).toEqual(summary.split('\n'));
    expect(stored).not.toContain('\\/');
    expect(sha256(stored!)).toBe(approved.bodySha256);
    expect(approved.body).toBe(stored);
  });

  it('stores a body spec.publish gives as approved too, its command lines made inert as they would render', async () => {
    const { origin, sent } = await gitlab();
    const forge = new GitLabForge({ apiURL: origin, repository: 'acme/app', token: TOKEN });
    // The control: GitLab would run two of its lines (not the indented one).
    expect(gitlabCommandLines(BODY)).toEqual(['/target_branch release', '/approve']);
    const { plan, approved } = planned(run(BODY), 'Done.');
    const pr = plan.pullRequest!;
    await forge.createPullRequest({ branch: plan.branch, base: 'main', title: pr.title, body: pr.body, draft: true, labels: [] });
    await forge.updatePullRequest(7, { title: pr.title, body: pr.body, draft: false });
    expect(sent).toHaveLength(2);
    for (const description of sent) {
      expect(gitlabCommandLines(description)).toEqual([]);
      expect(sha256(description)).toBe(approved.bodySha256);
    }
    // Markdown drops a paragraph line's leading spaces: each reads as it was written.
    expect(sent[0]!.split('\n').map((line) => line.replaceAll('\r', '').trimStart())).toEqual(
      BODY.split('\n').map((line) => line.replaceAll('\r', '').trimStart()),
    );
    // What the run compares with the body it wants: equal, so a retry does not update (and send) it again.
    expect((await forge.findOpenPullRequest(plan.branch, 'main'))?.body).toBe(pr.body);
  });

  it('makes a body no plan made inert before it is sent, all the same', async () => {
    const { origin, sent } = await gitlab();
    const forge = new GitLabForge({ apiURL: origin, repository: 'acme/app', token: TOKEN });
    await forge.createPullRequest({ branch: 'chamvi/fix', base: 'main', title: 'Fix', body: BODY, draft: false, labels: [] });
    expect(gitlabCommandLines(sent[0]!)).toEqual([]);
  });
});

/** An author's body with its own code: a shell line that starts with `/`, indented lines, and a command outside. */
const AUTHOR_CODE = 'Run it so:\n\n```sh\n/usr/bin/env node build.mjs \\\n  --release\n\tdone\n```\n/close\nThat is all.';

describe("the author's body: changed only for the forge that runs quick actions, and never as shown", () => {
  it('sends GitHub and Gitea the body spec.publish gives byte for byte, the sha256 approved being its own', () => {
    for (const forge of ['github', 'gitea'] as const) {
      const { plan, approved } = planned(run(AUTHOR_CODE), 'Done.', forge);
      expect(plan.pullRequest!.body).toBe(AUTHOR_CODE);
      expect(approved.bodySha256).toBe(sha256(AUTHOR_CODE));
    }
  });

  it("stores on GitLab the author's code block as written, its / line too, with no line GitLab runs", async () => {
    for (const forge of ['gitlab', undefined] as const) {
      const { origin, sent } = await gitlab();
      const gitlabForge = new GitLabForge({ apiURL: origin, repository: 'acme/app', token: TOKEN });
      const { plan, approved } = planned(run(AUTHOR_CODE), 'Done.', forge);
      const pr = plan.pullRequest!;
      await gitlabForge.createPullRequest({ branch: plan.branch, base: 'main', title: pr.title, body: pr.body, draft: false, labels: [] });
      const [stored] = sent;
      expect(gitlabCommandLines(stored!)).toEqual([]);
      // As CommonMark shows the block: each of its lines as the author wrote it, no space before `/usr`.
      expect(fencedAndOutside(stored!).fenced).toEqual(['/usr/bin/env node build.mjs \\', '  --release', '\tdone']);
      expect(fencedAndOutside(stored!).outside.map((line) => line.trimStart())).toEqual(['Run it so:', '', '/close', 'That is all.']);
      expect(sha256(stored!)).toBe(approved.bodySha256);
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
  });

  it.each([
    ['a block with no / line is left as it is', '```\nx\n  y\n```', '```\nx\n  y\n```'],
    ['a tilde fence is read through by GitLab: indented too', '~~~\n/x\n~~~', ' ~~~\n /x\n~~~'],
    ["a fence indented two spaces takes the line's space off again", '  ```\n/x\ny\n  ```', '  ```\n /x\ny\n  ```'],
    ['a block no fence closes runs to the end', '````\n/x\n```\n  y', ' ````\n /x\n```\n   y'],
    ['a fence in a list item ends with the item', '- item\n\n  ```\n  /x\n/y', '- item\n\n  ```\n  /x\n /y'],
    // GitLab deletes every carriage return before it reads (and stores) the body: so is it sent.
    ['carriage returns are deleted: a CRLF block, and a line a lone CR split', '```\r\n/x\r\n\r  y\r\n```\r', ' ```\n /x\n   y\n```'],
    ['a fence whose info string holds U+2028 is a fence', '```a\u2028b\n/x\n```', ' ```a\u2028b\n /x\n```'],
    ['a fence whose info string held a lone CR is a fence', '```a\rb\n/x\n```', ' ```ab\n /x\n```'],
    [
      'a closing fence after a lone CR closes nothing once the CR is deleted: the next block is a paragraph',
      '```\n/usr/bin/env x\nend\r```\n\n```\n/opt/run\n```',
      ' ```\n /usr/bin/env x\nend```\n\n```\n /opt/run\n```',
    ],
    ['a line a lone CR split is one line: no space is added inside it', '```\n/x\na\r  y\n```', ' ```\n /x\na  y\n```'],
  ])('%s', (_, body, sent) => {
    expect(withoutQuickActions(body)).toBe(sent);
    expect(withoutQuickActions(sent)).toBe(sent);
    expect(gitlabCommandLines(sent)).toEqual([]);
  });

  it('shows each block as GitLab reads it, with every carriage return deleted', () => {
    // As CommonMark shows them, once GitLab has deleted the carriage returns: the author's lines.
    expect(fencedAndOutside(withoutQuickActions('```\n/x\na\r  y\n```')).fenced).toEqual(['/x', 'a  y']);
    const afterLoneCR = fencedAndOutside(withoutQuickActions('```\n/usr/bin/env x\nend\r```\n\n```\n/opt/run\n```'));
    expect(afterLoneCR.fenced).toEqual(['/usr/bin/env x', 'end```', '']);
    expect(afterLoneCR.outside.map((line) => line.trimStart())).toEqual(['/opt/run']);
  });

  it('plans for GitLab, or a forge not known, the body GitLab is sent: no carriage return, the same sha256', async () => {
    const body = 'Steps:\r\n```\r\n/x\r\n```\r\n/close\r\n';
    for (const forge of ['gitlab', undefined] as const) {
      const { origin, sent } = await gitlab();
      const gitlabForge = new GitLabForge({ apiURL: origin, repository: 'acme/app', token: TOKEN });
      const { plan, approved } = planned(run(body), 'Done.', forge);
      const pr = plan.pullRequest!;
      expect(pr.body).toBe('Steps:\n ```\n /x\n```\n /close\n');
      await gitlabForge.createPullRequest({ branch: plan.branch, base: 'main', title: pr.title, body: pr.body, draft: false, labels: [] });
      expect(sent).toEqual([pr.body]);
      expect(approved.bodySha256).toBe(sha256(sent[0]!));
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
    // GitHub and Gitea run no quick actions: their body keeps its carriage returns.
    expect(planned(run(body), 'Done.', 'github').plan.pullRequest!.body).toBe(body);
  });

  it('is idempotent, and leaves no command line, on bodies made of fences, lists, tabs, CRs and / lines', () => {
    const pieces = ['```', '````', '~~~', '  ```', '/x', ' ', '\t', '\r', '\n', '\n', '\n', '- ', '1. ', 'a', '\u2028', '> '];
    let seed = 1;
    const next = () => (seed = (seed * 48271) % 2147483647);
    for (let each = 0; each < 3000; each++) {
      const body = Array.from({ length: 2 + (next() % 30) }, () => pieces[next() % pieces.length]).join('');
      const sent = withoutQuickActions(body);
      expect(sent, JSON.stringify(body)).not.toContain('\r');
      expect(withoutQuickActions(sent), JSON.stringify(body)).toBe(sent);
      expect(gitlabCommandLines(sent), JSON.stringify(body)).toEqual([]);
    }
  });
});
