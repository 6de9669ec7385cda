// JSON over HTTP for the forge adapters that need no client library (Gitea/Forgejo, GitLab).
// - The token goes in a header, never in a URL; no redirect is followed (it would be another
//   origin, which must not get the token).
// - Answers are bounded (a forge is not trusted to send little), error text is cut to what a
//   status message can hold, and any copy of the token in it is replaced.
import { redactSecrets } from '../providers/redact-secrets.ts';
import { ForgeError } from './errors/forge-error.ts';

const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
const MAX_ERROR_TEXT = 1000;

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
  const call = options.fetch ?? fetch;
  const clean = (text: string) => redactSecrets(text, [options.token]).slice(0, MAX_ERROR_TEXT);
  return {
    async json<T>(request: ForgeRequest): Promise<T> {
      const url = `${options.apiURL}${request.path}`;
      let response: Response;
      try {
        response = await call(url, {
          method: request.method,
          redirect: 'manual',
          signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
          headers: {
            accept: 'application/json',
            ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
            ...options.authorization(options.token),
          },
          ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
        });
      } catch (error) {
        throw new ForgeError(
          clean(`${request.method} ${url} failed: ${error instanceof Error ? error.message : String(error)}`),
          undefined,
        );
      }
      const text = await boundedAnswer(response, `${request.method} ${url}`);
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
 * A forge's answer as text, for every adapter (GitHub's Octokit included): refused past
 * MAX_RESPONSE_BYTES, and refused as a redirect (3xx but 304, which means no body), which is
 * not followed and is never data. `what`: the request, for the message.
 */
export async function boundedAnswer(response: Response, what: string): Promise<string> {
  const text = await boundedText(response);
  if (response.status >= 300 && response.status < 400 && response.status !== 304)
    throw new ForgeError(`${what} answered a redirect (HTTP ${response.status}), which is not followed`, response.status);
  return text;
}

async function boundedText(response: Response): Promise<string> {
  if (!response.body) return '';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > MAX_RESPONSE_BYTES) throw new ForgeError(`the forge answered more than ${MAX_RESPONSE_BYTES} bytes`, response.status);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}
