// The identity of the CodingRun API and the names the operator stamps on what it owns.
// One place, so the CRD generator, the controller and the CLI cannot disagree.

export const GROUP = 'chamvi.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = 'CodingRun';
export const PLURAL = 'codingruns';
export const SINGULAR = 'codingrun';
export const SHORT_NAMES = ['crun'] as const;

/** Finalizer that keeps a run until everything it owns is gone. */
export const FINALIZER = `${GROUP}/cleanup`;
/** Label on every object the operator creates for a run: the run's name. */
export const RUN_LABEL = `${GROUP}/run`;
/** Label with the run's UID, so a re-created run with the same name never adopts old objects. */
export const RUN_UID_LABEL = `${GROUP}/run-uid`;
