// How long a user name (request.userInfo.username) the operator keeps, and how it cuts one, for
// separation of duties: the writers it records (status.template.writtenBy,
// status.continuedFrom.writtenBy) and the approver it reads (chamvi.dev/approver) are compared,
// by the operator and by the chart's approval policy, as exact strings. The policy bounds the
// approver's name with CEL's size(), which on a string counts Unicode code points, and the CRD's
// maxLength counts code points too; JavaScript's length and slice() count UTF-16 units. A cut in
// UTF-16 units disagreed with both, and one that fell inside a surrogate pair left a lone
// surrogate, which the API server stores as U+FFFD: a writer named 'u' + 300 emoji (301 code
// points, within the policy's bound) was recorded as a name no request carries, matched nobody,
// and could approve their own task. So names are counted and cut in code points, never splitting
// a pair, and an approver whose name is over the bound is refused outright rather than cut and
// compared (separation-of-duties.ts, approval-policy.yaml). Pure.
import { USER_NAME_MAX } from '../api/index.ts';

/** Longest user name kept, in code points (Kubernetes bounds none; OIDC subjects can be long): the CRD's bound on the names recorded. */
export { USER_NAME_MAX };

/** How much of a refused name a message quotes, in code points: enough to tell who, not the whole of an over-long name. */
export const USER_NAME_QUOTED = 64;

/** `name`'s first USER_NAME_MAX code points, as CEL's size() and the CRD's maxLength count them: a pair is kept whole or left out. */
export function cutUserName(name: string): string {
  return firstCodePoints(name, USER_NAME_MAX);
}

/** `name`'s first USER_NAME_QUOTED code points, for a message (a pair is kept whole or left out). */
export function quotedUserName(name: string): string {
  return firstCodePoints(name, USER_NAME_QUOTED);
}

/** How many code points `name` has, as CEL's size() counts them. */
export function userNameLength(name: string): number {
  return Array.from(name).length;
}

function firstCodePoints(name: string, max: number): string {
  // Each code point takes at least one UTF-16 unit: a name this short has no more code points than the bound.
  if (name.length <= max) return name;
  let end = 0;
  let kept = 0;
  for (const codePoint of name) {
    if (kept === max) break;
    end += codePoint.length;
    kept += 1;
  }
  return name.slice(0, end);
}

/** Whether `name` is longer than the operator records, counted as the policy's size() counts it: such a name would be cut. */
export function userNameTooLong(name: string): boolean {
  return cutUserName(name).length < name.length;
}
