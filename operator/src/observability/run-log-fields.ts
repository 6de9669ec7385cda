// The fields that tie a log line to one run. Every line about a run carries them, with the
// same names, so `jq 'select(.uid=="...")'` (or a log query on namespace and name) shows
// a run's whole story across the controller and every worker replica.
export interface RunLogFields {
  namespace: string;
  name: string;
  uid?: string;
}

export function runLogFields(run: { metadata: { namespace?: string; name?: string; uid?: string } }): RunLogFields {
  const fields: RunLogFields = { namespace: run.metadata.namespace ?? '', name: run.metadata.name ?? '' };
  if (run.metadata.uid) fields.uid = run.metadata.uid;
  return fields;
}
