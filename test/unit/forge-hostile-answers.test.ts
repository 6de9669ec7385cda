// Every forge adapter against a forge that answers too much, with a redirect, or not to the
// end, on a real HTTP server: the answer is refused as a ForgeError (the publish ends
// PublishFailed at once), never held whole in memory nor taken for the data. (The GitHub
// adapter read any size through Octokit, and took a 301's body as the pull request it had
// created.)
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { countJsonItems } from '../../operator/src/json/json-scan.ts';
import { ForgeError } from '../../operator/src/publish/errors/forge-error.ts';
import type { Forge, ForgeOptions } from '../../operator/src/publish/forge.ts';
import { FORGE_ANSWER_MAX_JSON_DEPTH, FORGE_ANSWER_MAX_JSON_ITEMS } from '../../operator/src/publish/forge-http.ts';
import { GiteaForge } from '../../operator/src/publish/gitea-forge.ts';
import { GitHubForge } from '../../operator/src/publish/github-forge.ts';
import { GitLabForge } from '../../operator/src/publish/gitlab-forge.ts';
import { loopbackForges } from '../support/forge/loopback-forges.ts';

const forgeServing = loopbackForges();

/** A forge whose every answer is `status` with `body` (sent in 64 KiB pieces). */
const forgeAnswering = (status: number, body: string | Buffer) => forgeAnsweringBy(() => [status, body]);

/** A forge that answers each request (method and path) as `answer` says. */
function forgeAnsweringBy(answer: (method: string, path: string) => [number, string | Buffer]): Promise<string> {
  return forgeServing((req, res) => {
    const [status, body] = answer(req.method ?? 'GET', (req.url ?? '/').split('?')[0]!);
    res.writeHead(status, { 'content-type': 'application/json', location: 'https://elsewhere.example/api' });
    const bytes = Buffer.from(body);
    for (let at = 0; at < bytes.length; at += 65_536) res.write(bytes.subarray(at, at + 65_536));
    res.end();
  });
}

const ADAPTERS: Array<[string, (options: ForgeOptions) => Forge]> = [
  ['GitHub', (options) => new GitHubForge(options)],
  ['Gitea', (options) => new GiteaForge(options)],
  ['GitLab', (options) => new GitLabForge(options)],
];
const TOKEN = 'tok-0123456789';
const make = (build: (options: ForgeOptions) => Forge, apiURL: string, timeoutMs?: number) =>
  build({ apiURL, repository: 'acme/app', token: TOKEN, ...(timeoutMs !== undefined ? { timeoutMs } : {}) });

/** A forge that sends its headers and the first half of `body`, then `then`: nothing more, or a reset connection. */
function forgeBreakingOff(body: string, then: 'stall' | 'reset'): Promise<string> {
  return forgeServing((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
    res.write(body.slice(0, body.length / 2), () => {
      if (then === 'reset') setTimeout(() => res.socket?.resetAndDestroy(), 50);
    });
  });
}

describe.each(ADAPTERS)('the %s adapter', (_, build) => {
  it('refuses an answer over 4 MiB (valid JSON padded with 5 MiB of spaces)', async () => {
    const forge = make(build, await forgeAnswering(200, Buffer.concat([Buffer.alloc(5 * 1024 * 1024, ' '), Buffer.from('[]')])));
    const error = await forge.findOpenPullRequest('chamvi/x', 'main').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ForgeError);
    expect((error as Error).message).toMatch(/more than 4194304 bytes/);
  });

  it('refuses an answer of more JSON items than a page of pull requests holds, within 4 MiB (`[{},{},…]`)', async () => {
    // 1.4 million empty objects in 4 MiB: parsed, 89 MiB of the operator's 160 MiB heap, and
    // Gitea reads up to 20 such pages (GitLab 10).
    const body = `[${'{},'.repeat(1_398_000).slice(0, -1)}]`;
    expect(Buffer.byteLength(body)).toBeLessThan(4 * 1024 * 1024);
    const forge = make(build, await forgeAnswering(200, body));
    const error = await forge.findOpenPullRequest('chamvi/x', 'main').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ForgeError);
    expect((error as Error).message).toMatch(
      new RegExp(`more than ${FORGE_ANSWER_MAX_JSON_ITEMS} JSON objects, arrays and members \\(HTTP 200\\)`),
    );
  });

  it('takes three times the heaviest page measured: 75 pull requests from forks with 20 labels, 5 assignees, 5 reviewers', async () => {
    // Gitea 1.26 answered such a pull request with 776 JSON items (one with 5 labels, an
    // assignee and a milestone with 350), and the Gitea adapter asks for 25 a page; GitLab's
    // page of 100 merge requests holds fewer. The bound must leave real pages a wide margin.
    const user = (login: string) => Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`field${i}`, login]));
    const repository = { ...Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`field${i}`, 'r'])), id: 1, owner: user('acme') };
    const pull = (number: number, branch: string) => ({
      number,
      iid: number,
      html_url: `https://forge.example/acme/app/pulls/${number}`,
      web_url: `https://forge.example/acme/app/pulls/${number}`,
      title: 't',
      body: 'b',
      user: user('dev'),
      labels: Array.from({ length: 20 }, (_, id) => ({
        id,
        name: `l${id}`,
        color: 'ffffff',
        description: '',
        exclusive: false,
        url: 'u',
        is_archived: false,
      })),
      assignees: Array.from({ length: 5 }, (_, i) => user(`a${i}`)),
      requested_reviewers: Array.from({ length: 5 }, (_, i) => user(`r${i}`)),
      head: { ref: branch, repo_id: 1, repo: { ...repository, fork: true, parent: repository } },
      base: { ref: 'main', repo_id: 1, repo: repository },
      source_project_id: 1,
      target_project_id: 1,
      source_branch: branch,
      target_branch: 'main',
    });
    // The run's own first, its head and base in one repository (repo_id, repo.id, the project ids).
    const page = [pull(1, 'chamvi/x'), ...Array.from({ length: 74 }, (_, i) => pull(i + 2, `other-${i}`))];
    const body = JSON.stringify(page);
    expect(countJsonItems(body) / page.length).toBeGreaterThanOrEqual(776);
    const forge = make(build, await forgeAnswering(200, body));
    expect(await forge.findOpenPullRequest('chamvi/x', 'main')).toMatchObject({ number: 1 });
  });

  it.each(['stall', 'reset'] as const)(
    'ends with a ForgeError, not a retried transport error, when the forge sends half an answer and then %ss',
    async (then) => {
      // A TimeoutError or TypeError("terminated") while reading the body was retried 10 times,
      // each try cloning again, and the run ended AgentFailed.
      const forge = make(
        build,
        await forgeBreakingOff(JSON.stringify({ default_branch: 'main', padding: 'x'.repeat(100_000) }), then),
        500,
      );
      const error = await forge.defaultBranch().catch((caught: unknown) => caught);
      expect(ForgeError.isInstance(error)).toBe(true);
      expect((error as ForgeError).status).toBeUndefined();
      expect((error as Error).message).toMatch(
        then === 'stall'
          ? /answer \(HTTP 200\) could not be read whole: .*timeout/
          : /answer \(HTTP 200\) could not be read whole: terminated/,
      );
      expect((error as Error).message).not.toMatch(/\n/);
      expect((error as Error).message).not.toContain(TOKEN);
    },
  );

  it('refuses a redirect, and does not take its body for the pull request it asked to create', async () => {
    const pull = {
      number: 7,
      html_url: 'https://elsewhere.example/pr/7',
      web_url: 'https://elsewhere.example/pr/7',
      iid: 7,
      title: 't',
      body: 'b',
    };
    const forge = make(build, await forgeAnswering(301, JSON.stringify(pull)));
    const request = { branch: 'chamvi/x', base: 'main', title: 't', body: 'b', draft: false, labels: [] };
    const error = await forge.createPullRequest(request).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ForgeError);
    expect((error as Error).message).toMatch(/redirect \(HTTP 301\), which is not followed/);
  });
});

describe.each(ADAPTERS)('the %s adapter, given a pull request the run status could not hold', (name, build) => {
  const pullWith = (number: unknown, url: string) => ({ number, iid: number, html_url: url, web_url: url, title: 't', body: 'b' });
  const request = { branch: 'chamvi/x', base: 'main', title: 't', body: 'b', draft: false, labels: [] };

  // Each went into status.result.publish as the forge sent it: the API server refused the
  // write (422) after the pull request existed, and again at every retry.
  it.each([
    ['number 0', pullWith(0, 'https://forge.example/acme/app/pulls/1'), /numbered 0, not a whole number from 1/],
    ['a number given as text', pullWith('7', 'https://forge.example/acme/app/pulls/7'), /numbered "7"/],
    [
      'an address of 3000 characters',
      pullWith(7, `https://forge.example/${'a'.repeat(3000)}`),
      /pull request 7 without an http\(s\) address/,
    ],
    ['a javascript: address', pullWith(7, 'javascript:alert(1)'), /pull request 7 without an http\(s\) address/],
    // URL parsing drops the newline and encodes ESC, so URL.canParse took it; the raw text went to
    // status.message, the Published Event and status.result, where a terminal obeyed the ESC.
    [
      'an address with a newline and ESC in it',
      pullWith(7, 'https://github.com/acme/app/pull/1\n\u001b[2JFake: Approved'),
      /pull request 7 with an address that is not plain: it holds whitespace or a hidden character/,
    ],
    [
      'an address with a line separator in it',
      pullWith(7, 'https://github.com/acme/app/pull/1\u2028Approved'),
      /pull request 7 with an address that is not plain/,
    ],
    ['an address with a space in it', pullWith(7, 'https://forge.example/acme/app/pulls/7 approved'), /with an address that is not plain/],
  ])('refuses %s', async (_name, pull, message) => {
    const forge = make(build, await forgeAnswering(201, JSON.stringify(pull)));
    const error = await forge.createPullRequest(request).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ForgeError);
    expect((error as Error).message).toMatch(message);
    // The refusal does not write out the address it refused.
    expect((error as Error).message).not.toContain('\u001b');
  });

  // JSON.parse takes 60 000 levels; JSON.stringify of the number for the refusal's message
  // threw RangeError, which the job retried ten times with a fresh clone, then ended AgentFailed.
  const nested = (depth: number, inside: string) => `${'['.repeat(depth)}${inside}${']'.repeat(depth)}`;

  it('refuses a number nested 60 000 deep as a ForgeError', async () => {
    // One field nested (GitLab's number is its iid): two would pass the bound on JSON items first.
    const field = name === 'GitLab' ? 'iid' : 'number';
    const pull = JSON.stringify({ ...pullWith(7, 'https://forge.example/acme/app/pulls/7'), [field]: 'NUMBER' });
    const forge = make(build, await forgeAnswering(201, pull.replace('"NUMBER"', nested(60_000, '7'))));
    const error = await forge.createPullRequest(request).catch((caught: unknown) => caught);
    expect(ForgeError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(new RegExp(`JSON nested more than ${FORGE_ANSWER_MAX_JSON_DEPTH} deep \\(HTTP 201\\)`));
  });

  it("refuses an error answer whose message is nested 60 000 deep as a ForgeError, the forge's status kept", async () => {
    const forge = make(build, await forgeAnswering(422, `{"message":${nested(60_000, '"no"')}}`));
    const error = await forge.createPullRequest(request).catch((caught: unknown) => caught);
    expect(ForgeError.isInstance(error)).toBe(true);
    expect((error as ForgeError).status).toBe(422);
    expect((error as Error).message).toMatch(/JSON nested more than 64 deep \(HTTP 422\)/);
  });

  it('names the shape of a number that is neither a number nor text, without writing it out', async () => {
    // Within the depth bound: refused for what it is.
    const forge = make(build, await forgeAnswering(201, JSON.stringify(pullWith({ n: [[7]] }, 'https://forge.example/acme/app/pulls/7'))));
    const error = await forge.createPullRequest(request).catch((caught: unknown) => caught);
    expect(ForgeError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/numbered an object, not a whole number from 1/);
  });

  it('takes a pull request whose answer nests as deep as the bound allows (the control)', async () => {
    // The answer is one object: a member nested to the bound, counting the object itself.
    const pull = {
      ...pullWith(7, 'https://forge.example/acme/app/pulls/7'),
      extra: JSON.parse(nested(FORGE_ANSWER_MAX_JSON_DEPTH - 1, '')) as unknown,
    };
    const forge = make(build, await forgeAnswering(201, JSON.stringify(pull)));
    expect(await forge.createPullRequest(request)).toMatchObject({ number: 7 });
  });

  it('takes a well-formed one', async () => {
    const forge = make(build, await forgeAnswering(201, JSON.stringify(pullWith(7, 'https://forge.example/acme/app/pulls/7'))));
    expect(await forge.createPullRequest(request)).toMatchObject({ number: 7, url: 'https://forge.example/acme/app/pulls/7' });
  });
});

describe.each(ADAPTERS)('the %s adapter, given answers of the wrong shape', (name, build) => {
  // Each was a TypeError, retried like a forge that is away (a fresh clone at every try), and
  // the run ended AgentFailed: a ForgeError ends it PublishFailed, naming the forge.
  it('refuses an object where it asked for the list of open pull requests', async () => {
    const forge = make(build, await forgeAnswering(200, '{}'));
    const error = await forge.findOpenPullRequest('chamvi/x', 'main').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ForgeError);
    expect((error as Error).message).toMatch(
      new RegExp(`^${name} answered the list of open (pull|merge) requests with an object, not a list`),
    );
  });

  it.each([
    ['a number', { default_branch: 1 }, /default_branch is a number/],
    ['no name', {}, /default_branch is nothing/],
    ['a list', [], /default_branch is nothing/],
  ])('refuses a repository whose default branch is %s', async (_case, repository, message) => {
    const forge = make(build, await forgeAnswering(200, JSON.stringify(repository)));
    const error = await forge.defaultBranch().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ForgeError);
    expect((error as Error).message).toMatch(new RegExp(`^${name} answered the repository without a default branch name`));
    expect((error as Error).message).toMatch(message);
  });

  it('finds no pull request in a list of null and an empty object, rather than failing on them', async () => {
    const forge = make(build, await forgeAnswering(200, '[null, {}]'));
    await expect(forge.findOpenPullRequest('chamvi/x', 'main')).resolves.toBeUndefined();
  });
});

describe('the GitHub adapter adding labels', () => {
  const request = { branch: 'chamvi/x', base: 'main', title: 't', body: 'b', draft: false, labels: ['l'.repeat(60)] };
  const pull = { number: 7, html_url: 'https://github.example/acme/app/pull/7', title: 't', body: 'b' };

  it('returns the pull request it opened when the labels call then fails, saying why the labels are not on it', async () => {
    // GitHub takes a label name of at most 50 characters; the spec allows 128.
    const forge = make(
      (options) => new GitHubForge(options),
      await forgeAnsweringBy((method, path) =>
        method === 'POST' && path === '/repos/acme/app/pulls'
          ? [201, JSON.stringify(pull)]
          : [422, JSON.stringify({ message: 'Validation Failed', errors: [{ field: 'name', code: 'invalid' }] })],
      ),
    );
    const created = await forge.createPullRequest(request);
    expect(created).toMatchObject({ number: 7, url: pull.html_url });
    expect(created.labelsNotAdded).toMatch(/^add labels: HTTP 422: Validation Failed/);
  });

  it('says nothing of labels when they were added', async () => {
    const forge = make(
      (options) => new GitHubForge(options),
      await forgeAnsweringBy((method, path) => (path.endsWith('/labels') ? [200, '[]'] : [201, JSON.stringify(pull)])),
    );
    const created = await forge.createPullRequest(request);
    expect(created).toMatchObject({ number: 7 });
    expect(created).not.toHaveProperty('labelsNotAdded');
  });
});

describe('the Gitea adapter looking up labels', () => {
  it('refuses a page of labels longer than it asked for, rather than keeping such pages whole', async () => {
    // 20 000 labels in one page, within the bound on JSON items: kept whole twenty times, or
    // spread into one push (120 000 was a stack overflow).
    const labels = Array.from({ length: 20_000 }, (_, id) => ({ id, name: `l${id}` }));
    const forge = make((options) => new GiteaForge(options), await forgeAnswering(200, JSON.stringify(labels)));
    const request = { branch: 'chamvi/x', base: 'main', title: 't', body: 'b', draft: false, labels: ['wanted'] };
    const error = await forge.createPullRequest(request).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ForgeError);
    expect((error as Error).message).toMatch(/a page of labels with more than the 50 asked for/);
  });
});

describe('the Gitea adapter paging through labels', () => {
  it('keeps nothing of the pages it has read but the ids of the labels it wants', async () => {
    // Twenty pages of 50 labels, each led by a wanted label carrying nearly as many items as an
    // answer may hold (members of one object, the costliest shape but one, ~4.5 MiB parsed):
    // kept as the forge sent them, 19 pages of them were on the heap when the forge was asked
    // for the 20th. The heap is read then, and at the first.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const junk = (n: number) => `{${Array.from({ length: FORGE_ANSWER_MAX_JSON_ITEMS - 500 }, (_, i) => `"p${n}k${i}":0`).join(',')}}`;
    const others = (n: number) => Array.from({ length: 49 }, (_, i) => JSON.stringify({ id: 1000 * n + i, name: `other-${i}` }));
    const page = (n: number) => `[{"id":${n},"name":"wanted","junk":${junk(n)}},${others(n).join(',')}]`;
    const heap: number[] = [];
    const apiURL = await forgeAnsweringBy((method, path) => {
      if (!path.endsWith('/labels')) return [201, '{}'];
      gc();
      heap.push(process.memoryUsage().heapUsed);
      return [200, page(heap.length)];
    });
    const forge = make((options) => new GiteaForge(options), apiURL);
    const request = { branch: 'chamvi/x', base: 'main', title: 't', body: 'b', draft: false, labels: ['wanted', 'missing'] };
    const error = await forge.createPullRequest(request).catch((caught: unknown) => caught);
    expect((error as Error).message).toMatch(/label "missing" does not exist/);
    expect(heap).toHaveLength(20);
    expect(heap[19]! - heap[0]!).toBeLessThan(32 * 1024 * 1024);
  });
});
