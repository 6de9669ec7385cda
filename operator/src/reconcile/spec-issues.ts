// What zod found wrong with a schedule's spec, or with the run spec it makes, said in one
// message a status condition can hold. Both the field paths and the whole message are bounded:
// a map key is part of a path, and the CRD cannot bound map keys (a 40 000-character label key
// in spec.runTemplate.metadata.labels passed the API server), so a message that quoted paths
// whole outgrew the Ready condition's 32 768 characters. The status write was then refused, the
// reconcile threw at every retry, and the schedule still read Ready True. Pure.
import { shortField } from './short-field.ts';

/** The most characters of one message listing a spec's issues (its lead included). */
export const SPEC_ISSUES_MAX_CHARACTERS = 4000;
/** Characters of a map key a path quotes at most: a label key's name part is at most 63, its prefix 253. */
const PATH_KEY_CHARACTERS = 100;

export interface SpecIssue {
  readonly path: ReadonlyArray<PropertyKey>;
  readonly message: string;
}

// A schema's own field names and list indexes read bare; anything else is a key a user wrote.
const BARE = /^(?:[A-Za-z_][A-Za-z0-9_]{0,62}|\d{1,9})$/;

/** `spec.sandbox.env.0.value`, or `spec.runTemplate.metadata.labels["team.example.com/x"]`: keys quoted and cut short. */
export function specFieldPath(path: ReadonlyArray<PropertyKey>): string {
  return path
    .map((segment) => {
      const key = typeof segment === 'symbol' ? (segment.description ?? '') : String(segment);
      return BARE.test(key) ? `.${key}` : `["${shortField(key, PATH_KEY_CHARACTERS).replaceAll('"', '\\"')}"]`;
    })
    .reduce((text, part) => text + part, 'spec');
}

/**
 * `lead` then each issue as `<path>: <message>`, as many as fit in SPEC_ISSUES_MAX_CHARACTERS,
 * then how many more there are; the first alone cut when even it does not fit.
 */
export function specIssuesMessage(lead: string, issues: readonly SpecIssue[]): string {
  const max = SPEC_ISSUES_MAX_CHARACTERS;
  const more = (left: number) => (left > 0 ? `; and ${left} more` : '');
  let message = lead;
  let shown = 0;
  for (const issue of issues) {
    const part = `${shown === 0 ? '' : '; '}${specFieldPath(issue.path)}: ${issue.message}`;
    if (message.length + part.length + more(issues.length - shown - 1).length > max) break;
    message += part;
    shown += 1;
  }
  if (shown === 0 && issues.length > 0) {
    const first = `${lead}${specFieldPath(issues[0]!.path)}: ${issues[0]!.message}`;
    message = cut(first, max - more(issues.length - 1).length);
    shown = 1;
  }
  return message + more(issues.length - shown);
}

/** At most `max` characters, the last an ellipsis when cut, never half a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = text.slice(0, max - 1);
  return `${/[\ud800-\udbff]$/.test(head) ? head.slice(0, -1) : head}…`;
}
