// The scripted model's script is read once per run (workers/run-script-cache.ts), not per
// step: later steps of the run replay what it read first, another run (even of the same
// ConfigMap) reads it again and so sees an edit, a missing script is still refused, and the
// cache stays bounded. The API key of a real provider is still read for every call.
import { generateText } from 'ai';
import { describe, expect, it } from 'vitest';
import type { CodingRunSpec } from '../../operator/src/api/index.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import { RunScriptCache } from '../../operator/src/workers/run-script-cache.ts';
import type { RunResources } from '../../operator/src/workers/run-resources.ts';

const script = (text: string) => JSON.stringify({ turns: [{ text }, { text }, { text }] });
const model = { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } } as unknown as CodingRunSpec['model'];

function world() {
  const values = new Map<string, string | undefined>([['script', script('first')]]);
  let reads = 0;
  const resources = {
    configMapValue: async (_namespace: string, name: string) => (reads++, values.get(name)),
    secretValue: async () => undefined,
  } as unknown as RunResources;
  const models = createModelFactory(resources, DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies());
  const answer = async (runUid: string) =>
    (await generateText({ model: await models('ns', model, runUid), prompt: 'go', maxRetries: 0 })).text;
  return { values, models, answer, reads: () => reads };
}

describe('the scripted model reads its script once per run', () => {
  it('replays the script a run read first at its later steps, with one read', async () => {
    const w = world();
    expect(await w.answer('run-1')).toBe('first');
    w.values.set('script', script('edited'));
    expect(await w.answer('run-1')).toBe('first');
    expect(await w.answer('run-1')).toBe('first');
    expect(w.reads()).toBe(1);
  });

  it('reads it again for another run, which so sees an edit', async () => {
    const w = world();
    expect(await w.answer('run-1')).toBe('first');
    w.values.set('script', script('edited'));
    expect(await w.answer('run-2')).toBe('edited');
    expect(w.reads()).toBe(2);
  });

  it('still refuses a run whose script is missing at its first step', async () => {
    const w = world();
    w.values.delete('script');
    await expect(w.models('ns', model, 'run-1')).rejects.toThrow(/has no key "script.json"/);
  });

  it('keeps no script over its size bound, and drops the least recently used over the total', () => {
    const parsed = { turns: [{ text: 'x' }] };
    const cache = new RunScriptCache(10, 25);
    cache.set('big', 'script', 'k', parsed, 11);
    expect(cache.get('big', 'script', 'k')).toBeUndefined();
    cache.set('a', 'script', 'k', parsed, 10);
    cache.set('b', 'script', 'k', parsed, 10);
    expect(cache.get('a', 'script', 'k')).toBe(parsed); // a is now the most recently used
    cache.set('c', 'script', 'k', parsed, 10);
    expect(cache.get('b', 'script', 'k')).toBeUndefined();
    expect(cache.get('a', 'script', 'k')).toBe(parsed);
    expect(cache.get('c', 'script', 'k')).toBe(parsed);
  });
});
