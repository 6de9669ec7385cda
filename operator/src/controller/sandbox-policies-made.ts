// The namespaces' sandbox NetworkPolicies (reconcile/sandbox-network-policy.ts) this process
// made that its cache may not show yet. The runs of a namespace start in a burst: without
// this, every run reconciled between the first one's create and the watch's ADDED event would
// send a create of its own, and a 409 and a read after it. An entry lives only until the cache
// shows the policy, or the watch reports it deleted, so a policy deleted later shows as absent
// and is made again before another pod starts.
import type { V1NetworkPolicy } from '@kubernetes/client-node';

export interface PolicyCache {
  get(namespace: string, name: string): V1NetworkPolicy | undefined;
}

export class SandboxPoliciesMade {
  /** `namespace/name` -> the policy as this process made it (or found it as wanted). */
  private readonly made = new Map<string, V1NetworkPolicy>();

  constructor(private readonly cache: PolicyCache) {}

  /** This process made (or replaced, or found as wanted) `policy`. */
  note(policy: V1NetworkPolicy): void {
    this.made.set(key(policy.metadata!.namespace!, policy.metadata!.name!), policy);
  }

  /** The policy at `namespace/name` as far as this process knows: the cache's copy, else what it made. */
  seen(namespace: string, name: string): V1NetworkPolicy | undefined {
    const cached = this.cache.get(namespace, name);
    if (cached) {
      this.made.delete(key(namespace, name));
      return cached;
    }
    return this.made.get(key(namespace, name));
  }

  /** The watch reported the policy deleted: what this process made is not there any more. */
  forget(namespace: string, name: string): void {
    this.made.delete(key(namespace, name));
  }
}

const key = (namespace: string, name: string) => `${namespace}/${name}`;
