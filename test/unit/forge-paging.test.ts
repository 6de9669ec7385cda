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
    });
    const own = {
      iid: 501,
      web_url: 'https://gitlab.example/mr/501',
      title: 'ours',
      description: 'b',
      source_project_id: 3,
      target_project_id: 3,
    };
    const server = await forge((_method, _path, query) =>
      query.get('page') === '1' ? Array.from({ length: 100 }, (_, i) => fork(i + 1)) : [own, fork(600)],
    );
    const found = await new GitLabForge({ apiURL: server.url, repository: 'acme/app', token: 't' }).findOpenPullRequest('chamvi/x', 'main');
    expect(found).toMatchObject({ number: 501, url: own.web_url });
    expect(server.asked).toHaveLength(2);
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
