// metav1.Condition bookkeeping: a condition's lastTransitionTime changes only when its
// status does, as kubectl and every Kubernetes tool expect.
import type { Condition, ConditionType } from '../api/index.ts';

export interface ConditionUpdate {
  type: ConditionType;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

export function setCondition(
  conditions: readonly Condition[] | undefined,
  update: ConditionUpdate,
  generation: number,
  now: Date,
): Condition[] {
  const list = [...(conditions ?? [])];
  const index = list.findIndex((condition) => condition.type === update.type);
  const previous = index >= 0 ? list[index] : undefined;
  const next: Condition = {
    ...update,
    message: update.message.slice(0, 32_768),
    observedGeneration: generation,
    lastTransitionTime: previous && previous.status === update.status ? previous.lastTransitionTime : now.toISOString(),
  };
  if (index >= 0) list[index] = next;
  else list.push(next);
  return list;
}

export function findCondition(conditions: readonly Condition[] | undefined, type: ConditionType): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}
