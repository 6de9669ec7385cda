// What the reconciler observes of spec.continueFrom's source while a run is accepted
// (reconcile/continue-from-pin.ts): the uid of the run of that name in the run's own namespace,
// as its cache of runs shows it. decide() pins it (test/unit/decide.test.ts).
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { observeContinueFromSource, type RunLookup } from '../../operator/src/reconcile/continue-from-pin.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

/** A cache holding the finished (and once accepted) run `first` in namespace `agents` (uid-first) and in `other` (uid-elsewhere). */
const runs: RunLookup = {
  get: (namespace, name) =>
    name !== 'first'
      ? undefined
      : codingRunFixture({
          metadata: { name, namespace, uid: namespace === 'agents' ? 'uid-first' : 'uid-elsewhere' },
          status: {
            phase: 'Succeeded',
            conditions: [{ type: 'Accepted', status: 'True', reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:00:00Z' }],
          },
        }),
};
const onlyElsewhere: RunLookup = { get: (namespace, name) => (namespace === 'agents' ? undefined : runs.get(namespace, name)) };

const continuing = (spec: Record<string, unknown>, status?: CodingRun['status']): CodingRun =>
  codingRunFixture({ spec, ...(status ? { status } : {}) });

describe('observeContinueFromSource', () => {
  it('finds the uid of the run the spec names, in the run’s own namespace', () => {
    expect(observeContinueFromSource(continuing({ continueFrom: { name: 'first' } }), runs)).toEqual({
      continueFromSource: { name: 'first', uid: 'uid-first' },
    });
  });

  it('finds none when only another namespace has a run of the name', () => {
    expect(observeContinueFromSource(continuing({ continueFrom: { name: 'first' } }), onlyElsewhere)).toEqual({
      continueFromSource: { name: 'first', uid: undefined },
    });
  });

  it('reads the effective spec: a continueFrom given by the run’s template', () => {
    const templated = continuing(
      { templateRef: { name: 'follow-up' } },
      { template: { name: 'follow-up', spec: { continueFrom: { name: 'first' } } } },
    );
    expect(observeContinueFromSource(templated, runs)).toEqual({ continueFromSource: { name: 'first', uid: 'uid-first' } });
  });

  it('observes nothing for a run without continueFrom', () => {
    expect(observeContinueFromSource(continuing({}), runs)).toEqual({});
  });
});
