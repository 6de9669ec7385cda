// Which repositories run --local may clone. Local mode runs on the user's own machine for
// the user, so there is no allowRepo to consult: any remote, any file:// URL and any local
// path is allowed. What stays refused is any URL that is not canonical (security #11.2): what
// git would read as something other than a repository (an option such as --upload-pack, a
// remote helper such as ext::) or read differently from the check, as the operator refuses it.
import { homedir } from 'node:os';
import path from 'node:path';

/**
 * allowRepo patterns that allow every canonical URL (reconcile/canonical-repository-url.ts), file://
 * included: a URL git could read as something else is still refused, as by the operator.
 */
export const LOCAL_ALLOW_REPO: readonly string[] = ['https://*/**', 'http://*/**', 'git://*/**', 'ssh://*/**', '*@*:**', 'file:///**'];

/**
 * A local path (`/srv/repo`, `./repo`, `../repo`, `~/code/repo`, `repo`) as a file:// URL,
 * resolved against `directory` (the manifest's); URLs and scp-like `host:path` pass as given.
 */
export function localRepositoryUrl(url: string, directory: string): string {
  if (url.includes('://') || url.startsWith('-')) return url;
  // A colon before the first slash is git's scp-like syntax (git@host:owner/repo) or a
  // remote helper (ext::...), not a path.
  const colon = url.indexOf(':');
  const slash = url.indexOf('/');
  if (colon >= 0 && (slash < 0 || colon < slash)) return url;
  const expanded = url === '~' || url.startsWith('~/') ? path.join(homedir(), url.slice(1)) : url;
  // Not pathToFileURL: its percent-encoding is refused (git decodes it, the check would not), so
  // the path goes in as it is, and a path the canonical grammar cannot carry (a space, a
  // non-ASCII letter) is refused naming that character.
  return `file://${path.resolve(directory, expanded)}`;
}
