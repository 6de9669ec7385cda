// The scripted model's script is read once per run (workers/run-script-cache.ts), not per
// step: later steps of the run replay what it read first, another run (even of the same
// ConfigMap) reads it again and so sees an edit, a missing script is still refused, and the
// cache stays bounded by runs and by estimated heap, and drops a run when it ends. The estimate
// counts a script's items as well as its characters, so dense scripts are not kept past the heap
// bound. A run whose script was dropped reads it again and plays the turn its conversation is at.
// The API key of a real provider is still read for every call.
import { generateText, type ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import type { CodingRunSpec } from '../../operator/src/api/index.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import { forgetRun } from '../../operator/src/workers/forget-run.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { parseModelScript } from '../../operator/src/providers/scripted/model-script-schema.ts';
import {
  MAX_ESTIMATED_BYTES,
  MAX_SCRIPT_CHARS,
  RunScriptCache,
  estimatedEntryBytes,
  scriptItemCount,
} from '../../operator/src/workers/run-script-cache.ts';
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
    const cache = new RunScriptCache({ maxScriptChars: 10, maxEstimatedBytes: 2 * estimatedEntryBytes(10, scriptItemCount(parsed)) + 1 });
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
    const cache = new RunScriptCache({ maxEstimatedBytes: 3 * estimatedEntryBytes(1, scriptItemCount(parsed)) });
    for (let run = 0; run < 10; run++) cache.set(`run-${run}`, 'script', 'k', parsed, 1);
    expect(cache.size).toBe(3);
  });

  it('counts every object, array, member and element of a script, however deep it nests', () => {
    // 9 objects and arrays (the root, `turns`, two turns, `toolCalls`, the call, its input, `a`,
    // `{}`) and 12 members and elements.
    const parsed = parseModelScript('{"turns":[{"text":"a","toolCalls":[{"toolName":"x","input":{"a":[0,{}]}}]},{"text":"b"}]}');
    expect(scriptItemCount(parsed)).toBe(21);
    const deep = parseModelScript(`{"turns":[{"toolCalls":[{"toolName":"x","input":{"a":${'['.repeat(20_000)}${']'.repeat(20_000)}}}]}]}`);
    // 13 items around the arrays; each array, and each but the innermost holds one.
    expect(scriptItemCount(deep)).toBe(13 + 2 * 20_000 - 1);
  });

  // Scripts of MAX_SCRIPT_CHARS that are one tool call whose input is a list of `unit`, as dense
  // as JSON gets. `heapPerUnit` is what each unit held in the heap, measured on Node 24 with
  // --expose-gc over 50 entries (an object or array of V8 and its slot in the list; the
  // characters of the script are 2 or 3 bytes a unit of that): `{}` 1.40 MB a script, 64.2 bytes
  // a unit; `[[]]` 1.26 MB, 95.9; `[]` 0.87 MB, 40.0. The estimate before items were counted (5
  // bytes a character) was 329 KB for each, so the bound kept 4.3, 3.8 and 2.7 times its bytes.
  const dense = (unit: string) => {
    const head = '{"turns":[{"toolCalls":[{"toolName":"x","input":{"a":[';
    const tail = ']}}]}]}';
    const units = Math.floor((MAX_SCRIPT_CHARS - head.length - tail.length + 1) / (unit.length + 1));
    return { text: head + Array(units).fill(unit).join(',') + tail, units };
  };
  it.each([
    { unit: '{}', heapPerUnit: 64 },
    { unit: '[[]]', heapPerUnit: 95 },
    { unit: '[]', heapPerUnit: 40 },
  ])('keeps no more $unit-dense scripts than MAX_ESTIMATED_BYTES of heap holds, as measured', ({ unit, heapPerUnit }) => {
    const { text, units } = dense(unit);
    expect(text.length).toBeLessThanOrEqual(MAX_SCRIPT_CHARS);
    const heap = units * heapPerUnit;
    const cache = new RunScriptCache();
    const script = parseModelScript(text);
    for (let run = 0; run < 60; run++) cache.set(`run-${run}`, 'script', 'k', script, text.length);
    expect(cache.size).toBeGreaterThan(0);
    expect(cache.size * heap).toBeLessThanOrEqual(MAX_ESTIMATED_BYTES);
  });

  // An ordinary script: a read, 12 turns each of an edit and a bash command, and a closing text
  // (5 551 characters, 300 items). As an entry it held 9 379 bytes (Node 24, --expose-gc, 50 entries).
  const ordinary = JSON.stringify({
    turns: [
      { toolCalls: [{ toolName: 'read_file', input: { path: 'README0.md' } }], usage: { inputTokens: 1200, outputTokens: 40 } },
      ...Array.from({ length: 12 }, (_, turn) => ({
        toolCalls: [
          {
            toolName: 'edit_file',
            input: { path: `src/file${turn}.ts`, oldString: 'const a = 1;\n'.repeat(5), newString: `const a = ${turn};\n`.repeat(6) },
          },
          { toolName: 'bash', input: { command: `npm test -- --grep "case ${turn}" && git diff --stat` } },
        ],
        usage: { inputTokens: 1500 + turn, outputTokens: 60, cacheReadTokens: 1000 },
      })),
      { text: 'Greeted the world in the README. '.repeat(10) + '0', usage: { inputTokens: 1700, outputTokens: 12 } },
    ],
  });

  it('estimates an ordinary script at no less than the heap it held, and still keeps hundreds of them', () => {
    const script = parseModelScript(ordinary);
    expect([ordinary.length, scriptItemCount(script)]).toEqual([5551, 300]);
    expect(estimatedEntryBytes(ordinary.length, scriptItemCount(script))).toBeGreaterThanOrEqual(9379);
    // A miss costs a ConfigMap GET a step: counting items may not cost ordinary runs their place.
    const cache = new RunScriptCache();
    for (let run = 0; run < 600; run++) cache.set(`run-${run}`, 'script', 'k', script, ordinary.length);
    expect(cache.size).toBeGreaterThanOrEqual(400);
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
