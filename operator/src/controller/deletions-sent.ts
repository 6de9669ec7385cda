// Deletions this process sent that its caches may not show yet. A reconcile on a pod cache
// that has not seen the pod's deletionTimestamp yet (or a policy cache that still holds a
// deleted policy) would send the same DELETE again: a finished run's pod was deleted twice
// and its policy 1.4 times. Each entry holds the uid of what was deleted, and is dropped
// once the cache shows no object of that name, or another one (a new uid).
import type { KubernetesObject } from '@kubernetes/client-node';

type Kind = 'Pod' | 'NetworkPolicy' | 'ConfigMap';

export class DeletionsSent {
  /** run key -> `kind/name` -> uid deleted. */
  private readonly sent = new Map<string, Map<string, string>>();

  /** A DELETE of this object went out for the run. */
  note(runKey: string, kind: Kind, object: KubernetesObject | undefined): void {
    const uid = object?.metadata?.uid;
    const name = object?.metadata?.name;
    if (!uid || !name) return;
    let ofRun = this.sent.get(runKey);
    if (!ofRun) this.sent.set(runKey, (ofRun = new Map()));
    ofRun.set(`${kind}/${name}`, uid);
  }

  /**
   * Whether `cached` (the object the cache holds at `name`) is one this process already
   * deleted; an entry the cache has moved past (no object, another uid) is forgotten.
   */
  deleted(runKey: string, kind: Kind, name: string, cached: KubernetesObject | undefined): boolean {
    const ofRun = this.sent.get(runKey);
    const uid = ofRun?.get(`${kind}/${name}`);
    if (!ofRun || uid === undefined) return false;
    if (cached?.metadata?.uid === uid) return true;
    ofRun.delete(`${kind}/${name}`);
    if (ofRun.size === 0) this.sent.delete(runKey);
    return false;
  }

  /** The run is gone from the cache: nothing of it is looked at again. */
  forgetRun(runKey: string): void {
    this.sent.delete(runKey);
  }
}
