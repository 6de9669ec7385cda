// The scripted model's script is read once per run (workers/run-script-cache.ts), not per
// step: later steps of the run replay what it read first, another run (even of the same
// ConfigMap) reads it again and so sees an edit, a missing script is still refused, and the
// cache stays bounded by runs and by estimated heap, and drops a run when it ends. A run whose
// script was dropped reads it again and plays the turn its conversation is at. The API key of
// a real provider is still read for every call.
import { generateText, type ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import type { CodingRunSpec } from '../../operator/src/api/index.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import { forgetRun } from '../../operator/src/workers/forget-run.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { RunScriptCache, estimatedEntryBytes } from '../../operator/src/workers/run-script-cache.ts';
import type { RunResources } from '../../operator/src/workers/run-resources.ts';

const script = (text: string) => JSON.stringify({ turns: [{ text }, { text }, { text }] });
/** A script whose turns say which they are: `${label} 0`, `${label} 1`, `${label} 2`. */
const numbered = (label: string) => JSON.stringify({ turns: [0, 1, 2].map((turn) => ({ text: `${label} ${turn}` })) });
/** The conversation of a run's step `turn`: that many answers of the model already in it. */
const conversation = (turn: number): ModelMessage[] =>
  Array.from({ length: turn }, (): ModelMessage[] => [
    { role: 'user', content: 'go on' },
    { role: 'assistant', content: 'done' },
  ])
    .flat()
    .concat({ role: 'user', content: 'go on' });
const model = { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } } as unknown as CodingRunSpec['model'];

function world(cache?: RunScriptCache) {
  const values = new Map<string, string | undefined>([['script', script('first')]]);
  let reads = 0;
  const resources = {
    configMapValue: async (_namespace: string, name: string) => (reads++, values.get(name)),
    secretValue: async () => undefined,
  } as unknown as RunResources;
  const models = createModelFactory(resources, DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies(), undefined, cache);
  const answer = async (runUid: string, turn = 0) =>
    (await generateText({ model: await models('ns', model, runUid), messages: conversation(turn), maxRetries: 0 })).text;
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
    const cache = new RunScriptCache({ maxScriptChars: 10, maxEstimatedBytes: 2 * estimatedEntryBytes(10) + 1 });
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

  it('keeps at most its bound of runs, however small their scripts, and drops the least recently used', () => {
    const parsed = { turns: [{ text: '' }] };
    const cache = new RunScriptCache({ maxEntries: 100 });
    for (let run = 0; run < 1000; run++) cache.set(`run-${run}`, 'script', 'k', parsed, 23);
    expect(cache.size).toBe(100);
    expect(cache.get('run-899', 'script', 'k')).toBeUndefined();
    expect(cache.get('run-900', 'script', 'k')).toBe(parsed);
    expect(cache.get('run-999', 'script', 'k')).toBe(parsed);
  });

  it("counts each entry's own cost, not only its script's characters, toward the heap bound", () => {
    const parsed = { turns: [{ text: '' }] };
    // Room for 10 one-character scripts by their characters, for 3 by what they cost.
    const cache = new RunScriptCache({ maxEstimatedBytes: 3 * estimatedEntryBytes(1) });
    for (let run = 0; run < 10; run++) cache.set(`run-${run}`, 'script', 'k', parsed, 1);
    expect(cache.size).toBe(3);
  });

  it('reads the script of a run whose entry was dropped again, and plays the turn its conversation is at', async () => {
    const w = world(new RunScriptCache({ maxEntries: 1 }));
    w.values.set('script', numbered('turn'));
    expect(await w.answer('run-1', 0)).toBe('turn 0');
    expect(await w.answer('run-2', 0)).toBe('turn 0'); // run-1's script is dropped for run-2's
    expect(await w.answer('run-1', 1)).toBe('turn 1');
    expect(await w.answer('run-1', 2)).toBe('turn 2');
    expect(w.reads()).toBe(3);
  });

  it("drops a run's script when the run ends (forgetRun), so its next step would read it again", async () => {
    const cache = new RunScriptCache();
    const w = world(cache);
    expect(await w.answer('run-1')).toBe('first');
    expect(cache.size).toBe(1);
    const deps = {
      states: { delete: async () => {} },
      sandboxes: { release: async () => {} },
      scripts: cache,
    } as unknown as Pick<AgentDependencies, 'states' | 'sandboxes' | 'scripts'>;
    await forgetRun(deps, { namespace: 'ns', name: 'run', uid: 'run-1' });
    expect(cache.size).toBe(0);
    expect(cache.get('run-1', 'script', 'script.json')).toBeUndefined();
  });
});
