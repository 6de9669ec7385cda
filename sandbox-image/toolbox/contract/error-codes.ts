// The stable error codes of the toolbox protocol. The operator maps them to tool errors the
// model can act on; they never change meaning once published.

export const TOOL_ERROR_CODES = [
  'INVALID_INPUT',
  'NOT_FOUND',
  'OUTSIDE_WORKSPACE',
  'DENIED_PATH',
  /** spec.verify.protect: the run's grader depends on this path, so the file tools do not change it. */
  'PROTECTED_PATH',
  'NOT_UNIQUE',
  'NO_MATCH',
  'NO_CHANGE',
  'TOO_LARGE',
  'BINARY',
  'IS_DIRECTORY',
  'TIMEOUT',
  'JOB_NOT_FOUND',
  'IO_ERROR',
] as const;

export type ToolErrorCode = (typeof TOOL_ERROR_CODES)[number];

export function isToolErrorCode(value: unknown): value is ToolErrorCode {
  return typeof value === 'string' && (TOOL_ERROR_CODES as readonly string[]).includes(value);
}
