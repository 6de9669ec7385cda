// The job a run's state expects to move it on (workers/agent-inspector.ts `expectedJob`): the
// inspector looks it up first, alone, so it must name the job handOn (hand-on.ts) enqueues.
import { describe, expect, it } from 'vitest';
import { expectedJob } from '../../operator/src/workers/agent-inspector.ts';
import { jobId } from '../../operator/src/workers/job-ids.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';

const uid = '5b0c7e7e-0000-4000-8000-000000000001';
const state = (change: Partial<RunState>): RunState => ({
  ...startingState({ uid, namespace: 'team', name: 'demo' }, 0),
  ...change,
});

describe('the job a run state expects', () => {
  it.each([
    ['preparing', state({ stage: 'preparing' }), jobId.prepare(uid)],
    ['stepping, 3 steps done', state({ stage: 'stepping', step: 3 }), jobId.step(uid, 3)],
    [
      'stepping, step 4 in flight (its number already counted)',
      state({
        stage: 'stepping',
        step: 4,
        inFlight: { calls: [], results: [], earlier: [], hadToolCalls: true, toolNames: [], text: '', resumed: false },
      }),
      jobId.step(uid, 3),
    ],
    ['finalizing', state({ stage: 'finalizing' }), jobId.finalize(uid)],
    [
      'finalizing again after a failed verification',
      state({ stage: 'finalizing', verification: { attempts: 2 } as RunState['verification'] }),
      jobId.finalize(uid, 2),
    ],
    ['publishing', state({ stage: 'publishing' }), jobId.publish(uid)],
    ['waiting for a human', state({ stage: 'waiting' }), undefined],
    ['done', state({ stage: 'done' }), undefined],
  ])('%s', (_name, given, expected) => {
    expect(expectedJob(uid, given)).toBe(expected);
  });

  it('is none when the state is gone', () => {
    expect(expectedJob(uid, undefined)).toBeUndefined();
  });
});
