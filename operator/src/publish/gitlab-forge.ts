// The Forge port on the GitLab REST API v4 (merge requests), over plain fetch. Not
// @gitbeaker/rest: four endpoints, and its dependency tree would be larger than this file and
// the one it shares with Gitea (forge-http.ts). A project is named by its URL-encoded path;
// a draft is a "Draft:" title, as GitLab documents; labels are names, created on use. A body is
// sent without lines GitLab would run as quick actions (without-quick-actions.ts): the plan for
// a GitLab made it so already (it changes nothing in such a body), so what is sent and stored is
// the body the approver approved; a body planned for another forge is made so all the same.
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
import { withoutQuickActions } from './without-quick-actions.ts';

interface MergeRequest {
  iid: number;
  web_url: string;
  title: string;
  description: string | null;
  source_project_id?: number;
  target_project_id?: number;
  source_branch?: string;
  target_branch?: string;
}

const FORGE = 'GitLab';
const DRAFT = 'Draft: ';
const view = (mr: MergeRequest | null | undefined): PullRequest => {
  const checked = checkedPullRequest({ number: mr?.iid, url: mr?.web_url, title: mr?.title, body: mr?.description });
  return {
    ...checked,
    title: checked.title.startsWith(DRAFT) ? checked.title.slice(DRAFT.length) : checked.title,
  };
};

/** Merge requests per page, and pages read at most (a branch name opened from 1000 forks is not looked past). */
const PAGE = 100;
const MAX_PAGES = 10;

export class GitLabForge implements Forge {
  readonly kind = 'gitlab' as const;
  private readonly http: ForgeHttp;
  private readonly project: string;

  constructor(options: ForgeOptions) {
    this.http = forgeHttp({ ...options, authorization: (token) => ({ 'private-token': token }) });
    this.project = `/projects/${encodeURIComponent(options.repository)}`;
  }

  async defaultBranch(): Promise<string> {
    return checkedDefaultBranch(FORGE, await this.http.json<unknown>({ method: 'GET', path: this.project }));
  }

  async findOpenPullRequest(branch: string, base: string): Promise<PullRequest | undefined> {
    // The list holds merge requests from forks too (source_branch is only a name): only one from
    // this project's own branch is the run's, or it would adopt a fork's change as its own. The
    // branch filters are GitLab's word only, as GitHub's head filter was (github-forge.ts): the
    // branches are compared here too. Read page by page: 20 forks' requests of the same name
    // (GitLab's default page) used to hide the run's own, and the run then failed trying to open
    // it again.
    for (let page = 1; page <= MAX_PAGES; page++) {
      const query = new URLSearchParams({
        state: 'opened',
        source_branch: branch,
        target_branch: base,
        per_page: String(PAGE),
        page: String(page),
      });
      const answer = await this.http.json<unknown>({ method: 'GET', path: `${this.project}/merge_requests?${query}` });
      const found = checkedList(FORGE, 'list of open merge requests', answer) as Array<MergeRequest | null>;
      const own = found.find(
        (mr) =>
          mr?.source_branch === branch &&
          mr.target_branch === base &&
          mr.source_project_id !== undefined &&
          mr.source_project_id === mr.target_project_id,
      );
      if (own) return view(own);
      if (found.length < PAGE) return undefined;
    }
    return undefined;
  }

  async createPullRequest(request: NewPullRequest): Promise<PullRequest> {
    const mr = await this.http.json<MergeRequest>({
      method: 'POST',
      path: `${this.project}/merge_requests`,
      body: {
        source_branch: request.branch,
        target_branch: request.base,
        title: request.draft ? `${DRAFT}${request.title}` : request.title,
        description: withoutQuickActions(request.body),
        ...(request.labels.length > 0 ? { labels: request.labels.join(',') } : {}),
      },
    });
    return view(mr);
  }

  async updatePullRequest(number: number, change: PullRequestChange): Promise<PullRequest> {
    return view(
      await this.http.json<MergeRequest>({
        method: 'PUT',
        path: `${this.project}/merge_requests/${number}`,
        body: { title: change.draft ? `${DRAFT}${change.title}` : change.title, description: withoutQuickActions(change.body) },
      }),
    );
  }
}
