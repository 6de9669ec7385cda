// What a credential the operator hands on must look like: one token of printable ASCII. The
// model's API key goes into a header, a git token into git's environment (and a forge's
// header). A run author may name any key of a Secret offered to runs, a PEM key or a binary
// keystore among them, and a value that is not one token made the consumer throw with the value
// in its message (fetch: a header with a line break; spawn: an environment value with a NUL),
// which reached the run's status, Events, logs and transcript. Pure.

/** The longest token taken: longer than any API key or forge token (a GitHub App's is about 1 KiB). */
export const TOKEN_MAX_CHARACTERS = 4096;

/** What a token is, for messages that refuse a value (never quoting it). */
export const TOKEN_SHAPE = `one line of printable ASCII without spaces, at most ${TOKEN_MAX_CHARACTERS} characters`;

const TOKEN = new RegExp(`^[\\x21-\\x7e]{1,${TOKEN_MAX_CHARACTERS}}$`);

/** One token of printable ASCII, leading and trailing whitespace aside (a Secret made from a file ends in a newline). */
export function isTokenShaped(value: string): boolean {
  return TOKEN.test(value.trim());
}
