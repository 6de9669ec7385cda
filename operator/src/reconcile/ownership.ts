// Whether an object is one the operator made for a run. A name (even a uid-derived one) or a
// label is no proof: anyone who can create pods or ConfigMaps in the namespace can give one
// any name and labels. What the operator itself writes on everything it makes is the
// controller ownerReference to the run's uid, so that, with the operator's labels, is what
// "ours" means. The controller, the workers and the plugin all ask here.
import { API_VERSION, KIND, RUN_UID_LABEL } from '../api/index.ts';
import { shortField } from './short-field.ts';

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'chamvi-operator';

interface OwnerReferenceLike {
  apiVersion?: string;
  kind?: string;
  uid?: string;
  name?: string;
  controller?: boolean;
}

/** The parts of an object's metadata that ownership is judged by. */
export interface OwnedMetadata {
  metadata?: { labels?: Record<string, string>; ownerReferences?: OwnerReferenceLike[] } | undefined;
}

/** The uid of the CodingRun that controls the object, if one does. */
export function controllingRunUid(object: OwnedMetadata): string | undefined {
  const controller = object.metadata?.ownerReferences?.find((reference) => reference.controller === true);
  return controller && controller.apiVersion === API_VERSION && controller.kind === KIND ? controller.uid : undefined;
}

/** The name of the CodingRun that controls the object, if one does (the run's key, whatever its length). */
export function controllingRunName(object: OwnedMetadata): string | undefined {
  const controller = object.metadata?.ownerReferences?.find((reference) => reference.controller === true);
  return controller && controller.apiVersion === API_VERSION && controller.kind === KIND ? controller.name : undefined;
}

/** The object carries the operator's labels for the run and the run is its controller. */
export function isOwnedByRun(object: OwnedMetadata, run: { metadata: { uid: string } }): boolean {
  const labels = object.metadata?.labels ?? {};
  const uid = run.metadata.uid;
  return Boolean(uid) && labels[MANAGED_BY_LABEL] === MANAGED_BY && labels[RUN_UID_LABEL] === uid && controllingRunUid(object) === uid;
}

/**
 * Why an object is not the run's, for messages that say what was found: the controller's kind
 * and uid cut short (short-field.ts), since whoever made the object chose them, at any length.
 */
export function whyNotOwned(object: OwnedMetadata, run: { metadata: { uid: string } }): string {
  const controller = object.metadata?.ownerReferences?.find((reference) => reference.controller === true);
  if (!controller) return 'it has no controller ownerReference';
  if (controllingRunUid(object) !== run.metadata.uid)
    return `its controller is ${shortField(controller.kind ?? '?')} ${shortField(controller.uid ?? '?')}, not this run (${run.metadata.uid})`;
  return "it lacks the operator's labels for this run";
}
