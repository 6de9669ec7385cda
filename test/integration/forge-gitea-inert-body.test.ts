// The default pull request body on a real Gitea (test/support/forge/): the agent's final message
// in it, posted as the token's user, references no issue, closes none at the merge and renders
// no link or image. The same words posted as they were (the control, merged after it, so that
// by the time their issues are closed Gitea has handled both merges) did all of that.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GiteaForge } from '../../operator/src/publish/gitea-forge.ts';
import { defaultBody } from '../../operator/src/publish/publish-plan.ts';
import { startGitea, type GiteaServer } from '../support/forge/gitea-server.ts';
import { eventually } from '../support/operator-process.ts';

let gitea: GiteaServer;

beforeAll(async () => {
  gitea = await startGitea();
  for (const name of ['app', 'other']) {
    await gitea.createRepository(name);
    for (const title of ['for the operator', 'for the control'])
      await gitea.api('POST', `/repos/${gitea.user}/${name}/issues`, { title: `an issue of ${name} ${title}` });
  }
}, 300_000);
afterAll(async () => gitea?.close());

/** What the model said: closing keywords for an issue here and one in another repository, a mention, a link and an image. */
const said = (issue: number) =>
  `Closes #${issue} and fixes ${gitea.user}/other#${issue}. Thanks @${gitea.user}: https://example.com/x ![i](https://example.com/i.png)`;

/** Opens a pull request from a new branch with this body through the operator's Gitea adapter, and merges it. */
async function publishAndMerge(branch: string, body: string): Promise<void> {
  const repo = `/repos/${gitea.user}/app`;
  await gitea.api('POST', `${repo}/contents/${branch}.txt`, {
    content: Buffer.from('a change\n').toString('base64'),
    message: 'A change',
    branch: 'main',
    new_branch: branch,
  });
  const forge = new GiteaForge({ apiURL: `${gitea.origin}/api/v1`, repository: `${gitea.user}/app`, token: gitea.token });
  const pull = await forge.createPullRequest({ branch, base: 'main', title: branch, body, draft: false, labels: [] });
  // Gitea answers 405 until it has checked that the pull request merges.
  await eventually(
    async () => ((await gitea.api('POST', `${repo}/pulls/${pull.number}/merge`, { Do: 'merge' }, [405])).status === 405 ? undefined : true),
    60_000,
    `Gitea to merge ${branch}`,
  );
}

/** An issue's state and the events on it (a reference from a pull request is `pull_ref`). */
async function issue(repository: string, number: number): Promise<{ state: string; events: string[] }> {
  const path = `/repos/${gitea.user}/${repository}/issues/${number}`;
  const timeline = await gitea.api<Array<{ type: string }> | null>('GET', `${path}/timeline`);
  return { state: (await gitea.api<{ state: string }>('GET', path)).body.state, events: (timeline.body ?? []).map((event) => event.type) };
}

/** The links and images Gitea renders the text with, in the repository's context. */
async function renderedLinks(text: string): Promise<number> {
  const response = await fetch(`${gitea.origin}/api/v1/markdown`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `token ${gitea.token}` },
    body: JSON.stringify({ Text: text, Mode: 'gfm', Context: `${gitea.origin}/${gitea.user}/app` }),
  });
  return ((await response.text()).match(/<a\s|<img\s/g) ?? []).length;
}

describe('the default pull request body on Gitea', () => {
  it("acts on nothing the agent's message says, where the message posted as it was references and closes issues", async () => {
    const body = defaultBody({
      namespace: 'agents',
      name: 'fix',
      uid: 'uid-1',
      task: 'Fix it',
      publish: { branch: 'chamvi/{run}', pullRequest: { draft: false, labels: [] } },
      summary: said(1),
      filesChanged: 1,
      insertions: 1,
      deletions: 0,
      steps: 1,
      totalTokens: 10,
    });
    await publishAndMerge('chamvi/inert', body);
    await publishAndMerge('chamvi/raw', said(2));
    await eventually(
      async () => ((await issue('app', 2)).state === 'closed' && (await issue('other', 2)).state === 'closed' ? true : undefined),
      60_000,
      "the control's merge to close its issues",
    );
    expect(await issue('app', 2)).toMatchObject({ events: expect.arrayContaining(['pull_ref', 'close']) as unknown });
    expect(await issue('other', 2)).toMatchObject({ events: expect.arrayContaining(['pull_ref']) as unknown });
    expect(await renderedLinks(said(2))).toBeGreaterThan(0);
    // The operator's body, merged first.
    expect(await issue('app', 1)).toEqual({ state: 'open', events: [] });
    expect(await issue('other', 1)).toEqual({ state: 'open', events: [] });
    expect(await renderedLinks(body)).toBe(0);
  });

  it("shows the agent's lines as written, those that start with / too: the block's one-space indent is not shown", async () => {
    const summary = 'Changed two files:\n/src/app/login.ts: check the token\n  /docs/setup.md: say so <b>x</b>';
    const body = defaultBody({
      namespace: 'agents',
      name: 'fix',
      uid: 'uid-1',
      task: 'Fix it',
      publish: { branch: 'chamvi/{run}', pullRequest: { draft: false, labels: [] } },
      summary,
      filesChanged: 1,
      insertions: 1,
      deletions: 0,
      steps: 1,
      totalTokens: 10,
    });
    expect(body).toContain('\n /src/app/login.ts');
    expect(await renderedCode(body)).toEqual([summary]);
  });
});

/** The text of each code block Gitea renders the body with, as a reader sees it (tags dropped, entities read). */
async function renderedCode(text: string): Promise<string[]> {
  const response = await fetch(`${gitea.origin}/api/v1/markdown`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `token ${gitea.token}` },
    body: JSON.stringify({ Text: text, Mode: 'gfm', Context: `${gitea.origin}/${gitea.user}/app` }),
  });
  const html = await response.text();
  return [...html.matchAll(/<pre[^>]*>([\s\S]*?)<\/pre>/g)].map((match) =>
    match[1]!
      .replace(/<[^>]+>/g, '')
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&#34;|&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&amp;/g, '&')
      .replace(/\n$/, ''),
  );
}
