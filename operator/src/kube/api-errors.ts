// HTTP status of a Kubernetes API error, whichever client-node path produced it
// (ApiException carries `code`, the watch carries `statusCode`).

export function statusCodeOf(error: unknown): number | undefined {
  if (!error || typeof error !== 'object') return undefined;
  const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
  if (typeof code === 'number') return code;
  if (typeof statusCode === 'number') return statusCode;
  return undefined;
}

export const isNotFound = (error: unknown) => statusCodeOf(error) === 404;
export const isAlreadyExists = (error: unknown) =>
  statusCodeOf(error) === 409 &&
  /already exists|AlreadyExists/i.test(String((error as { body?: unknown }).body ?? (error as Error).message));
export const isConflict = (error: unknown) => statusCodeOf(error) === 409;
export const isGone = (error: unknown) => statusCodeOf(error) === 410;

/** What a read answered, or undefined when the object is not there (404); any other failure throws. */
export async function unlessNotFound<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/**
 * The API server's refusal of a write, as a code and its own message: 403 (forbidden: RBAC,
 * a ResourceQuota, an admission policy or webhook), 422 (invalid), 400 (bad request). Other
 * failures (409, 5xx, a dropped connection) are not refusals of the object.
 */
export function apiRefusal(error: unknown): { code: number; message: string } | undefined {
  const code = statusCodeOf(error);
  if (code !== 400 && code !== 403 && code !== 422) return undefined;
  return { code, message: statusMessage(error) };
}

/**
 * A write that failed on the API server's side (HTTP 5xx: an admission webhook it calls that
 * failed or timed out, etcd timing out), read as apiRefusal reads a refusal: nothing about the
 * object, and it may clear by itself.
 */
export function apiServerFailure(error: unknown): { code: number; message: string } | undefined {
  const code = statusCodeOf(error);
  if (code === undefined || code < 500 || code > 599) return undefined;
  return { code, message: statusMessage(error) };
}

/**
 * A write refused for its size: etcd's "request is too large" (HTTP 500; etcd keeps objects
 * under 1.5 MiB by default) or the API server's 413. Writing the same object again cannot help.
 */
export function isTooLargeToStore(error: unknown): boolean {
  const code = statusCodeOf(error);
  return code === 413 || (code === 500 && /request is too large/i.test(statusMessage(error)));
}

/** The message of the API server's Status answer, or the error's own text; at most 2 KiB. */
function statusMessage(error: unknown): string {
  const body = (error as { body?: unknown }).body;
  let message: string | undefined;
  try {
    const parsed = (typeof body === 'string' ? JSON.parse(body) : body) as { message?: unknown } | undefined;
    if (typeof parsed?.message === 'string') message = parsed.message;
  } catch {
    // not a Status object: fall back to the error's own text
  }
  return (message ?? (error instanceof Error ? error.message : String(error))).slice(0, 2048);
}

/**
 * client-node's Watch ends a watch that brought no data for 30 s with a TimeoutError, and the
 * API server sends a bookmark to a watch with no events only about once a minute: a quiet watch
 * (a namespace with no runs for a while, a kind nobody uses) ends so every half minute. That is
 * a watch's normal end, like the server's own close at `timeoutSeconds`: the watcher resumes
 * from the last resourceVersion at once, with no warning (controller/informer.ts; the CLI's
 * `get -w` and `logs -f`, cli/run-client.ts). Taken as a failure, it was logged every half
 * minute and doubled the informer's back-off each time, so after a few quiet minutes each watch
 * was closed 10 s of every 40, and a run created then waited for it (docs/benchmarks.md, "A
 * quiet watch is not a failed one"). No tight loop: each of these ends comes 30 s after the
 * last data.
 */
export function isClientTimeout(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === 'TimeoutError';
}
