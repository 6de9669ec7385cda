// The NetworkPolicies that fence in run sandboxes: one pair per namespace, not one per run.
// Pure: what the policies are, and whether one the API server holds is as the operator wants.
//
// NetworkPolicies add up: a pod selected by any policy of a type is isolated for that type,
// and may do what some policy selecting it allows. So:
// - the namespace's deny-all selects every pod that carries a run's uid label (every run's
//   sandbox pod, from its creation, and every claimed warm pool pod) and allows nothing;
// - the namespace's egress policy selects only the pods of runs with spec.sandbox.egress
//   (they carry EGRESS_LABEL) and allows them the egress proxy, on its port, and nothing else.
// Together they allow each pod exactly what its own per-run policy allowed before, with one
// create per namespace instead of a create and a delete per run. Which hosts a run reaches
// through the proxy is still the run's own: the proxy checks the run's credential against the
// run's egress list (egress/), so sharing the path to the proxy shares nothing else.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { RUN_UID_LABEL, type ParsedCodingRun } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { egressRules, wantsEgress } from './sandbox-egress.ts';

/** The deny-all's name. Run-derived names end in `-<hash>-<suffix>` and pool policies in `-warm-pool-deny-all`: neither can be it. */
export const SANDBOX_DENY_ALL_POLICY = 'chamvi-sandboxes-deny-all';
/** The egress policy's name. */
export const SANDBOX_EGRESS_POLICY = 'chamvi-sandboxes-egress-proxy';

/** On the sandbox pod of a run with egress: the egress policy selects it. */
export const EGRESS_LABEL = 'chamvi.dev/egress';
export const EGRESS_LABEL_VALUE = 'proxy';

/** On both policies: which of the two a policy is (and, with managed-by, that the operator made it). */
export const SANDBOX_POLICY_LABEL = 'chamvi.dev/sandbox-policy';

const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'chamvi-operator' };
const HAS_RUN_UID = { key: RUN_UID_LABEL, operator: 'Exists' };

type EgressConfig = Pick<OperatorConfig, 'egressProxy' | 'egressKey'>;

/** Every sandbox pod in the namespace: no ingress, no egress. */
export function sandboxDenyAllPolicy(namespace: string): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: SANDBOX_DENY_ALL_POLICY, namespace, labels: { ...MANAGED_BY, [SANDBOX_POLICY_LABEL]: 'deny-all' } },
    spec: {
      podSelector: { matchExpressions: [HAS_RUN_UID] },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    },
  };
}

/** The sandbox pods of runs with egress: egress to the proxy alone (sandbox-egress.ts). */
export function sandboxEgressPolicy(namespace: string, config: EgressConfig): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: SANDBOX_EGRESS_POLICY, namespace, labels: { ...MANAGED_BY, [SANDBOX_POLICY_LABEL]: 'egress-proxy' } },
    spec: {
      podSelector: { matchLabels: { [EGRESS_LABEL]: EGRESS_LABEL_VALUE }, matchExpressions: [HAS_RUN_UID] },
      policyTypes: ['Egress'],
      egress: egressRules(config),
    },
  };
}

/**
 * The policies a run's sandbox needs in its namespace before its pod exists: the deny-all,
 * and for a run with egress the egress policy. No owner: they outlive every run, and they
 * only ever fence pods in (a namespace with no runs left keeps two policies selecting nothing).
 */
export function sandboxPoliciesFor(run: ParsedCodingRun, config: EgressConfig): V1NetworkPolicy[] {
  const namespace = run.metadata.namespace;
  return [sandboxDenyAllPolicy(namespace), ...(wantsEgress(run) ? [sandboxEgressPolicy(namespace, config)] : [])];
}

/** The labels a run's sandbox pod needs for these policies beyond the run's own. */
export function sandboxPolicyPodLabels(run: ParsedCodingRun): Record<string, string> {
  return wantsEgress(run) ? { [EGRESS_LABEL]: EGRESS_LABEL_VALUE } : {};
}

/**
 * Whether `found` is `wanted` as the operator made it: the same name and namespace, the
 * operator's labels, the same spec. Anything else under the name (someone's edit, a policy
 * of an operator with another egress proxy, a foreign object) is not: a policy that is not
 * exactly this one could allow what this one does not.
 */
export function isSandboxPolicyAsWanted(found: V1NetworkPolicy | undefined, wanted: V1NetworkPolicy): boolean {
  if (!found) return false;
  const labels = found.metadata?.labels ?? {};
  return (
    found.metadata?.namespace === wanted.metadata!.namespace &&
    found.metadata?.name === wanted.metadata!.name &&
    Object.entries(wanted.metadata!.labels!).every(([key, value]) => labels[key] === value) &&
    canonical(normalSpec(found)) === canonical(normalSpec(wanted))
  );
}

/** Whether the operator made `policy` as one of these (its labels; its spec may differ). */
export function isSandboxPolicyLabelled(policy: V1NetworkPolicy): boolean {
  const labels = policy.metadata?.labels ?? {};
  return (
    labels['app.kubernetes.io/managed-by'] === MANAGED_BY['app.kubernetes.io/managed-by'] && labels[SANDBOX_POLICY_LABEL] !== undefined
  );
}

/** JSON with sorted keys and no undefined: an answer's own key order, or its class instances, change nothing. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(
          Object.entries(item)
            .filter(([, v]) => v !== undefined)
            .sort(([a], [b]) => (a < b ? -1 : 1)),
        )
      : item,
  );
}

/** The API server leaves out empty lists; compare without them. */
function normalSpec(policy: V1NetworkPolicy) {
  const spec = policy.spec ?? { podSelector: {} };
  const list = <T>(items: T[] | undefined) => (items && items.length > 0 ? items : undefined);
  return {
    podSelector: {
      matchLabels:
        spec.podSelector?.matchLabels && Object.keys(spec.podSelector.matchLabels).length > 0 ? spec.podSelector.matchLabels : undefined,
      matchExpressions: list(spec.podSelector?.matchExpressions),
    },
    policyTypes: [...(spec.policyTypes ?? [])].sort(),
    ingress: list(spec.ingress),
    egress: list(spec.egress),
  };
}
