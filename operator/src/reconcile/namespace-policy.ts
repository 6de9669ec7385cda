// A team's settings (issue #15.4), as the cluster admin writes them in annotations on the
// team's Namespace (docs/multi-tenancy.md says why annotations and not a policy object). Pure:
// annotations in, the namespace's policy out. A malformed value fails closed: a limit reads
// as 0 (runs wait, the message names the annotation) and a list entry that is not a valid
// pattern matches nothing. The lists only narrow: a run must pass the cluster's list AND the
// namespace's (validate-run.ts checks both), so no annotation can allow what the cluster does not.
import { GROUP } from '../api/group.ts';
import type { OperatorConfig } from '../config/operator-config.ts';

export const NAMESPACE_ANNOTATIONS = {
  maxActiveRuns: `${GROUP}/max-active-runs`,
  tokensPerDay: `${GROUP}/tokens-per-day`,
  allowRepo: `${GROUP}/allow-repo`,
  allowEgress: `${GROUP}/allow-egress`,
  allowModelEndpoints: `${GROUP}/allow-model-endpoints`,
  allowImages: `${GROUP}/allow-images`,
} as const;

export type NarrowedList = 'allowRepo' | 'allowEgress' | 'allowModelEndpoints' | 'allowImages';
export const NARROWED_LISTS: readonly NarrowedList[] = ['allowRepo', 'allowEgress', 'allowModelEndpoints', 'allowImages'];

/** Why a value the cluster's list allows is refused where it is used later (a worker), by the namespace's `list`. */
export const narrowedListRefusal = (namespace: string, list: NarrowedList, why: string) =>
  `namespace ${namespace} is narrowed by its ${NAMESPACE_ANNOTATIONS[list]} annotation (set by a cluster admin): ${why}`;

export interface NamespacePolicy {
  /** Runs of the namespace that may hold a sandbox at once; undefined: only the cluster's maxActiveRuns. */
  maxActiveRuns?: number;
  /** Tokens the namespace's runs may spend per UTC day; undefined: no daily budget. */
  tokensPerDay?: number;
  /** Each list present narrows the cluster's list of the same name. */
  allowRepo?: string[];
  allowEgress?: string[];
  allowModelEndpoints?: string[];
  allowImages?: string[];
  /** What was malformed, for messages: "chamvi.dev/max-active-runs: "x" is not a whole number". */
  problems: string[];
}

export const NO_NAMESPACE_POLICY: NamespacePolicy = { problems: [] };

const WHOLE_NUMBER = /^[0-9]{1,15}$/;

function readLimit(annotations: Record<string, string>, key: string, problems: string[]): number | undefined {
  const raw = annotations[key];
  if (raw === undefined) return undefined;
  const value = raw.trim();
  if (WHOLE_NUMBER.test(value)) return Number(value);
  problems.push(`${key}: ${JSON.stringify(raw.slice(0, 64))} is not a whole number, so it counts as 0`);
  return 0;
}

/** Comma- or newline-separated entries; an empty annotation is an empty list (nothing allowed). */
function readList(annotations: Record<string, string>, key: string): string[] | undefined {
  const raw = annotations[key];
  if (raw === undefined) return undefined;
  return raw
    .split(/[,\n]/)
    .map((entry) => entry.trim())
    .filter(Boolean);
}

export function readNamespacePolicy(annotations: Record<string, string> | undefined): NamespacePolicy {
  if (!annotations) return NO_NAMESPACE_POLICY;
  const problems: string[] = [];
  const policy: NamespacePolicy = { problems };
  const maxActiveRuns = readLimit(annotations, NAMESPACE_ANNOTATIONS.maxActiveRuns, problems);
  if (maxActiveRuns !== undefined) policy.maxActiveRuns = maxActiveRuns;
  const tokensPerDay = readLimit(annotations, NAMESPACE_ANNOTATIONS.tokensPerDay, problems);
  if (tokensPerDay !== undefined) policy.tokensPerDay = tokensPerDay;
  for (const list of NARROWED_LISTS) {
    const entries = readList(annotations, NAMESPACE_ANNOTATIONS[list]);
    if (entries !== undefined) policy[list] = entries;
  }
  return policy;
}

/**
 * The config as the namespace's lists would make it, or undefined when the namespace narrows
 * nothing. Never used alone: validate-run.ts checks a run against the cluster's config first,
 * then against this, so an entry here that the cluster does not allow allows nothing.
 */
export function namespaceNarrowedConfig(config: OperatorConfig, policy: NamespacePolicy): OperatorConfig | undefined {
  if (!NARROWED_LISTS.some((list) => policy[list] !== undefined)) return undefined;
  const narrowed = { ...config };
  for (const list of NARROWED_LISTS) if (policy[list] !== undefined) narrowed[list] = policy[list];
  return narrowed;
}

/** The UTC day a token is counted in: the tally's key and the day its budget resets at 00:00 UTC. */
export function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}
