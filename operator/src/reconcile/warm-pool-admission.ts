// Whether the API server admitted a warm pool pod as the pool made it, judged on the create's
// answer (the pod as admitted) before the pool counts it. A mutating webhook that changes every
// pod (EKS's pod-identity webhook adds a projected token volume and AWS_* variables; a sidecar
// injector a container) makes every pool pod one no run may take (poolPodChanges, claimMarks):
// judged only later, from the cache, such a pod was taken for a planted one, deleted, and made
// again at every pass, for as long as the webhook was there. Pure: what changed, and what the
// admin reads about it.
import type { V1Pod } from '@kubernetes/client-node';
import type { OperatorConfig } from '../config/operator-config.ts';
import { describeAddition } from './admitted-pod.ts';
import { POOL_ISOLATION_LABEL, claimMarks, poolPodChanges, poolTemplateRun, warmPoolPod, type WarmPoolConfig } from './warm-pool.ts';

/** How many changes a log line names; a sidecar injector makes dozens. */
const NAMED = 8;

/**
 * What admission changed in `created` (the create's answer) from the pod the pool builds, each
 * in words: a label of the pool's taken off or changed, what only a claim puts on a pod (an owner, a run's label, activeDeadlineSeconds),
 * then what runs in it or rides into it (a volume, a variable, a container, an image). Empty
 * for a pod a run may take.
 */
export function admissionChanges(created: V1Pod, pool: WarmPoolConfig, config: OperatorConfig): string[] {
  // The labels the pool counts its pods by and its deny-all selects: taken off, the pod is neither counted nor isolated.
  const labels = created.metadata?.labels ?? {};
  const relabelled = Object.entries(warmPoolPod(pool, config, poolTemplateRun()).metadata!.labels!)
    .filter(([key, value]) => labels[key] !== value)
    .map(([key, value]) => `label ${key} (${labels[key] === undefined ? 'removed' : `set to ${labels[key]}`}; the pool sets ${value})`);
  return [
    ...relabelled,
    ...claimMarks(created).map((pointer) => `${pointer} (only a claim sets it)`),
    ...poolPodChanges(created, pool, config).map(describeAddition),
  ];
}

/** EKS's pod-identity webhook (IRSA) leaves these: then the message says exactly what to change. */
const IRSA_VARIABLES = /\b(AWS_ROLE_ARN|AWS_WEB_IDENTITY_TOKEN_FILE)\b/;

/**
 * The warning for a pool pod admission changed: which fields, why the pool deleted it and waits,
 * and how to exclude the pool's pods from the webhook. The rule it follows is not relaxed: a
 * pod that is not the pool's own pod is never handed to a run.
 */
export function admissionChangedMessage(pool: WarmPoolConfig, changes: readonly string[]): string {
  const named = changes.slice(0, NAMED).join(', ');
  const more = changes.length > NAMED ? ` and ${changes.length - NAMED} more` : '';
  const exclude =
    `exclude the pool's pods from the webhook (its objectSelector: ${POOL_ISOLATION_LABEL} DoesNotExist; ` +
    `every pod of pool ${pool.name} carries ${POOL_ISOLATION_LABEL}=${pool.name})`;
  const fix = changes.some((change) => IRSA_VARIABLES.test(change))
    ? `remove the eks.amazonaws.com/role-arn annotation from the default ServiceAccount of namespace ${pool.namespace}, which sandbox pods run as (EKS IRSA), or ${exclude}`
    : exclude;
  return (
    `admission changed the warm pool pod: ${named}${more}. ` +
    'A pod changed from what the pool made is never handed to a run, so it was deleted and the pool waits ' +
    `before it makes another (2 s, doubling up to 5 min, for as long as admission changes them): ${fix}`
  );
}
