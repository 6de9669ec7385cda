// Is a repository URL allowed by the operator's allowRepo patterns? Pure.
//
// Security #11.2: the URL must already be canonical (canonical-repository-url.ts); nothing is
// re-spelt, so the string that matched a pattern is the string git gets (a CheckedRepositoryUrl).
// The patterns are globs compiled to RE2 expressions, exactly as the chart's admission policy
// compiles them (templates/_helpers.tpl, `chamvi.allowRepoRegexes`): the decision here is
//   canonical(url) && (some plain pattern matches && the host has no xn-- label
//                      || some pattern that names xn-- matches)
// and the chart's CEL is the same expression over the same strings.

import { hasPunycodeHost, isCanonicalRepositoryUrl, nonCanonicalReason } from './canonical-repository-url.ts';

declare const checked: unique symbol;
/** A repository URL that passed isRepositoryAllowed: the only kind cloneRepository takes. */
export type CheckedRepositoryUrl = string & { readonly [checked]: true };

export type RepoDecision = { allowed: true; url: CheckedRepositoryUrl } | { allowed: false; message: string };

/** The only characters a pattern may have: a canonical URL's and the wildcards (the chart's schema checks this too). */
export const ALLOW_REPO_PATTERN_CHARACTERS = /^[A-Za-z0-9._~+:/@*?-]+$/;

/**
 * What a pattern must look like: with each run of wildcards replaced by `1` (which fits every part
 * of the grammar: a host label, a port, a path segment, an ssh user), a canonical URL.
 */

export function allowRepoPatternProblem(pattern: string): string | undefined {
  if (!ALLOW_REPO_PATTERN_CHARACTERS.test(pattern)) {
    return `allowRepo pattern ${JSON.stringify(pattern)} has characters no canonical repository URL has (allowed: A-Z a-z 0-9 . _ ~ + - : / @ and the wildcards * ** ?)`;
  }
  const probe = pattern.replace(/[*?]+/g, '1');
  if (!isCanonicalRepositoryUrl(probe)) {
    return `allowRepo pattern ${pattern} can never match a canonical repository URL: ${nonCanonicalReason(probe)} (see docs/repository-urls.md)`;
  }
  return undefined;
}

/** Go's regexp.QuoteMeta, which the chart's regexQuoteMeta is: the same characters, the same escapes. */
function quoteMeta(text: string): string {
  return text.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
}

/**
 * A glob as an RE2 expression, character for character what `chamvi.allowRepoRegexes` renders:
 * `**` any characters, `*` any characters but `/`, `?` one character but `/`.
 */
export function allowRepoPatternRegex(pattern: string): string {
  const quoted = quoteMeta(pattern)
    .replaceAll('\\*\\*', '\u0000')
    .replaceAll('\\*', '[^/]*')
    .replaceAll('\\?', '[^/]')
    .replaceAll('\u0000', '.*');
  return `^${quoted}$`;
}

/** Only a pattern that spells out `xn--` may match a punycode host (the chart splits the list the same way). */
export function patternNamesPunycode(pattern: string): boolean {
  return pattern.includes('xn--');
}

export function isRepositoryAllowed(url: string, allowRepo: readonly string[]): RepoDecision {
  if (allowRepo.length === 0) {
    return {
      allowed: false,
      message: "no repository is allowed yet: an admin must add a pattern such as https://github.com/acme/* to the operator's allowRepo",
    };
  }
  if (!isCanonicalRepositoryUrl(url)) {
    // Shown quoted (escaped) when it holds characters a terminal could act on.
    const shown = /^[\x21-\x7e]*$/.test(url) ? url : JSON.stringify(url);
    return { allowed: false, message: `repository ${shown} is refused because ${nonCanonicalReason(url)}` };
  }
  // Patterns the config refused never reach here in the operator; skipping them keeps the rule
  // "an invalid pattern matches nothing", which is also what a failed `helm template` leaves.
  const punycode = hasPunycodeHost(url);
  const matches = allowRepo.some(
    (pattern) =>
      allowRepoPatternProblem(pattern) === undefined &&
      (!punycode || patternNamesPunycode(pattern)) &&
      new RegExp(allowRepoPatternRegex(pattern)).test(url),
  );
  if (!matches) {
    const hint = punycode ? ' (its host has a punycode xn-- label, which only a pattern naming that xn-- label allows)' : '';
    return {
      allowed: false,
      message: `repository ${url} does not match the operator's allowRepo (${allowRepo.join(', ')})${hint}; ask an admin to allow it or use an allowed repository`,
    };
  }
  return { allowed: true, url: url as CheckedRepositoryUrl };
}
