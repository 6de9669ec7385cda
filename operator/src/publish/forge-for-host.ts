// Which forge API a repository's host speaks, and where: the first publish.forges entry whose
// host pattern matches, then the two public forges everyone means by their names. Pure.
//
// The API URL gets the run's push token, so it is either the admin's (config) or the
// repository's own origin: a run can never choose where its token is sent.
import type { RepositoryUrlParts } from '../reconcile/canonical-repository-url.ts';
import type { ForgeKind } from './forge-kinds.ts';

export interface ForgeEntry {
  host: string;
  kind: ForgeKind;
  apiURL?: string | undefined;
}

export interface ForgeLocation {
  kind: ForgeKind;
  /** Base URL of the API, without a trailing slash. */
  apiURL: string;
  /** The repository on the forge: owner/name (GitLab: the full path with subgroups). */
  repository: string;
}

const KNOWN: readonly ForgeEntry[] = [
  { host: 'github.com', kind: 'github', apiURL: 'https://api.github.com' },
  { host: 'gitlab.com', kind: 'gitlab', apiURL: 'https://gitlab.com/api/v4' },
];

const API_PATH: Record<ForgeKind, string> = { github: '/api/v3', gitlab: '/api/v4', gitea: '/api/v1' };

function hostMatches(pattern: string, host: string, port: number | undefined): boolean {
  const colon = pattern.lastIndexOf(':');
  const patternHost = colon >= 0 ? pattern.slice(0, colon) : pattern;
  const patternPort = colon >= 0 ? Number(pattern.slice(colon + 1)) : undefined;
  if (patternPort !== port) return false;
  return patternHost.startsWith('*.') ? host.endsWith(patternHost.slice(1)) : host === patternHost;
}

/** owner/name from the URL's path: without the leading / and a trailing .git. */
export function repositoryPath(parts: RepositoryUrlParts): string {
  return parts.path.replace(/^\/+/, '').replace(/\.git$/, '');
}

/** Where to open pull requests for this repository, or undefined when no entry covers its host. */
export function forgeFor(parts: RepositoryUrlParts, entries: readonly ForgeEntry[]): ForgeLocation | undefined {
  if (parts.scheme !== 'https' && parts.scheme !== 'http') return undefined;
  const entry = [...entries, ...KNOWN].find((each) => hostMatches(each.host, parts.host, parts.port));
  if (!entry) return undefined;
  const origin = `${parts.scheme}://${parts.host}${parts.port === undefined ? '' : `:${parts.port}`}`;
  const apiURL = (entry.apiURL ?? `${origin}${API_PATH[entry.kind]}`).replace(/\/+$/, '');
  return { kind: entry.kind, apiURL, repository: repositoryPath(parts) };
}
