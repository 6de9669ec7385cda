// The port every forge adapter implements: the few pull-request operations publishing needs.
// One contract suite (test/support/forge-contract.ts) runs over each adapter: Gitea live, GitHub
// and GitLab against recorded exchanges of their real APIs.
import { ForgeError } from './errors/forge-error.ts';
import type { ForgeKind } from './forge-kinds.ts';
import { HIDDEN_CHARACTER } from '../text/hidden-character.ts';

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

/** A pull request just opened: on GitHub its labels are a second call, which may fail after it exists. */
export interface CreatedPullRequest extends PullRequest {
  /** Why the labels asked for are not on it (the forge's words): the pull request stands, the run says so. */
  labelsNotAdded?: string;
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
  createPullRequest(request: NewPullRequest): Promise<CreatedPullRequest>;
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

/** The longest pull request address status.result.publish.pullRequest.url holds. */
export const PULL_REQUEST_URL_MAX = 2048;

/** What no plain address holds: whitespace (a space, a newline, a no-break space) or a hidden character (ESC, U+2028, a bidi override). */
const NOT_PLAIN = new RegExp(`\\s|${HIDDEN_CHARACTER}`, 'u');

/**
 * A pull request as a forge answered it, checked before it is used: its number and address go
 * into the run's status, and one the status schema refuses (the API server's 422) would fail
 * the publish after the pull request exists, again at every retry. An address that is not
 * http(s) is refused too: dashboards render it as a link. So is one with whitespace or a hidden
 * character in it: URL.canParse took `…/pull/1\n\u001b[2JFake: Approved` (parsing drops the
 * newline and encodes ESC), and the text as sent went to status.message, the Published Event and
 * status.result, where a terminal obeyed it. One URL parsing would merely spell otherwise (an
 * upper-case host a self-hosted forge was configured with, an IDN) is plain text and kept as
 * the forge wrote it. The address is never written out in the refusal.
 */
export function checkedPullRequest(pull: { number: unknown; url: unknown; title: unknown; body: unknown }): PullRequest {
  const { number, url, title, body } = pull;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 1)
    throw new ForgeError(
      `the forge answered a pull request numbered ${typeof number === 'number' || typeof number === 'string' ? JSON.stringify(number).slice(0, 40) : answerShape(number)}, not a whole number from 1`,
      undefined,
    );
  if (typeof url !== 'string' || url.length > PULL_REQUEST_URL_MAX || !/^https?:\/\//i.test(url) || !URL.canParse(url))
    throw new ForgeError(
      `the forge answered pull request ${number} without an http(s) address of at most ${PULL_REQUEST_URL_MAX} characters`,
      undefined,
    );
  if (NOT_PLAIN.test(url))
    throw new ForgeError(
      `the forge answered pull request ${number} with an address that is not plain: it holds whitespace or a hidden character`,
      undefined,
    );
  if (typeof title !== 'string' || (body !== null && body !== undefined && typeof body !== 'string'))
    throw new ForgeError(`the forge answered pull request ${number} without a title or with a body that is not text`, undefined);
  return { number, url, title, body: body ?? '' };
}

/**
 * A list a forge answered, checked to be one before it is searched. A 200 with `{}` (a proxy,
 * a changed API) made a TypeError, which the job retried as if the forge were away, cloning
 * the repository again at each try, and then ended AgentFailed instead of PublishFailed.
 */
export function checkedList(forge: string, what: string, answer: unknown): unknown[] {
  if (!Array.isArray(answer))
    throw new ForgeError(`${forge} answered the ${what} with ${answerShape(answer)}, not a list; is the forge API URL right?`, undefined);
  return answer;
}

/** The repository's default branch as a forge answered it: a name, which the push then compares and protects. */
export function checkedDefaultBranch(forge: string, answer: unknown): string {
  const branch = typeof answer === 'object' && answer !== null ? (answer as { default_branch?: unknown }).default_branch : undefined;
  if (typeof branch !== 'string' || branch === '')
    throw new ForgeError(
      `${forge} answered the repository without a default branch name (default_branch is ${answerShape(branch)}); is the forge API URL right?`,
      undefined,
    );
  return branch;
}

/** What a forge answered, by its kind alone: a value of unchecked shape is never written out (nor stringified: it may nest deep). */
const answerShape = (value: unknown): string =>
  value === null
    ? 'null'
    : Array.isArray(value)
      ? 'a list'
      : value === undefined
        ? 'nothing'
        : typeof value === 'object'
          ? 'an object'
          : `a ${typeof value}`;
