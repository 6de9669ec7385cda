// The name of an Event about an object: the object's name, for a reader listing Events, then
// the time and a few random bytes, so two Events of one object in one millisecond still differ.
// An Event's name is meant to be a DNS subdomain (at most 253 characters), and a run's name may
// use all of that itself, so the name is cut. A cut may end in '-' or '.' (a run named
// `a…a-b…b` cut at the '-'), and `a…a-.1f2e` is no DNS subdomain. The core/v1 Event API does not
// check Event names today (kube-apiserver 1.34 takes any, for backward compatibility), but
// events.k8s.io/v1 does; the name stays valid so that a run's Events, the egress proxy's
// EgressDenied among them, do not depend on that leniency.
import { randomBytes } from 'node:crypto';

/** The most of the object's name an Event's name keeps: the rest is the suffix (at most 1 + 11 + 6 now). */
const PREFIX_CHARACTERS = 200;
/** What names an Event whose object's name leaves nothing once cut (no valid name does). */
const EMPTY_PREFIX = 'event';

/**
 * A DNS-subdomain name for an Event about `objectName` at `time`. `nonce` is 6 hex digits,
 * random unless given (tests).
 */
export function eventName(objectName: string, time: Date, nonce: string = randomBytes(3).toString('hex')): string {
  // As names.ts cuts names: the cut's trailing '-' and '.' go, so the next character is '.'
  // after a letter or digit. A valid name begins with one, so only an invalid one comes out empty.
  const prefix = objectName.slice(0, PREFIX_CHARACTERS).replace(/[-.]+$/, '') || EMPTY_PREFIX;
  return `${prefix}.${time.getTime().toString(16)}${nonce}`;
}
