// Which run states in Redis the leader's sweep stops (controller/orphaned-run-states.ts): only a
// state found without a run by two sweeps at least the grace apart (the cache lags a create),
// and only one this operator sealed for a run of a namespace it watches.
import { describe, expect, it } from 'vitest';
import {
  orphanVerdict,
  orphanedRunStates,
  type OrphanSighting,
  type StateOwner,
} from '../../operator/src/controller/orphaned-run-states.ts';

const GRACE = 60_000;
const NOW = 1_000_000;

describe('orphanedRunStates', () => {
  it.each<{
    why: string;
    states: string[];
    runs: string[];
    before: Array<[string, OrphanSighting]>;
    due: string[];
    after: Array<[string, OrphanSighting]>;
  }>([
    {
      why: 'a state first found without a run is only noted',
      states: ['a'],
      runs: [],
      before: [],
      due: [],
      after: [['a', { since: NOW }]],
    },
    {
      why: 'a state found without a run again, the grace later, is due',
      states: ['a'],
      runs: [],
      before: [['a', { since: NOW - GRACE }]],
      due: ['a'],
      after: [['a', { since: NOW - GRACE }]],
    },
    {
      why: 'found again before the grace is over, it waits (the cache may lag a create)',
      states: ['a'],
      runs: [],
      before: [['a', { since: NOW - GRACE + 1 }]],
      due: [],
      after: [['a', { since: NOW - GRACE + 1 }]],
    },
    {
      why: 'a state whose run the cache shows now is forgotten, however long it was seen without',
      states: ['a'],
      runs: ['a'],
      before: [['a', { since: NOW - 10 * GRACE }]],
      due: [],
      after: [],
    },
    {
      why: 'a state of a run in the cache is never noted',
      states: ['a', 'b'],
      runs: ['a', 'b', 'c'],
      before: [],
      due: [],
      after: [],
    },
    {
      why: 'a sighting whose state is gone is forgotten: a state written again waits the grace anew',
      states: [],
      runs: [],
      before: [['a', { since: NOW - GRACE }]],
      due: [],
      after: [],
    },
    {
      why: 'a state left alone (not this operator to stop) is not due again',
      states: ['a'],
      runs: [],
      before: [['a', { since: NOW - GRACE, leftAlone: true }]],
      due: [],
      after: [['a', { since: NOW - GRACE, leftAlone: true }]],
    },
    {
      why: 'several at once: the due ones sorted, each judged on its own',
      states: ['z', 'live', 'new', 'm', 'z'],
      runs: ['live'],
      before: [
        ['z', { since: NOW - 2 * GRACE }],
        ['m', { since: NOW - GRACE }],
        ['live', { since: NOW - GRACE }],
      ],
      due: ['m', 'z'],
      after: [
        ['z', { since: NOW - 2 * GRACE }],
        ['new', { since: NOW }],
        ['m', { since: NOW - GRACE }],
      ],
    },
  ])('$why', ({ states, runs, before, due, after }) => {
    const result = orphanedRunStates({ stateUids: states, runUids: new Set(runs), sightings: new Map(before), now: NOW, graceMs: GRACE });
    expect(result.due).toEqual(due);
    expect([...result.sightings]).toEqual(after);
  });
});

describe('orphanVerdict', () => {
  const ref = { uid: 'u1', namespace: 'team-a', name: 'fix' };
  it.each<{ why: string; owner: StateOwner; watch: string[]; verdict: ReturnType<typeof orphanVerdict> }>([
    { why: 'a readable state of a run in a watched namespace is stopped', owner: { ref }, watch: ['team-a'], verdict: { stop: ref } },
    { why: 'every namespace is watched when watchNamespaces is empty', owner: { ref }, watch: [], verdict: { stop: ref } },
    {
      why: 'a state of a run in a namespace not watched is left (its run may live)',
      owner: { ref },
      watch: ['team-b'],
      verdict: { leave: 'unwatched', ref },
    },
    {
      why: 'a state this operator cannot read is left',
      owner: { invalid: 'its HMAC does not match' },
      watch: [],
      verdict: { leave: 'unreadable', problem: 'its HMAC does not match' },
    },
    { why: 'a state gone since the listing needs nothing', owner: undefined, watch: [], verdict: { leave: 'gone' } },
  ])('$why', ({ owner, watch, verdict }) => {
    expect(orphanVerdict(owner, watch)).toEqual(verdict);
  });
});
