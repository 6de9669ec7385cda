// The whole CodingRun object as the operator reads it from the API server.
import type { CodingRunSpec, CodingRunSpecInput } from './coding-run-spec.ts';
import type { CodingRunStatus } from './coding-run-status.ts';
import type { ObjectMeta } from './object-meta.ts';

export type { ObjectMeta };

/**
 * A run as stored: the spec as its author wrote it (the CRD applies no defaults). With
 * spec.templateRef, task, repository and model may be absent: read a run's spec through
 * parseSpec or effectiveSpecInput (reconcile/), never field by field from here.
 */
export interface CodingRun {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: CodingRunSpecInput;
  status?: CodingRunStatus;
}

/** A run whose spec the operator has parsed (defaults filled, cross-field rules checked). */
export interface ParsedCodingRun extends Omit<CodingRun, 'spec'> {
  spec: CodingRunSpec;
}
