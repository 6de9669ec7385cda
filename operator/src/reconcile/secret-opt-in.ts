// Security #11.3: a Secret is used by runs only when it says so. Pure.
//
// Why a label, not a SubjectAccessReview on the run's creator: a SAR needs a trustworthy
// record of who created the run, and by default nothing records one (a field or annotation
// the run carries is written by the run author; the chart's optional separationOfDuties
// policy checks chamvi.dev/created-by, but needs Kubernetes 1.30+ and may be off). The label is set by whoever may write the Secret, which is the party
// whose key is at stake; it is visible on the Secret (`kubectl get secrets -l ...` lists every
// Secret runs may use), works the same in `run --local`, and costs no extra API call. What
// it grants is plain: anyone who may create CodingRuns in the namespace may have the operator
// use every labelled Secret there (as a model key for an allowed endpoint, or as a git token
// for an allowed repository), never an unlabelled one.

export const USABLE_BY_RUNS_LABEL = 'chamvi.dev/usable-by-runs';
export const USABLE_BY_RUNS_VALUE = 'true';

export function isSecretUsableByRuns(labels: Readonly<Record<string, string>> | undefined): boolean {
  return labels?.[USABLE_BY_RUNS_LABEL] === USABLE_BY_RUNS_VALUE;
}

/** What to tell the run author (and whoever owns the Secret) when it is not marked. */
export function secretNotUsableMessage(namespace: string, name: string, field: string): string {
  return (
    `Secret ${namespace}/${name} named in ${field} is not marked for use by CodingRuns; if every run author in this namespace may use it, ` +
    `label it: kubectl label secret ${name} -n ${namespace} ${USABLE_BY_RUNS_LABEL}=${USABLE_BY_RUNS_VALUE}, then create the run again`
  );
}
