// The Forge port on the Gitea (and Forgejo, which keeps its API) REST API v1, over plain fetch:
// four endpoints do not justify a client library. Draft pull requests are a "WIP:" title
// (Gitea's default work-in-progress prefix); labels are sent as ids, so names are looked up.
import { ForgeError } from './errors/forge-error.ts';
import {
  checkedDefaultBranch,
  checkedList,
  checkedPullRequest,
  type Forge,
  type ForgeOptions,
  type NewPullRequest,
  type PullRequest,
  type PullRequestChange,
} from './forge.ts';
import { forgeHttp, type ForgeHttp } from './forge-http.ts';

interface GiteaPull {
  number: number;
  html_url: string;
  title: string;
  body: string | null;
  head: { ref: string; repo_id?: number };
  base: { ref: string; repo_id?: number };
}

/** Labels per page, and pages read at most. */
const PAGE = 50;
const MAX_PAGES = 20;
/**
 * Open pull requests per page, and pages read at most: 1000 are looked through for the
 * branch's, and a repository with more is searched no further. 25 a page, not Gitea's 50: a
 * pull request carries its two repositories, its users and labels (350 to 776 JSON items on
 * Gitea 1.26), and a page must stay well inside FORGE_ANSWER_MAX_JSON_ITEMS (forge-http.ts).
 */
const PULLS_PAGE = 25;
const PULLS_MAX_PAGES = 40;

const FORGE = 'Gitea';
const DRAFT = 'WIP: ';
const view = (pull: GiteaPull | null | undefined): PullRequest => {
  const checked = checkedPullRequest({ number: pull?.number, url: pull?.html_url, title: pull?.title, body: pull?.body });
  return { ...checked, title: checked.title.startsWith(DRAFT) ? checked.title.slice(DRAFT.length) : checked.title };
};

export class GiteaForge implements Forge {
  readonly kind = 'gitea' as const;
  private readonly http: ForgeHttp;
  private readonly repo: string;

  constructor(options: ForgeOptions) {
    this.http = forgeHttp({ ...options, authorization: (token) => ({ authorization: `token ${token}` }) });
    this.repo = `/repos/${options.repository.split('/').map(encodeURIComponent).join('/')}`;
  }

  async defaultBranch(): Promise<string> {
    return checkedDefaultBranch(FORGE, await this.http.json<unknown>({ method: 'GET', path: this.repo }));
  }

  async findOpenPullRequest(branch: string, base: string): Promise<PullRequest | undefined> {
    for (let page = 1; page <= PULLS_MAX_PAGES; page++) {
      const answer = await this.http.json<unknown>({
        method: 'GET',
        path: `${this.repo}/pulls?state=open&limit=${PULLS_PAGE}&page=${page}`,
      });
      const pulls = checkedList(FORGE, 'list of open pull requests', answer) as Array<GiteaPull | null>;
      // Only one from this repository's own branch: anyone may open one from a fork's branch of
      // the same name, and the run would then update and report the fork's change as its own.
      const found = pulls.find(
        (pull) =>
          pull?.head?.ref === branch &&
          pull.base?.ref === base &&
          pull.head.repo_id !== undefined &&
          pull.head.repo_id === pull.base.repo_id,
      );
      if (found) return view(found);
      if (pulls.length < PULLS_PAGE) return undefined;
    }
    return undefined;
  }

  async createPullRequest(request: NewPullRequest): Promise<PullRequest> {
    const labels = request.labels.length > 0 ? await this.labelIds(request.labels) : [];
    const pull = await this.http.json<GiteaPull>({
      method: 'POST',
      path: `${this.repo}/pulls`,
      body: {
        head: request.branch,
        base: request.base,
        title: request.draft ? `${DRAFT}${request.title}` : request.title,
        body: request.body,
        ...(labels.length > 0 ? { labels } : {}),
      },
    });
    return view(pull);
  }

  async updatePullRequest(number: number, change: PullRequestChange): Promise<PullRequest> {
    const title = change.draft ? `${DRAFT}${change.title}` : change.title;
    return view(
      await this.http.json<GiteaPull>({ method: 'PATCH', path: `${this.repo}/pulls/${number}`, body: { title, body: change.body } }),
    );
  }

  private async labelIds(names: readonly string[]): Promise<number[]> {
    // Every page: a repository with more labels than one page holds still has the later ones.
    // Only the id and name of each wanted label are copied out, once, and a page longer than
    // asked for is refused: each page may hold 4 MiB and FORGE_ANSWER_MAX_JSON_ITEMS, and
    // twenty kept whole (or spread into one push, or kept through a wanted label's object,
    // which can carry the rest) cost the operator hundreds of MiB or a stack overflow.
    const labels: Array<{ id: number; name: string }> = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const listed = await this.http.json<Array<{ id?: unknown; name?: unknown } | null>>({
        method: 'GET',
        path: `${this.repo}/labels?limit=${PAGE}&page=${page}`,
      });
      if (!Array.isArray(listed) || listed.length > PAGE)
        throw new ForgeError(`the forge answered a page of labels with more than the ${PAGE} asked for`, undefined);
      for (const label of listed) {
        const { id, name } = label ?? {};
        if (typeof name === 'string' && names.includes(name) && typeof id === 'number' && !labels.some((kept) => kept.name === name))
          labels.push({ id, name });
      }
      if (listed.length < PAGE || names.every((name) => labels.some((label) => label.name === name))) break;
    }
    const missing = names.filter((name) => !labels.some((label) => label.name === name));
    if (missing.length > 0) {
      throw new ForgeError(
        `label ${missing.map((name) => JSON.stringify(name)).join(', ')} does not exist in the repository; Gitea does not create labels ` +
          'on use: create it there, or remove it from spec.publish.pullRequest.labels',
        undefined,
      );
    }
    return names.map((name) => labels.find((label) => label.name === name)!.id);
  }
}
