// The whole CodingRun object as the operator reads it from the API server.
import type { CodingRunSpec, CodingRunSpecInput } from './coding-run-spec.ts';
import type { CodingRunStatus } from './coding-run-status.ts';

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** A run as stored: the spec is whatever the API server accepted (defaults applied by it). */
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
