// Accepting a run: the spec parses, the repository, the model endpoint and the sandbox image
// are allowed by the operator's config, its publish branch renders to a branch name for this
// run, and every Secret and ConfigMap it names exists in its own namespace with the key it
// names (a Secret also opting in to runs by its label). Pure; a refusal carries the status
// reason and a message that says what to change.
import { codingRunSpec, REASONS, type CodingRun, type CodingRunSpec, type Reason } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { isEgressAllowed } from './allow-egress.ts';
import { isImageAllowed } from './allow-images.ts';
import { isRuntimeClassAllowed } from './allow-runtime-class.ts';
import { egressReadiness } from './sandbox-egress.ts';
import { isRepositoryAllowed } from './allow-repo.ts';
import { isModelEndpointAllowed } from './model-endpoints.ts';
import type { ReferencedObjects } from './observed-run.ts';
import { GROUP } from '../api/group.ts';
import { NO_NAMESPACE_POLICY, namespaceNarrowedConfig, type NamespacePolicy } from './namespace-policy.ts';
import { isSecretUsableByRuns, secretNotUsableMessage } from './secret-opt-in.ts';
import { effectiveSpecInput } from './run-template.ts';
import { renderedBranchProblem } from '../publish/publish-plan.ts';

export interface Refusal {
  reason: Reason;
  message: string;
}

export type SpecParse = { ok: true; spec: CodingRunSpec } | { ok: false; refusal: Refusal };

/**
 * The run's effective spec, parsed: its own, or (spec.templateRef) the template recorded when it
 * was accepted with its own fields laid over it (run-template.ts). Every reader of a run's spec
 * goes through here or effectiveSpecInput, so the operator checks the spec the worker runs.
 */
export function parseSpec(run: CodingRun): SpecParse {
  const input = effectiveSpecInput(run);
  if (!input.ok) return input;
  const result = codingRunSpec.safeParse(input.spec);
  if (result.success) return { ok: true, spec: result.data };
  const issue = result.error.issues[0]!;
  const where = input.template ? ` (the run's spec laid over CodingRunTemplate ${input.template})` : '';
  return {
    ok: false,
    refusal: {
      reason: REASONS.InvalidSpec,
      message: `spec.${issue.path.join('.')}: ${issue.message}${where}; fix the field and create the run again`,
    },
  };
}

interface Reference {
  kind: 'Secret' | 'ConfigMap';
  field: string;
  name: string;
  key: string;
}

/**
 * Every Secret and ConfigMap the run will read, each checked when it is accepted. The push
 * token too: a run whose publish Secret was missing or not offered to runs ran to its end,
 * spending its tokens (and maybe a human's approval of the push), and only then failed.
 */
export function referencesOf(spec: CodingRunSpec): Reference[] {
  const references: Reference[] = [];
  const { credentialsSecretRef } = spec.repository;
  if (credentialsSecretRef) references.push({ kind: 'Secret', field: 'spec.repository.credentialsSecretRef', ...credentialsSecretRef });
  const push = spec.publish?.credentialsSecretRef;
  if (push) references.push({ kind: 'Secret', field: 'spec.publish.credentialsSecretRef', ...push });
  if (spec.model.apiKeySecretRef) references.push({ kind: 'Secret', field: 'spec.model.apiKeySecretRef', ...spec.model.apiKeySecretRef });
  if (spec.model.scriptRef) references.push({ kind: 'ConfigMap', field: 'spec.model.scriptRef', ...spec.model.scriptRef });
  return references;
}

/** The admin's lists (repositories, model endpoints, images, egress) as one config holds them. */
function checkAllowLists(spec: CodingRunSpec, config: OperatorConfig, namespace: string): Refusal | undefined {
  const repo = isRepositoryAllowed(spec.repository.url, config.allowRepo);
  if (!repo.allowed) return { reason: REASONS.RepoNotAllowed, message: repo.message };
  // Security #11.3 and #11.10: where the model may be called and what the sandbox may run are the admin's lists.
  const endpoint = isModelEndpointAllowed(spec.model, config);
  if (!endpoint.allowed) return { reason: REASONS.ModelEndpointNotAllowed, message: endpoint.message };
  const image = isImageAllowed(spec.sandbox.image, config);
  if (!image.allowed) return { reason: REASONS.ImageNotAllowed, message: image.message };
  const runtimeClass = isRuntimeClassAllowed(spec.sandbox.runtimeClassName, config, namespace);
  if (!runtimeClass.allowed) return { reason: REASONS.InvalidSpec, message: runtimeClass.message };
  // Issue #12: a run's egress stays within the admin's allowEgress, and needs a proxy to go through.
  const egress = isEgressAllowed(spec.sandbox.egress.allow, config.allowEgress);
  if (!egress.allowed) return { reason: REASONS.InvalidSpec, message: egress.message };
  return undefined;
}

/**
 * The cluster's lists, then the namespace's: what a run is checked against when it is accepted,
 * and again when it is admitted (decide.ts), for an admin may narrow either while it waits in
 * the queue, and a narrowed list must hold for every run that has not started yet.
 */
export function checkRunAllowLists(
  run: CodingRun,
  spec: CodingRunSpec,
  config: OperatorConfig,
  policy: NamespacePolicy = NO_NAMESPACE_POLICY,
): Refusal | undefined {
  const cluster = checkAllowLists(spec, config, run.metadata.namespace);
  if (cluster) return cluster;
  const narrowed = namespaceNarrowedConfig(config, policy);
  const team = narrowed ? checkAllowLists(spec, narrowed, run.metadata.namespace) : undefined;
  if (!team) return undefined;
  return {
    reason: team.reason,
    message:
      `namespace ${run.metadata.namespace} is narrowed by its ${GROUP}/allow-* annotations (the lists below are the namespace's, ` +
      `set by a cluster admin): ${team.message}`,
  };
}

/**
 * Issue #15.4: `policy` is the run's namespace's (namespace-policy.ts). Its lists are checked
 * after the cluster's, never instead of them: a namespace can only narrow what the cluster allows.
 */
export function validateRun(
  run: CodingRun,
  spec: CodingRunSpec,
  config: OperatorConfig,
  found: ReferencedObjects,
  policy: NamespacePolicy = NO_NAMESPACE_POLICY,
): Refusal | undefined {
  const listed = checkRunAllowLists(run, spec, config, policy);
  if (listed) return listed;
  if (spec.model.contextWindow > config.maxContextWindow) {
    return {
      reason: REASONS.InvalidSpec,
      message:
        `spec.model.contextWindow ${spec.model.contextWindow} is over this operator's maxContextWindow ${config.maxContextWindow} ` +
        '(the conversation is held in the operator while the run steps); ask for at most that, or ask a cluster admin to raise it',
    };
  }
  if (spec.publish) {
    const problem = renderedBranchProblem(spec.publish.branch, run.metadata.namespace, run.metadata.name);
    if (problem) return { reason: REASONS.InvalidSpec, message: problem };
  }
  if (spec.sandbox.egress.allow.length > 0) {
    const proxy = egressReadiness(config);
    if (!proxy.ready) return { reason: REASONS.InvalidSpec, message: proxy.message };
  }
  const namespace = run.metadata.namespace;
  for (const reference of referencesOf(spec)) {
    const keys = reference.kind === 'Secret' ? found.secrets[reference.name] : found.configMaps[reference.name];
    const reason = reference.kind === 'Secret' ? REASONS.SecretNotFound : REASONS.ConfigMapNotFound;
    if (keys === undefined) {
      return {
        reason,
        message: `${reference.kind} ${namespace}/${reference.name} named in ${reference.field} does not exist; create it in the run's namespace and create the run again`,
      };
    }
    // The label before the key: a run author who may not read Secrets learns no key names of one not offered to runs.
    if (reference.kind === 'Secret' && !isSecretUsableByRuns(found.secretLabels?.[reference.name])) {
      return { reason: REASONS.SecretNotAllowed, message: secretNotUsableMessage(namespace, reference.name, reference.field) };
    }
    if (!keys.includes(reference.key)) {
      return {
        reason,
        message: `${reference.kind} ${namespace}/${reference.name} named in ${reference.field} has no key "${reference.key}"; add the key or set ${reference.field}.key`,
      };
    }
  }
  return undefined;
}
