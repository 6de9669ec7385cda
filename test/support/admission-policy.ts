// A ValidatingAdmissionPolicy and its binding that a test puts in front of chamvi.dev objects in
// its own namespace, so the real API server refuses what the test wants refused (a run on some
// repository, the operator's finalizer) and the test can see what the operator makes of it.
import { stringify } from 'yaml';
import { kubectl, kubectlOk } from './cluster.ts';

/** CEL that refuses an object carrying the operator's finalizer: holds a run before its sandbox. */
export const REFUSE_CLEANUP_FINALIZER =
  "!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == 'chamvi.dev/cleanup')";

export interface TestAdmissionPolicy {
  /** The name of both the policy and its binding; cluster-scoped, so unique across tests. */
  name: string;
  /** The binding matches objects in this namespace only, so no other test's runs are refused. */
  namespace: string;
  /** The writes judged. */
  operations: ('CREATE' | 'UPDATE' | 'DELETE')[];
  /** chamvi.dev resources judged; codingruns unless given. */
  resources?: string[];
  /** When given, only objects carrying this label (any value) are judged. */
  label?: string;
  /** CEL that must hold, the refusal's message, and its reason (the API server's default, Invalid, unless given). */
  validation: { expression: string; message: string; reason?: string };
}

/** The policy and its binding, in the order to apply them. */
export function admissionPolicyManifests(policy: TestAdmissionPolicy): object[] {
  const { name, namespace, operations, resources = ['codingruns'], label, validation } = policy;
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: { resourceRules: [{ apiGroups: ['chamvi.dev'], apiVersions: ['*'], operations, resources }] },
        ...(label === undefined
          ? {}
          : { matchConditions: [{ name: 'labelled', expression: `has(object.metadata.labels) && '${label}' in object.metadata.labels` }] }),
        validations: [validation],
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name },
      spec: {
        policyName: name,
        validationActions: ['Deny'],
        matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } },
      },
    },
  ];
}

/**
 * Applies the policy and its binding (throwing with kubectl's stderr when it fails) and resolves
 * to the function that deletes both. The API server enforces a new policy a moment later: the
 * caller waits until it refuses a probe.
 */
export async function applyAdmissionPolicy(policy: TestAdmissionPolicy): Promise<() => Promise<void>> {
  await kubectlOk(['apply', '-f', '-'], {
    input: admissionPolicyManifests(policy)
      .map((manifest) => stringify(manifest))
      .join('---\n'),
  });
  return async () => {
    await kubectl(['delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', policy.name, '--ignore-not-found']);
  };
}
