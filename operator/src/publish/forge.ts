// The port every forge adapter implements: the few pull-request operations publishing needs.
// One contract suite (test/support/forge-contract.ts) runs over each adapter: Gitea live, GitHub
// and GitLab against recorded exchanges of their real APIs.
import type { ForgeKind } from './forge-kinds.ts';

export interface PullRequest {
  number: number;
  url: string;
  /** Without the draft marker a forge puts in titles ("WIP:", "Draft:"), so it compares with the plan's. */
  title: string;
  body: string;
}

export interface NewPullRequest {
  branch: string;
  base: string;
  title: string;
  body: string;
  draft: boolean;
  labels: readonly string[];
}

export interface PullRequestChange {
  title: string;
  body: string;
  draft: boolean;
}

export interface Forge {
  readonly kind: ForgeKind;
  /** The repository's default branch, the base when the run names none. */
  defaultBranch(): Promise<string>;
  /** The open pull request from `branch` into `base`, if there is one. */
  findOpenPullRequest(branch: string, base: string): Promise<PullRequest | undefined>;
  createPullRequest(request: NewPullRequest): Promise<PullRequest>;
  updatePullRequest(number: number, change: PullRequestChange): Promise<PullRequest>;
}

/** What a forge adapter is built from: where the API is, which repository, and the token (never logged). */
export interface ForgeOptions {
  apiURL: string;
  repository: string;
  token: string;
  /** Injected for tests; default the global fetch. */
  fetch?: typeof fetch;
  timeoutMs?: number;
}
