// A full git object id as the operator records and uses commits: SHA-1 (40 hex digits) or
// SHA-256 (64). One definition for the schemas that store one (status, the sealed run state)
// and the code that puts one on a command line or compares one to a ref (take-diff,
// remote-refs, publish): a value that passes it is never an option, a path or shell text.

export const COMMIT_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/** Whether the value is a full commit id (COMMIT_ID). */
export const isCommitId = (value: string | undefined): value is string => value !== undefined && COMMIT_ID.test(value);
