// Whether the operator made a warm pool pod's claim, checkable by every replica. A claim's
// labels and owner are anyone's who may create or patch pods in the namespace, and which pods
// a pool loop made is one process's memory: a new leader (its predecessor stopped between the
// claim and the status write naming the pod) could not tell the claimed pod, where the prepare
// job was already sent, from a planted one, and gave the run a second, fresh pod. So a claim
// also writes an HMAC of (pod uid, run uid, pool namespace/name) under a key derived from the
// operator's stateKey: every replica has it, no run author can read it. The pod uid is read
// from the pod, so a seal copied onto another pod fails. Without a stateKey the key is this
// process's own, and another replica's claims are not recognised (the run takes a fresh pod,
// as it did; its state is lost on a hand-over anyway). Pure but for the key.
import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';

/** The annotation a claim writes: the seal of what it claimed. */
export const CLAIM_SEAL_ANNOTATION = 'chamvi.dev/claim-seal';

/** What a seal binds: this pod, claimed for this run, from this pool. */
export interface SealedClaim {
  podUid: string;
  runUid: string;
  pool: { namespace: string; name: string };
}

export class WarmPoolClaimSeal {
  private readonly key: KeyObject;

  /** `secret`: config.stateKey; derived apart from the run-state keys, so no MAC of one passes for another. */
  constructor(secret: string | Buffer) {
    this.key = createSecretKey(createHmac('sha256', secret).update('chamvi warm pool claim').digest());
  }

  /** A key for this process alone: its seals verify nowhere else. */
  static generated(): WarmPoolClaimSeal {
    return new WarmPoolClaimSeal(randomBytes(32));
  }

  seal(claim: SealedClaim): string {
    const text = JSON.stringify([claim.podUid, claim.runUid, claim.pool.namespace, claim.pool.name]);
    return createHmac('sha256', this.key).update(text).digest('base64url');
  }

  /** Whether `pod` carries the seal of its own claim (its own uid) for `runUid` from `pool`. */
  verifies(pod: V1Pod, runUid: string, pool: { namespace: string; name: string }): boolean {
    const given = pod.metadata?.annotations?.[CLAIM_SEAL_ANNOTATION];
    const podUid = pod.metadata?.uid;
    if (typeof given !== 'string' || podUid === undefined) return false;
    const wanted = Buffer.from(this.seal({ podUid, runUid, pool }));
    const got = Buffer.from(given);
    return got.length === wanted.length && timingSafeEqual(got, wanted);
  }
}
