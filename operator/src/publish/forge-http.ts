// JSON over HTTP for the forge adapters that need no client library (Gitea/Forgejo, GitLab),
// and the one exchange every adapter makes (GitHub's Octokit calls it as its fetch).
// - The token goes in a header, never in a URL; no redirect is followed (it would be another
//   origin, which must not get the token).
// - Answers are bounded (a forge is not trusted to send little): in bytes, in the JSON items a
//   parse would make of them, and in how deep they nest. Error text is one line without control
//   characters, cut to what a status message can hold, and any copy of the token in it is replaced.
// - A forge that cannot be reached, or whose answer stalls or breaks off, is a ForgeError like
//   any other forge failure: the publish ends PublishFailed at once (workers/publish-job.ts),
//   not retried as a lost sandbox is, cloning again at each try.
import { JsonScan, RESPONSE_MAX_JSON_ITEMS } from '../json/json-scan.ts';
import { redactSecrets } from '../providers/redact-secrets.ts';
import { HIDDEN_CHARACTER } from '../text/hidden-character.ts';
import { ForgeError } from './errors/forge-error.ts';

const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
/**
 * The JSON objects, arrays and members (JsonScan's items) a forge answer may hold: the bound
 * the toolbox's lines and the model's answers keep. 4 MiB of `[{},{},…]`, within the byte
 * bound, parsed to 89 MiB, and one such answer ended the operator's 160 MiB heap. At this
 * bound the costliest shape (objects of one member each, no two keys alike) holds about 9 MiB
 * beside the answer's text; eight publish jobs (workerConcurrency) each reading one peaked at
 * 94 MiB of heap in a bare Node.js process, 133 MiB at twice the bound. The largest answer
 * publishing asks for is a page of open pull requests: on a real Gitea 1.26 (test/support/
 * forge) one with 5 labels, a milestone and an assignee is 350 items, one from a fork with 20
 * labels, 5 assignees and 5 reviewers 776, so Gitea's page of 25 holds 8 750 to 19 400 (the
 * bound leaves 3.4 times the heaviest); GitLab's documented merge request is 99 (10 000 a page
 * of 100), GitHub's list for one branch one pull request of a few hundred items. Each page is
 * parsed and dropped before the next is asked for (only what an adapter picks from it is
 * copied out), so paging multiplies the time, not the heap.
 */
export const FORGE_ANSWER_MAX_JSON_ITEMS = RESPONSE_MAX_JSON_ITEMS;
/**
 * How deep a forge answer's objects and arrays may nest. JSON.parse takes 60 000 levels, but
 * what is done with the value after it recurses (JSON.stringify of a field in a message, a
 * client's copy): a pull request numbered `[[[…]]]` threw RangeError, not a ForgeError, and the
 * job was retried ten times, cloning each time, then ended AgentFailed. The deepest answer
 * publishing reads (a Gitea pull request: its repositories' owners and permissions) nests 4.
 */
export const FORGE_ANSWER_MAX_JSON_DEPTH = 64;
const MAX_ERROR_TEXT = 1000;

const HIDDEN = new RegExp(HIDDEN_CHARACTER, 'gu');

/**
 * The text of a ForgeError, the forge's own words in it: it ends up in status.message and an
 * Event, which a terminal shows. So it is one line (a forge's newline would start a line of its
 * choosing there), with no control character a terminal obeys (ESC [2J clears the screen) nor
 * any other hidden one (text/hidden-character.ts), each a space, and runs of blanks one space;
 * any copy of the token cut out, and at most MAX_ERROR_TEXT characters. Every adapter's error
 * text goes through it, GitHub's too.
 */
export function forgeErrorText(text: string, token: string): string {
  const line = redactSecrets(text, [token]).replace(HIDDEN, ' ').replace(/\s+/g, ' ').trim();
  if (line.length <= MAX_ERROR_TEXT) return line;
  const cut = line.slice(0, MAX_ERROR_TEXT);
  // Not half a surrogate pair at the cut: a lone surrogate is not text.
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut;
}

export interface ForgeRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT';
  path: string;
  body?: unknown;
}

export interface ForgeHttp {
  json<T>(request: ForgeRequest): Promise<T>;
}

/** The forge's own words from an error body: its message field, else the text. */
export function forgeMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { message?: unknown; error?: unknown; errors?: unknown };
    const message = parsed.message ?? parsed.error;
    const words = typeof message === 'string' ? message : message !== undefined ? JSON.stringify(message) : text;
    return parsed.errors !== undefined ? `${words} ${JSON.stringify(parsed.errors)}` : words;
  } catch {
    return text;
  }
}

export function forgeHttp(options: {
  apiURL: string;
  token: string;
  authorization: (token: string) => Record<string, string>;
  fetch?: typeof fetch;
  timeoutMs?: number;
}): ForgeHttp {
  const clean = (text: string) => forgeErrorText(text, options.token);
  return {
    async json<T>(request: ForgeRequest): Promise<T> {
      const url = `${options.apiURL}${request.path}`;
      const { response, text } = await forgeExchange(
        url,
        {
          method: request.method,
          headers: {
            accept: 'application/json',
            ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
            ...options.authorization(options.token),
          },
          ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
        },
        options,
      );
      if (!response.ok) {
        throw new ForgeError(clean(`${request.method} ${url}: HTTP ${response.status}: ${forgeMessage(text).trim()}`), response.status);
      }
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new ForgeError(
          clean(`${request.method} ${url} answered HTTP ${response.status} with no JSON: ${text.slice(0, 200)}`),
          response.status,
        );
      }
    },
  };
}

/**
 * One request to a forge and its whole answer, for every adapter (GitHub's Octokit included):
 * no redirect followed, the answer read within `timeoutMs` (30 s) and its bounds, a 3xx (but
 * 304, which means no body) refused, which is never data. Whatever goes wrong on the way, the
 * forge unreachable, a reset or a stall before the headers or in the middle of the body, is a
 * ForgeError of one line with the token cut out.
 */
export async function forgeExchange(
  url: string,
  init: RequestInit & { method: string },
  options: { token: string; fetch?: typeof fetch; timeoutMs?: number },
): Promise<{ response: Response; text: string }> {
  const what = `${init.method} ${url}`;
  const failed = (text: string, status: number | undefined) => new ForgeError(forgeErrorText(text, options.token), status);
  let response: Response;
  try {
    response = await (options.fetch ?? fetch)(url, {
      ...init,
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
    });
  } catch (error) {
    throw failed(`${what} failed: ${failure(error)}`, undefined);
  }
  let text: string;
  try {
    text = await boundedText(response, what);
  } catch (error) {
    if (ForgeError.isInstance(error)) throw failed(error.message, error.status);
    throw failed(`${what}: the answer (HTTP ${response.status}) could not be read whole: ${failure(error)}`, undefined);
  }
  if (response.status >= 300 && response.status < 400 && response.status !== 304)
    throw failed(`${what} answered a redirect (HTTP ${response.status}), which is not followed`, response.status);
  return { response, text };
}

/** What a fetch error says, with its cause: undici's own message is "fetch failed" or "terminated". */
function failure(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause.message : typeof error.cause === 'string' ? error.cause : undefined;
  return cause && cause !== error.message ? `${error.message} (${cause})` : error.message;
}

/**
 * The answer as text, given up past MAX_RESPONSE_BYTES, FORGE_ANSWER_MAX_JSON_ITEMS or
 * FORGE_ANSWER_MAX_JSON_DEPTH, before it is all held or parsed. Every answer, an error's too:
 * an error's message is read from its JSON.
 */
async function boundedText(response: Response, what: string): Promise<string> {
  if (!response.body) return '';
  const chunks: Buffer[] = [];
  const scan = new JsonScan(FORGE_ANSWER_MAX_JSON_ITEMS);
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > MAX_RESPONSE_BYTES)
      throw new ForgeError(`${what} answered more than ${MAX_RESPONSE_BYTES} bytes (HTTP ${response.status})`, response.status);
    if (scan.bytes(chunk) > FORGE_ANSWER_MAX_JSON_ITEMS)
      throw new ForgeError(
        `${what} answered more than ${FORGE_ANSWER_MAX_JSON_ITEMS} JSON objects, arrays and members (HTTP ${response.status}), ` +
          'more than any answer publishing asks for holds',
        response.status,
      );
    if (scan.deepest > FORGE_ANSWER_MAX_JSON_DEPTH)
      throw new ForgeError(
        `${what} answered JSON nested more than ${FORGE_ANSWER_MAX_JSON_DEPTH} deep (HTTP ${response.status}), deeper than any answer publishing asks for`,
        response.status,
      );
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}
