// saveOrLetGo: the save of a job about to act on its run's state, made only over a state still in
// Redis. Saved, the job goes on and nothing of the run is dropped. Gone (the stop that ends a run
// deleted it meanwhile), nothing is written, one line says why, what is still to be recorded is
// recorded, and the run is let go once (forget-run.ts): its state, sandbox and model script.
import { describe, expect, it } from 'vitest';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { RunStateGoneError } from '../../operator/src/workers/errors/run-state-gone-error.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { saveOrLetGo } from '../../operator/src/workers/save-if-present.ts';

const REF: RunRef = { uid: 'uid-1', namespace: 'team', name: 'r' };

function scene(stateThere: boolean) {
  const happened: string[] = [];
  const logged: { fields: object; message: string }[] = [];
  const saves: { ifPresent?: boolean }[] = [];
  const logger = {
    info: (fields: object, message: string) => void logged.push({ fields, message }),
    warn: () => {},
    error: () => {},
    child: () => logger,
  };
  const deps = {
    states: {
      save: async (_state: RunState, options: { ifPresent?: boolean }) => {
        saves.push(options);
        if (!stateThere) throw new RunStateGoneError(REF.uid);
      },
      delete: async (ref: RunRef) => void happened.push(`state deleted ${ref.uid}`),
    },
    sandboxes: { release: async (uid: string) => void happened.push(`sandbox released ${uid}`) },
    scripts: { forget: (uid: string) => void happened.push(`script forgotten ${uid}`) },
    logger,
  } as unknown as AgentDependencies;
  return { deps, happened, logged, saves };
}

const state = { step: 4 } as unknown as RunState;
const why = 'the run ended while its step ran: no more of it is done and the run is let go';

describe('saveOrLetGo', () => {
  it('saves over a state still there, says true, and lets nothing of the run go', async () => {
    const { deps, happened, logged, saves } = scene(true);
    let recorded = false;
    const saved = await saveOrLetGo(deps, REF, state, { why, recordFirst: async () => void (recorded = true) });
    expect(saved).toBe(true);
    expect(saves).toEqual([{ ifPresent: true }]);
    expect(happened).toEqual([]);
    expect(logged).toEqual([]);
    expect(recorded).toBe(false);
  });

  it('with the state gone writes nothing, logs one line with the step and its fields, records, then lets the run go once', async () => {
    const { deps, happened, logged, saves } = scene(false);
    const saved = await saveOrLetGo(deps, REF, state, {
      why,
      fields: { attempt: 2 },
      recordFirst: async () => void happened.push('recorded'),
    });
    expect(saved).toBe(false);
    expect(saves).toEqual([{ ifPresent: true }]);
    expect(logged).toEqual([{ fields: { step: 4, attempt: 2 }, message: why }]);
    expect(happened).toEqual(['recorded', 'script forgotten uid-1', 'state deleted uid-1', 'sandbox released uid-1']);
  });

  it('throws a save that failed for another reason, letting nothing go (the job is retried)', async () => {
    const { deps, happened, logged } = scene(true);
    (deps.states as { save: unknown }).save = async () => {
      throw new Error('Redis is out of reach');
    };
    await expect(saveOrLetGo(deps, REF, state, { why })).rejects.toThrow('Redis is out of reach');
    expect(happened).toEqual([]);
    expect(logged).toEqual([]);
  });
});
