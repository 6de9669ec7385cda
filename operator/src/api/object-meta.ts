// The metadata the operator reads of its own kinds (CodingRun, CodingEval, CodingSchedule):
// what the API server sets and what the operator keys on, nothing else of ObjectMeta.
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
