// Is a repository URL allowed by the operator's allowRepo patterns? Pure.
//
// Git treats some "URLs" as commands (`ext::sh -c ...`), options (`--upload-pack=...`) or
// local paths, and a glob can be fooled by look-alike hosts (`github.com.evil.io`) or
// owners (`acme-evil`). So the URL is first parsed and normalised, anything git could read
// as something other than a remote is refused outright, and only then is it matched,
// segment by segment, against the patterns.

export type RepoDecision = { allowed: true; normalized: string } | { allowed: false; message: string };

const REMOTE_SCHEMES = new Set(['https:', 'http:', 'ssh:', 'git:']);

/** `git@host:owner/repo.git` (scp-like) → `ssh://git@host/owner/repo.git`. */
function fromScpLike(url: string): string | undefined {
  const match = /^([A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):(?!\/\/)([^\s]+)$/.exec(url);
  if (!match) return undefined;
  return `ssh://${match[1] ?? ''}${match[2]}/${match[3]!.replace(/^\/+/, '')}`;
}

/** A canonical `scheme://host[:port]/path` for matching, or a refusal that says why. */
export function normalizeRepositoryUrl(raw: string, allowFileUrls: boolean): { url: string } | { refused: string } {
  if (raw.startsWith('-')) return { refused: 'it starts with "-", which git would read as an option' };
  if (/\s/.test(raw)) return { refused: 'it contains whitespace' };
  if (/^[A-Za-z][A-Za-z0-9+.-]*::/.test(raw)) return { refused: 'it uses a git remote helper ("transport::address"), which runs commands' };
  const scp = raw.includes('://') ? undefined : fromScpLike(raw);
  let parsed: URL;
  try {
    parsed = new URL(scp ?? raw);
  } catch {
    return { refused: 'it is not a URL (use https://host/owner/repo.git or git@host:owner/repo.git)' };
  }
  if (parsed.protocol === 'file:') {
    if (!allowFileUrls) return { refused: 'file:// URLs read the operator\'s own disk and are refused unless an admin allows a file:// pattern' };
    return { url: `file://${parsed.pathname}` };
  }
  if (!REMOTE_SCHEMES.has(parsed.protocol)) return { refused: `the scheme ${parsed.protocol.replace(':', '')} is not a git remote (use https or ssh)` };
  if (parsed.password || (parsed.username && parsed.protocol !== 'ssh:')) {
    return { refused: 'it carries credentials; put the token in a Secret and name it in spec.repository.credentialsSecretRef' };
  }
  if (parsed.search || parsed.hash) return { refused: 'it has a query or fragment, which a git remote does not use' };
  if (!parsed.hostname) return { refused: 'it names no host' };
  const user = parsed.username ? `${parsed.username}@` : '';
  return { url: `${parsed.protocol}//${user}${parsed.host.toLowerCase()}${parsed.pathname}` };
}

/** Patterns are written like URLs, so they get the same scp-like and host-case treatment. */
function normalizePattern(pattern: string): string {
  const url = pattern.includes('://') ? pattern : (fromScpLike(pattern) ?? pattern);
  return url.replace(/^([a-z]+:\/\/)([^/]*)/, (_, scheme: string, host: string) => scheme + host.toLowerCase());
}

/** Glob → RegExp: `*` is one path segment (no `/`), `**` any number of segments, `?` one character. */
export function globToRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i]!;
    if (char === '*' && pattern[i + 1] === '*') {
      source += '.*';
      i++;
    } else if (char === '*') {
      source += '[^/]*';
    } else if (char === '?') {
      source += '[^/]';
    } else {
      source += char.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}

export function isRepositoryAllowed(url: string, allowRepo: readonly string[]): RepoDecision {
  if (allowRepo.length === 0) {
    return {
      allowed: false,
      message: 'no repository is allowed yet: an admin must add a pattern such as https://github.com/acme/* to the operator\'s allowRepo',
    };
  }
  const allowFileUrls = allowRepo.some((pattern) => pattern.startsWith('file://'));
  const normalized = normalizeRepositoryUrl(url, allowFileUrls);
  if ('refused' in normalized) return { allowed: false, message: `repository ${url} is refused because ${normalized.refused}` };
  const matches = allowRepo.some((pattern) => globToRegExp(normalizePattern(pattern)).test(normalized.url));
  if (!matches) {
    return {
      allowed: false,
      message: `repository ${url} does not match the operator's allowRepo (${allowRepo.join(', ')}); ask an admin to allow it or use an allowed repository`,
    };
  }
  return { allowed: true, normalized: normalized.url };
}
