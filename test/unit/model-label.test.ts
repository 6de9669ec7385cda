// The `model` label of chamvi_tokens_total takes a bounded set of values: the first names a
// process sees, cut short, then `other` (operator/src/observability/model-label.ts).
import { describe, expect, it } from 'vitest';
import { emptyUsage } from '../../operator/src/agent/usage-accounting.ts';
import {
  decideModelLabel,
  MODEL_LABEL_MAX_LENGTH,
  MODEL_LABEL_MAX_NAMES,
  ModelLabels,
  OTHER_MODEL_LABEL,
} from '../../operator/src/observability/model-label.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { countTokens } from '../../operator/src/workers/run-metrics.ts';

describe('decideModelLabel', () => {
  const full = new Set(['gpt-4o', 'llama-3']);
  it.each([
    ['a name already labelled, with the set full', 'gpt-4o', full, { value: 'gpt-4o', newlyLabelled: false }],
    ['a new name, with room', 'qwen-2', new Set(['gpt-4o']), { value: 'qwen-2', newlyLabelled: true }],
    ['a new name, with the set full', 'qwen-2', full, { value: OTHER_MODEL_LABEL, newlyLabelled: false }],
    ['a long name, cut', 'm'.repeat(256), new Set<string>(), { value: 'm'.repeat(MODEL_LABEL_MAX_LENGTH), newlyLabelled: true }],
    [
      'a long name whose cut form is labelled',
      `${'m'.repeat(MODEL_LABEL_MAX_LENGTH)}-b`,
      new Set(['m'.repeat(MODEL_LABEL_MAX_LENGTH)]),
      { value: 'm'.repeat(MODEL_LABEL_MAX_LENGTH), newlyLabelled: false },
    ],
  ])('%s', (_, name, labelled, expected) => {
    expect(decideModelLabel(name, labelled, 2)).toEqual(expected);
  });

  it('leaves no half of a surrogate pair at the cut', () => {
    const name = `${'m'.repeat(MODEL_LABEL_MAX_LENGTH - 1)}😀tail`;
    expect(decideModelLabel(name, new Set()).value).toBe('m'.repeat(MODEL_LABEL_MAX_LENGTH - 1));
  });
});

describe('ModelLabels', () => {
  it('keeps the first names it sees by name, for good, and labels every later one other', () => {
    const labels = new ModelLabels(2);
    expect(['a', 'b', 'c', 'a', 'd', 'b'].map((name) => labels.valueFor(name))).toEqual(['a', 'b', 'other', 'a', 'other', 'b']);
  });
});

describe('chamvi_tokens_total model label', () => {
  const usage = { ...emptyUsage(), inputTokens: 10, outputTokens: 1, totalTokens: 11 };

  it(`renders at most ${MODEL_LABEL_MAX_NAMES} + 1 model values however many names runs write, and loses no token`, async () => {
    const metrics = new OperatorMetrics({ defaultMetrics: false });
    const names = Array.from({ length: MODEL_LABEL_MAX_NAMES + 10 }, (_, index) => `model-${index}-${'x'.repeat(200)}`);
    for (const name of names) countTokens({ metrics }, { namespace: 'team-a', provider: 'openai-compatible', model: name }, usage);

    const rendered = await metrics.registry.metrics();
    const values = new Set([...rendered.matchAll(/^chamvi_tokens_total\{[^}]*model="([^"]*)"/gm)].map((match) => match[1]));
    expect(values.size).toBe(MODEL_LABEL_MAX_NAMES + 1);
    expect(values).toContain(OTHER_MODEL_LABEL);
    expect(values).toContain(names[0]!.slice(0, MODEL_LABEL_MAX_LENGTH));
    expect(values).not.toContain(names[MODEL_LABEL_MAX_NAMES]!.slice(0, MODEL_LABEL_MAX_LENGTH));
    const input = (await metrics.tokens.get()).values.filter((each) => each.labels.direction === 'input');
    expect(input.reduce((sum, each) => sum + each.value, 0)).toBe(10 * names.length);
    expect(input.find((each) => each.labels.model === OTHER_MODEL_LABEL)?.value).toBe(10 * 10);
  });

  it('gives a name no value when its call counted no token', async () => {
    const metrics = new OperatorMetrics({ defaultMetrics: false });
    for (let index = 0; index < MODEL_LABEL_MAX_NAMES; index++) {
      countTokens({ metrics }, { namespace: 'team-a', provider: 'openai-compatible', model: `silent-${index}` }, emptyUsage());
    }
    countTokens({ metrics }, { namespace: 'team-a', provider: 'openai-compatible', model: 'counted' }, usage);
    expect(new Set((await metrics.tokens.get()).values.map((each) => each.labels.model))).toEqual(new Set(['counted']));
  });
});
