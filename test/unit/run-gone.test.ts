// Which run a reported change takes away for good (controller/run-gone.ts): the reconciler stops
// the agent of that uid, so a run missed here keeps its state in Redis for good.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { runGoneWith } from '../../operator/src/controller/run-gone.ts';

const run = (uid: string) => ({ metadata: { namespace: 'team', name: 'fix', uid } }) as unknown as CodingRun;

describe('runGoneWith', () => {
  it.each([
    ['a deletion: the run deleted', undefined, run('a'), true, 'a'],
    ['a deletion seen without a sight before', run('a'), run('a'), true, 'a'],
    ['a relist found another uid under the name (deleted and made again while the watch was down)', run('a'), run('b'), false, 'a'],
    ['a change of the same run', run('a'), run('a'), false, undefined],
    ['a run seen for the first time', undefined, run('a'), false, undefined],
  ] as const)('%s', (_name, previous, now, deleted, gone) => {
    expect(runGoneWith(previous, now, deleted)?.metadata.uid).toBe(gone);
  });
});
