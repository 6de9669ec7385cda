// The one spelling of a repository URL that the operator accepts (security #11.2, #11.12).
//
// A URL that two parsers read differently is a bypass: WHATWG `URL` reads
// `https://github.com\acme\x@evil.example` as host github.com, git and curl read it as user
// `github.com\acme\x` at host evil.example. So nothing is parsed and re-spelt: a URL is either
// already in the canonical grammar below, in which case git gets exactly the string that was
// checked, or it is refused with a message that says what to write instead.
//
// The grammar is written as RE2 regular expressions (no lookaround, no backreferences), so the
// same strings back this module (JavaScript reads these expressions the same way) and the chart's
// ValidatingAdmissionPolicy (CEL `matches`, which is RE2). The chart copies them in
// templates/_helpers.tpl; test/integration/security-allow-repo.test.ts checks that the copies are
// equal and that the API server and isRepositoryAllowed decide every attack URL alike.
//
// Canonical repository URLs (docs/repository-urls.md says the same for users):
//   https://HOST[:PORT]/PATH   http://HOST[:PORT]/PATH   git://HOST[:PORT]/PATH
//   ssh://[USER@]HOST[:PORT]/PATH                         USER@HOST:PATH (scp-like ssh)
//   file:///PATH
// - HOST: lowercase DNS labels of a-z 0-9 and inner `-`, joined by single dots, no trailing dot.
//   (An IPv4 address fits; IPv6 literals, uppercase, IDN in Unicode do not.) A label starting
//   with `xn--` (punycode, which can spell a look-alike) is allowed only by a pattern whose own
//   text contains `xn--`.
// - PORT: 1-65535 without leading zeros, and never the scheme's default (443, 80, 9418, 22):
//   the default is written by leaving the port out.
// - USER: only for ssh; letters, digits, `_`, `.`, `-`, not starting with `.` or `-`. https,
//   http and git URLs carry no user (a token belongs in credentialsSecretRef).
// - PATH: one or more segments of A-Z a-z 0-9 `.` `_` `~` `+` `-`, separated by single `/`;
//   no empty segment (so no `//` and no trailing `/`), no `.` or `..` segment.
// - Nowhere: `%` (percent-encoding: git decodes file:// paths and servers decode http paths, so
//   `%2F..` would be a different path to them than to the check), `\`, `@` other than the ssh
//   user's, `?`, `#`, whitespace, control or non-ASCII characters. None of these has a meaning in
//   a repository URL that the plain spelling cannot say.
// Because a URL can only start with a scheme or an ssh user, nothing canonical looks like a git
// option (`-...`), a remote helper (`ext::...`) or a local path.

const USER = '[A-Za-z0-9_][A-Za-z0-9._-]{0,63}';
const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const HOST = `${LABEL}(?:\\.${LABEL})*`;
const PORT = '(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
const SEGMENT = '(?:[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\\.[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*|\\.\\.[A-Za-z0-9._~+-]+)';
const PATH = `(?:/${SEGMENT})+`;
const SCP_PATH = `/?${SEGMENT}(?:/${SEGMENT})*`;

/** The canonical grammar as one RE2 expression (the chart's `chamvi.canonicalRepositoryUrl`). */
export const CANONICAL_REPOSITORY_URL =
  `^(?:(?:https|http|git)://${HOST}(?::${PORT})?${PATH}` +
  `|ssh://(?:${USER}@)?${HOST}(?::${PORT})?${PATH}` +
  `|${USER}@${HOST}:${SCP_PATH}` +
  `|file://${PATH})$`;

/** A canonical-looking URL that writes out its scheme's default port: refused, it is a second spelling. */
export const DEFAULT_PORT_URL = '^(?:https://[^/]*:443|http://[^/]*:80|ssh://[^/]*:22|git://[^/]*:9418)/';

/** A canonical URL whose host has a punycode (`xn--`) label. */
export const PUNYCODE_HOST_URL = '^(?:[a-z]+://)?(?:[A-Za-z0-9._-]+@)?(?:[a-z0-9-]+\\.)*xn--';

const canonical = new RegExp(CANONICAL_REPOSITORY_URL);
const defaultPort = new RegExp(DEFAULT_PORT_URL);
const punycodeHost = new RegExp(PUNYCODE_HOST_URL);

/** Is `url` in the canonical grammar? Exactly the chart's first validation. */
export function isCanonicalRepositoryUrl(url: string): boolean {
  return canonical.test(url) && !defaultPort.test(url);
}

export function hasPunycodeHost(url: string): boolean {
  return punycodeHost.test(url);
}

export interface RepositoryUrlParts {
  /** The transport git uses: scp-like URLs are ssh. */
  scheme: 'https' | 'http' | 'git' | 'ssh' | 'file';
  user?: string;
  /** Empty for file://. */
  host: string;
  port?: number;
  /** With its leading `/`, except for an scp-like relative path. */
  path: string;
}

/**
 * The parts of a canonical URL (undefined for any other string). Only defined on the grammar,
 * where the split is unambiguous; used for the clone's protocol and origin, never to re-spell.
 */
export function repositoryUrlParts(url: string): RepositoryUrlParts | undefined {
  if (!isCanonicalRepositoryUrl(url)) return undefined;
  if (url.startsWith('file://')) return { scheme: 'file', host: '', path: url.slice('file://'.length) };
  const withScheme = /^(https|http|git|ssh):\/\/(?:([^@/]+)@)?([^:/]+)(?::([0-9]+))?(\/.*)$/.exec(url);
  if (withScheme) {
    const [, scheme, user, host, port, path] = withScheme;
    return {
      scheme: scheme as RepositoryUrlParts['scheme'],
      ...(user ? { user } : {}),
      host: host!,
      ...(port ? { port: Number(port) } : {}),
      path: path!,
    };
  }
  const scp = /^([^@]+)@([^:]+):(.*)$/.exec(url)!;
  return { scheme: 'ssh', user: scp[1]!, host: scp[2]!, path: scp[3]! };
}

/** `scheme://host[:port]`: what git names in its credential prompts for an http(s) URL. */
export function repositoryOrigin(parts: RepositoryUrlParts): string {
  return `${parts.scheme}://${parts.host}${parts.port === undefined ? '' : `:${parts.port}`}`;
}

/**
 * Why a URL is not canonical, in words that say what to write instead. Only for messages: the
 * decision is isCanonicalRepositoryUrl's. Checks the likeliest mistakes first.
 */
export function nonCanonicalReason(url: string): string {
  const afterScheme = url.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//, '');
  const checks: Array<[RegExp | ((text: string) => boolean), string]> = [
    [/^-/, 'it starts with "-", which git would read as an option'],
    [/^[A-Za-z][A-Za-z0-9+.-]*::/, 'it uses a git remote helper ("transport::address"), which runs commands'],
    [/[^\x21-\x7e]/, 'it contains whitespace, a control character or a non-ASCII character (write an IDN host in its xn-- form)'],
    [/\\/, 'it contains a backslash, which git and the URL standard read differently'],
    [/%/, 'it contains percent-encoding ("%"), which git or the server would decode into another path; write the characters plainly'],
    [/[?#]/, 'it has a query or fragment, which a git remote does not use'],
    [/^[A-Za-z]*[A-Z][A-Za-z]*:/, 'its scheme has uppercase letters; write it in lowercase'],
    [/^(ftp|ftps|rsync|data|javascript):/, 'its scheme is not a git remote (use https, ssh or git)'],
    [
      /^(https?|git):\/\/[^/]*@/,
      'it carries credentials or a user; put the token in a Secret and name it in spec.repository.credentialsSecretRef',
    ],
    [/^[a-z]+:\/\/[^/]*[A-Z]/, 'its host has uppercase letters; write the host in lowercase'],
    [/^[A-Za-z0-9._-]+@[^:/]*[A-Z][^:/]*:/, 'its host has uppercase letters; write the host in lowercase'],
    [/^[a-z]+:\/\/(?:[^@/]*@)?[^/:]*\.(?:[:/]|$)/, 'its host ends with a dot; leave the trailing dot out'],
    [/^[A-Za-z0-9._-]+@[^:/]*\.:/, 'its host ends with a dot; leave the trailing dot out'],
    [new RegExp(DEFAULT_PORT_URL), "it writes out its scheme's default port; leave the port out"],
    [/^[a-z]+:\/\/[^/]*:0/, 'its port has a leading zero'],
    [/^[a-z]+:\/\/[^/]*\[/, 'it names an IPv6 address, which is not supported; use a host name'],
    [/^(https|http|git|ssh):\/\/[^/]*$/, 'it names no repository path'],
    [/\/\.\.?(\/|$)|:\.\.?(\/|$)/, 'it has a "." or ".." path segment; write the path without them'],
    [() => afterScheme.includes('//') || afterScheme.endsWith('/'), 'it has an empty path segment ("//" or a trailing "/")'],
  ];
  for (const [check, reason] of checks) if (typeof check === 'function' ? check(url) : check.test(url)) return reason;
  if (/^file:/.test(url)) return 'a file URL must be file:///absolute/path with no host';
  if (!/^[a-z][a-z0-9+.-]*:\/\//.test(url) && !/^[^/:]+@[^/:]+:/.test(url)) {
    return 'it is not a repository URL (use https://host/owner/repo.git or git@host:owner/repo.git)';
  }
  if (/^[a-z][a-z0-9+.-]*:/.test(url) && !/^(https|http|git|ssh|file):\/\//.test(url)) {
    return `the scheme ${url.slice(0, url.indexOf(':'))} is not a git remote (use https or ssh)`;
  }
  return 'it is not in canonical form: see docs/repository-urls.md (lowercase host, no default port, path segments of A-Z a-z 0-9 . _ ~ + -)';
}
