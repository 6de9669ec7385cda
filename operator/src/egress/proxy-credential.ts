// The per-run proxy credential. The sandbox authenticates to the egress proxy with
// Proxy-Authorization: Basic base64(<run uid>:<token>), token = HMAC-SHA256(egressKey, run uid).
//
// Why an HMAC and not a random secret stored per run: the proxy can verify it with nothing
// but the shared key, so there is no per-run Secret to create, read, watch, leak from etcd or
// forget to delete, and no window where the proxy has not seen a new one yet. What an HMAC
// alone cannot do, end with the run, the proxy does by looking the uid up among the live
// runs (egress/run-directory.ts): a run that finished or was deleted has no entry, so its
// token opens nothing even though it still verifies. A uid is never reused, so a token names
// one run for ever and is useless to any other (whose uid it does not sign).
//
// This credential is deliberately inside the sandbox (SECURITY.md): it can open only the
// hosts of its own run, only while the run lives, and only from where the proxy is reachable.
import { createHmac, timingSafeEqual } from 'node:crypto';

const DOMAIN = 'chamvi-egress-v1\n';
/** A Kubernetes uid: a UUID, which is also what keeps `:` out of the user name. */
const RUN_UID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function proxyToken(egressKey: string, runUid: string): string {
  return createHmac('sha256', egressKey)
    .update(DOMAIN + runUid)
    .digest('base64url');
}

export interface ProxyCredential {
  runUid: string;
  token: string;
}

export function issueProxyCredential(egressKey: string, runUid: string): ProxyCredential {
  return { runUid, token: proxyToken(egressKey, runUid) };
}

export type CredentialCheck = { ok: true; runUid: string } | { ok: false; why: 'missing' | 'malformed' | 'bad-token' };

/** Verify a Proxy-Authorization header value: Basic, a run uid, and that run's token. */
export function checkProxyAuthorization(header: string | undefined, egressKey: string): CredentialCheck {
  if (!header) return { ok: false, why: 'missing' };
  const match = /^Basic\s+([A-Za-z0-9+/=]{1,512})$/i.exec(header.trim());
  if (!match) return { ok: false, why: 'malformed' };
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return { ok: false, why: 'malformed' };
  const runUid = decoded.slice(0, colon);
  const token = Buffer.from(decoded.slice(colon + 1));
  if (!RUN_UID.test(runUid)) return { ok: false, why: 'malformed' };
  const expected = Buffer.from(proxyToken(egressKey, runUid));
  if (token.length !== expected.length || !timingSafeEqual(token, expected)) return { ok: false, why: 'bad-token' };
  return { ok: true, runUid };
}
