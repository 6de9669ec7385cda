// The Forge port on GitHub's REST API through Octokit, GitHub's maintained client (it knows
// the API's versions, pagination and error shapes). Its fetch is wrapped so no redirect is
// followed (another origin must not get the token) and no answer is held past the bound the
// other adapters keep, and its errors become ForgeErrors with the token cut out. Labels go on
// through the issues API, which creates unknown ones, in a second call after the pull request
// exists: its failure is reported with the pull request, not as the publish's.
import { Octokit } from '@octokit/rest';
import { ForgeError } from './errors/forge-error.ts';
import { forgeErrorText, forgeExchange } from './forge-http.ts';
import {
  checkedDefaultBranch,
  checkedList,
  checkedPullRequest,
  type CreatedPullRequest,
  type Forge,
  type ForgeOptions,
  type NewPullRequest,
  type PullRequest,
  type PullRequestChange,
} from './forge.ts';

interface GitHubPull {
  number: number;
  html_url: string;
  title: string;
  body?: string | null;
  /** The branches and their repositories; repo is null once a fork is deleted. */
  head?: { ref?: string; repo?: { id?: number } | null };
  base?: { ref?: string; repo?: { id?: number } | null };
}

const FORGE = 'GitHub';

const view = (pull: GitHubPull | null | undefined): PullRequest =>
  checkedPullRequest({ number: pull?.number, url: pull?.html_url, title: pull?.title, body: pull?.body });

export class GitHubForge implements Forge {
  readonly kind = 'github' as const;
  private readonly octokit: Octokit;
  private readonly owner: string;
  private readonly repo: string;
  private readonly token: string;

  constructor(options: ForgeOptions) {
    this.octokit = new Octokit({
      auth: options.token,
      baseUrl: options.apiURL,
      userAgent: 'chamvi-operator',
      request: {
        // Octokit reads a whole answer into memory, and takes a 3xx (other than 304) as
        // success, its body as the data: read, bounded and refused as the other adapters'
        // answers are (forgeExchange). Octokit wraps what this throws; call() unwraps it.
        fetch: async (url: string, init: RequestInit) => {
          const { response, text } = await forgeExchange(url, { ...init, method: init.method ?? 'GET' }, options);
          return new Response(response.status === 204 || response.status === 304 ? null : text, {
            status: response.status,
            statusText: response.statusText,
            headers: response.headers,
          });
        },
        retries: 0,
      },
      log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
    });
    const [owner = '', repo = ''] = options.repository.split('/');
    this.owner = owner;
    this.repo = repo;
    this.token = options.token;
  }

  private async call<T>(what: string, request: () => Promise<{ data: T }>): Promise<T> {
    try {
      return (await request()).data;
    } catch (error) {
      // Octokit's RequestError around a failure of forgeExchange says HTTP 500, which no forge
      // answered: the ForgeError it carries says what happened.
      const cause = (error as { cause?: unknown }).cause;
      if (ForgeError.isInstance(cause)) throw new ForgeError(forgeErrorText(`${what}: ${cause.message}`, this.token), cause.status);
      // Octokit's message is the forge's own words: one line without controls, as every adapter's.
      const status = (error as { status?: unknown }).status;
      const message = error instanceof Error ? error.message : String(error);
      throw new ForgeError(
        forgeErrorText(`${what}: ${typeof status === 'number' ? `HTTP ${status}: ` : ''}${message}`, this.token),
        typeof status === 'number' ? status : undefined,
      );
    }
  }

  async defaultBranch(): Promise<string> {
    const repo: unknown = await this.call('GET repository', () => this.octokit.rest.repos.get({ owner: this.owner, repo: this.repo }));
    return checkedDefaultBranch(FORGE, repo);
  }

  async findOpenPullRequest(branch: string, base: string): Promise<PullRequest | undefined> {
    const pulls = checkedList(
      FORGE,
      'list of open pull requests',
      await this.call('list pull requests', () =>
        this.octokit.rest.pulls.list({ owner: this.owner, repo: this.repo, state: 'open', head: `${this.owner}:${branch}`, base }),
      ),
    );
    // The filters are GitHub's word only (octokit/rest.js#2056: the head filter answered another
    // branch's pull request at the same commit): only one from this repository's own branch
    // into `base` is the run's, as the Gitea and GitLab adapters check, or the run would update
    // and report someone else's pull request (a fork's branch of the same name) as its own.
    const own = (pulls as Array<GitHubPull | null>).find(
      (pull) =>
        pull?.head?.ref === branch &&
        pull.base?.ref === base &&
        typeof pull.head.repo?.id === 'number' &&
        pull.head.repo.id === pull.base.repo?.id,
    );
    return own ? view(own) : undefined;
  }

  async createPullRequest(request: NewPullRequest): Promise<CreatedPullRequest> {
    const created = await this.call('create pull request', () =>
      this.octokit.rest.pulls.create({
        owner: this.owner,
        repo: this.repo,
        head: request.branch,
        base: request.base,
        title: request.title,
        body: request.body,
        draft: request.draft,
      }),
    );
    const pull = view(created);
    if (request.labels.length === 0) return pull;
    // The pull request exists now: a failed label call (a name over GitHub's 50 characters, a
    // token that may not edit issues) must not fail the publish, which would leave it open but
    // unrecorded, and found again with no labels at the retry.
    try {
      await this.call('add labels', () =>
        this.octokit.rest.issues.addLabels({ owner: this.owner, repo: this.repo, issue_number: pull.number, labels: [...request.labels] }),
      );
      return pull;
    } catch (error) {
      if (!ForgeError.isInstance(error)) throw error;
      return { ...pull, labelsNotAdded: error.message };
    }
  }

  async updatePullRequest(number: number, change: PullRequestChange): Promise<PullRequest> {
    const pull = await this.call('update pull request', () =>
      this.octokit.rest.pulls.update({ owner: this.owner, repo: this.repo, pull_number: number, title: change.title, body: change.body }),
    );
    return view(pull);
  }
}
