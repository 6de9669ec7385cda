// GitLab runs a merge request description's lines that start with `/` as quick actions, as
// the token's user, on create and on every update. The default body is the model's final
// message, so a model could retarget, un-draft, approve or close the request. Against a real
// loopback HTTP server that stores what it is sent, as GitLab would, and hands it back.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { GitLabForge } from '../../operator/src/publish/gitlab-forge.ts';

const TOKEN = 'glpat-quick-actions-0123456789';
const BODY = 'Fixed the login.\n/target_branch release\n  /ready\n/approve\nPaths such as src/a.ts stay as they are.\n';

let server: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** A GitLab that keeps the one merge request's description as sent. */
async function gitlab(): Promise<{ origin: string; sent: string[] }> {
  const sent: string[] = [];
  let stored: string | undefined;
  server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => {
      const mr = () => ({ iid: 7, web_url: 'https://gitlab.example/acme/app/-/merge_requests/7', title: 'Fix', description: stored });
      response.setHeader('content-type', 'application/json');
      if (request.method === 'POST' || request.method === 'PUT') {
        stored = (JSON.parse(text) as { description: string }).description;
        sent.push(stored);
        response.end(JSON.stringify(mr()));
      } else response.end(JSON.stringify(stored === undefined ? [] : [{ ...mr(), source_project_id: 1, target_project_id: 1 }]));
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, sent };
}

describe('GitLab: the body runs no quick action', () => {
  it('sends no line that starts with /, on create and on update, and reads back the body asked for', async () => {
    const { origin, sent } = await gitlab();
    const forge = new GitLabForge({ apiURL: origin, repository: 'acme/app', token: TOKEN });
    await forge.createPullRequest({ branch: 'chamvi/fix', base: 'main', title: 'Fix', body: BODY, draft: true, labels: [] });
    await forge.updatePullRequest(7, { title: 'Fix', body: `${BODY}/close\n`, draft: false });
    expect(sent).toHaveLength(2);
    for (const description of sent) expect(description.split('\n').filter((line) => /^\s*\//.test(line))).toEqual([]);
    expect(sent[0]).toContain('\\/target_branch release');
    // What the run compares with the body it wants: equal, so a retry does not update (and send) it again.
    expect((await forge.findOpenPullRequest('chamvi/fix', 'main'))?.body).toBe(`${BODY}/close\n`);
  });
});
