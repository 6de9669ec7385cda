// Forge adapters read past a full first page, on a real HTTP server: GitLab's merge requests
// (forks may open many of the run's branch name) and Gitea's labels (a repository may have
// more than one page of them).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { GiteaForge } from '../../operator/src/publish/gitea-forge.ts';
import { GitLabForge } from '../../operator/src/publish/gitlab-forge.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A forge answering every request with what `answer` returns for it, and listing what was asked. */
async function forge(
  answer: (method: string, path: string, query: URLSearchParams, body: string) => unknown,
): Promise<{ url: string; asked: string[] }> {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://forge');
      asked.push(`${req.method} ${url.pathname}${url.search}`);
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer(req.method ?? 'GET', url.pathname, url.searchParams, body)));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked };
}

describe('forge paging', () => {
  it("GitLab: finds the project's own merge request behind a full page of forks' of the same branch name", async () => {
    const fork = (iid: number) => ({
      iid,
      web_url: `https://gitlab.example/mr/${iid}`,
      title: 'fork',
      description: '',
      source_project_id: 99,
      target_project_id: 3,
      source_branch: 'chamvi/x',
      target_branch: 'main',
    });
    const own = {
      iid: 501,
      web_url: 'https://gitlab.example/mr/501',
      title: 'ours',
      description: 'b',
      source_project_id: 3,
      target_project_id: 3,
      source_branch: 'chamvi/x',
      target_branch: 'main',
    };
    const server = await forge((_method, _path, query) =>
      query.get('page') === '1' ? Array.from({ length: 100 }, (_, i) => fork(i + 1)) : [own, fork(600)],
    );
    const found = await new GitLabForge({ apiURL: server.url, repository: 'acme/app', token: 't' }).findOpenPullRequest('chamvi/x', 'main');
    expect(found).toMatchObject({ number: 501, url: own.web_url });
    expect(server.asked).toHaveLength(2);
  });

  // The source_branch and target_branch filters are GitLab's word only (GitHub's head filter once
  // answered another branch's pull request): a merge request from this project's other branch,
  // or into another base, listed first, was taken for the run's, updated and reported as its own.
  it.each([
    ['from another branch of the project', { source_branch: 'feature/other', target_branch: 'main' }],
    ['into another base', { source_branch: 'chamvi/x', target_branch: 'release' }],
  ])("GitLab: takes only the run's own branch into its base, not a merge request %s listed first", async (_case, branches) => {
    const mergeRequest = (iid: number, source_branch: string, target_branch: string) => ({
      iid,
      web_url: `https://gitlab.example/mr/${iid}`,
      title: `mr ${iid}`,
      description: '',
      source_project_id: 3,
      target_project_id: 3,
      source_branch,
      target_branch,
    });
    const server = await forge(() => [
      mergeRequest(8, branches.source_branch, branches.target_branch),
      mergeRequest(9, 'chamvi/x', 'main'),
    ]);
    const gitlab = new GitLabForge({ apiURL: server.url, repository: 'acme/app', token: 't' });
    expect(await gitlab.findOpenPullRequest('chamvi/x', 'main')).toMatchObject({ number: 9 });
  });

  it("GitLab: finds no merge request when the only one listed is another branch's", async () => {
    const other = {
      iid: 8,
      web_url: 'https://gitlab.example/mr/8',
      title: 'other',
      description: '',
      source_project_id: 3,
      target_project_id: 3,
      source_branch: 'feature/other',
      target_branch: 'main',
    };
    const server = await forge(() => [other]);
    const gitlab = new GitLabForge({ apiURL: server.url, repository: 'acme/app', token: 't' });
    await expect(gitlab.findOpenPullRequest('chamvi/x', 'main')).resolves.toBeUndefined();
  });

  it("Gitea: finds a label on the second page of the repository's labels", async () => {
    const labels = [...Array.from({ length: 50 }, (_, i) => ({ id: i + 1, name: `other-${i}` })), { id: 77, name: 'chamvi' }];
    let created: { labels?: number[] } = {};
    const server = await forge((method, path, query, body) => {
      if (path.endsWith('/labels')) {
        const page = Number(query.get('page') ?? '1');
        return labels.slice((page - 1) * 50, page * 50);
      }
      if (method === 'POST') created = JSON.parse(body) as { labels?: number[] };
      return { number: 1, html_url: 'https://gitea.example/pr/1', title: 't', body: 'b', head: { ref: 'chamvi/x' }, base: { ref: 'main' } };
    });
    const gitea = new GiteaForge({ apiURL: server.url, repository: 'acme/app', token: 't' });
    await gitea.createPullRequest({ branch: 'chamvi/x', base: 'main', title: 't', body: 'b', draft: false, labels: ['chamvi'] });
    expect(created.labels).toEqual([77]);
  });
});
