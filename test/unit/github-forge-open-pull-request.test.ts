// The GitHub adapter finding the run's open pull request, against a real HTTP server: it takes
// only one from this repository's own branch into the base it asked for. GitHub's head and base
// filters are not to be trusted alone (octokit/rest.js#2056: the head filter answered another
// branch's pull request at the same commit), and the run would then update and report someone
// else's pull request as its own. The Gitea and GitLab adapters check the same.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { GitHubForge } from '../../operator/src/publish/github-forge.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A GitHub whose list of pull requests is `pulls`, whatever the filters asked for. */
async function githubListing(pulls: unknown[]): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(pulls));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const REPOSITORY = { id: 1296269, full_name: 'acme/app' };
const FORK = { id: 7001, full_name: 'mallory/app' };

const pull = (number: number, head: { ref: string; repo: unknown }, base: { ref: string; repo: unknown }) => ({
  number,
  html_url: `https://github.com/acme/app/pull/${number}`,
  title: `pull request ${number}`,
  body: '',
  head,
  base,
});

const RUN = pull(12, { ref: 'chamvi/fix', repo: REPOSITORY }, { ref: 'main', repo: REPOSITORY });

const find = async (pulls: unknown[]) =>
  new GitHubForge({ apiURL: await githubListing(pulls), repository: 'acme/app', token: 'tok-0123456789' }).findOpenPullRequest(
    'chamvi/fix',
    'main',
  );

describe('the GitHub adapter finding the open pull request of the run', () => {
  it.each([
    ["another branch's pull request at the same commit", pull(3, { ref: 'release', repo: REPOSITORY }, { ref: 'main', repo: REPOSITORY })],
    ['one into another base', pull(4, { ref: 'chamvi/fix', repo: REPOSITORY }, { ref: 'develop', repo: REPOSITORY })],
    ["one from a fork's branch of the same name", pull(5, { ref: 'chamvi/fix', repo: FORK }, { ref: 'main', repo: REPOSITORY })],
    ['one whose fork was deleted (head.repo null)', pull(6, { ref: 'chamvi/fix', repo: null }, { ref: 'main', repo: REPOSITORY })],
  ])('passes over %s listed first, and takes its own after it', async (_case, other) => {
    expect(await find([other, RUN])).toMatchObject({ number: 12, url: 'https://github.com/acme/app/pull/12' });
  });

  it('finds none when the list holds only pull requests that are not its own', async () => {
    const other = pull(3, { ref: 'release', repo: REPOSITORY }, { ref: 'main', repo: REPOSITORY });
    expect(await find([other, null, {}])).toBeUndefined();
  });

  it('takes its own when it is the only one listed (the control)', async () => {
    expect(await find([RUN])).toMatchObject({ number: 12 });
  });
});
