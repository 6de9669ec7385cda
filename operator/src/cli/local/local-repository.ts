// Which repositories run --local may clone. Local mode runs on the user's own machine for
// the user, so there is no allowRepo to consult: any remote, any file:// URL and any local
// path is allowed. What stays refused is what git would read as something other than a
// repository (an option such as --upload-pack, a remote helper such as ext::), through the
// same check the operator applies to allowRepo.
import { homedir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** allowRepo patterns that let every URL through normalizeRepositoryUrl's refusals, file:// included. */
export const LOCAL_ALLOW_REPO: readonly string[] = ['file://**', '**'];

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
  return pathToFileURL(path.resolve(directory, expanded)).href;
}
