// The grammar of an egress host pattern (spec.sandbox.egress.allow, and the operator's
// allowEgress and allowPrivateDestinations): a lower-case DNS name, `*.` before one to take
// every name under it, or `*` alone for every name; an optional `:port`. One regex, used by
// the CRD (so `kubectl apply` refuses a bad pattern), the operator config and the proxy.
//
// The last label must start with a letter, which is what keeps IP literals out: 10.0.0.1,
// 2130706433 and 0x7f.1 all end in a label starting with a digit, and IPv6 has colons.
// Egress is by name only; an address would bypass every name check the proxy makes.
const LABEL = '[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?';
const LAST_LABEL = '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?';
/** A host name as the proxy accepts one in a request (after lower-casing and dropping a final dot). */
export const HOST_NAME_SOURCE = `(?:${LABEL}\\.)*${LAST_LABEL}`;
const PORT = '(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';

export const EGRESS_PATTERN = new RegExp(`^(?:\\*|(?:\\*\\.)?${HOST_NAME_SOURCE})(?::${PORT})?$`);
export const HOST_NAME = new RegExp(`^${HOST_NAME_SOURCE}$`);
/** Longest pattern: a 253-character name, `*.` and `:65535`. */
export const EGRESS_PATTERN_MAX = 261;
/** Most patterns one run may list. */
export const EGRESS_ALLOW_MAX = 64;

export const EGRESS_PATTERN_MESSAGE =
  'must be a lower-case host name with an optional port, such as registry.npmjs.org, *.pythonhosted.org, proxy.golang.org:443 or *; ' +
  'IP addresses are refused (egress is by name only)';
