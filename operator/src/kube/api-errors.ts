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
