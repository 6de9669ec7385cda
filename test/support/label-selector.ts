// A NetworkPolicy's podSelector, for tests: evaluated on labels as the API server does, or
// written as the `-l` string that lets the API server itself answer which pods it selects.
import type { V1LabelSelector } from '@kubernetes/client-node';

/** Whether `selector` selects a pod with `labels` (matchLabels and every matchExpressions operator); none selects every pod. */
export function selectorMatches(selector: V1LabelSelector | undefined, labels: Record<string, string>): boolean {
  const byLabel = Object.entries(selector?.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  return (
    byLabel &&
    (selector?.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
      const has = Object.hasOwn(labels, key);
      if (operator === 'Exists') return has;
      if (operator === 'DoesNotExist') return !has;
      if (operator === 'In') return has && values.includes(labels[key]!);
      if (operator === 'NotIn') return !has || !values.includes(labels[key]!);
      throw new Error(`unknown selector operator ${operator}`);
    })
  );
}

/** The selector as a label selector string (`kubectl get -l`, `labelSelector=`). */
export function selectorString(selector: V1LabelSelector | undefined): string {
  const parts = [
    ...Object.entries(selector?.matchLabels ?? {}).map(([key, value]) => `${key}=${value}`),
    ...(selector?.matchExpressions ?? []).map(({ key, operator, values = [] }) => {
      if (operator === 'Exists') return key;
      if (operator === 'DoesNotExist') return `!${key}`;
      return `${key} ${operator === 'In' ? 'in' : 'notin'} (${values.join(',')})`;
    }),
  ];
  return parts.join(',');
}
