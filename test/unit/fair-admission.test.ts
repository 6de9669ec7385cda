// The round-robin decision of issue #15.4, as a table: the queued runs of each namespace
// (oldest first), the free cluster slots, each namespace's own limits and the namespace
// served last, and which runs that admits now, in which order, and where the rest stand.
import { describe, expect, it } from 'vitest';
import {
  decideFairAdmission,
  turnOrder,
  type FairAdmissionInput,
  type NamespaceLimits,
} from '../../operator/src/reconcile/fair-admission.ts';

const queue = (spec: Record<string, number>) =>
  new Map(Object.entries(spec).map(([namespace, count]) => [namespace, Array.from({ length: count }, (_, i) => `${namespace}${i + 1}`)]));

interface Row {
  name: string;
  queued: Record<string, number>;
  freeSlots: number;
  limits?: Record<string, NamespaceLimits>;
  lastServed?: string;
  admitted: string[];
  /** The waiting runs in queue order, as run:heldBy[:position]. */
  waiting: string[];
}

const rows: Row[] = [
  {
    name: 'two namespaces alternate, starting with the first by name',
    queued: { a: 3, b: 3 },
    freeSlots: 4,
    admitted: ['a1', 'b1', 'a2', 'b2'],
    waiting: ['a3:ClusterSlots:1', 'b3:ClusterSlots:2'],
  },
  {
    name: 'the turn goes to the namespace after the one served last',
    queued: { a: 3, b: 3 },
    freeSlots: 1,
    lastServed: 'a',
    admitted: ['b1'],
    waiting: ['a1:ClusterSlots:1', 'b2:ClusterSlots:2', 'a2:ClusterSlots:3', 'b3:ClusterSlots:4', 'a3:ClusterSlots:5'],
  },
  {
    name: 'after the last namespace by name, the turn wraps to the first',
    queued: { a: 1, b: 1, c: 1 },
    freeSlots: 2,
    lastServed: 'c',
    admitted: ['a1', 'b1'],
    waiting: ['c1:ClusterSlots:1'],
  },
  {
    name: 'a last-served namespace with nothing queued any more still passes the turn on',
    queued: { a: 2, c: 2 },
    freeSlots: 1,
    lastServed: 'b',
    admitted: ['c1'],
    waiting: ['a1:ClusterSlots:1', 'c2:ClusterSlots:2', 'a2:ClusterSlots:3'],
  },
  {
    name: 'one namespace alone takes every free slot (fair share leaves no slot idle)',
    queued: { a: 5 },
    freeSlots: 3,
    admitted: ['a1', 'a2', 'a3'],
    waiting: ['a4:ClusterSlots:1', 'a5:ClusterSlots:2'],
  },
  {
    name: 'no free slot admits nothing and numbers the queue in turn order',
    queued: { a: 2, b: 1 },
    freeSlots: 0,
    lastServed: 'a',
    admitted: [],
    waiting: ['b1:ClusterSlots:1', 'a1:ClusterSlots:2', 'a2:ClusterSlots:3'],
  },
  {
    name: 'a namespace at its own cap waits, and its turn goes to the others',
    queued: { a: 3, b: 3 },
    freeSlots: 4,
    limits: { a: { active: 1, maxActiveRuns: 2 } },
    admitted: ['a1', 'b1', 'b2', 'b3'],
    waiting: ['a2:NamespaceActiveRuns', 'a3:NamespaceActiveRuns'],
  },
  {
    name: 'a namespace out of its token budget is admitted nothing; the others are not affected',
    queued: { a: 2, b: 2, c: 1 },
    freeSlots: 3,
    limits: { b: { active: 0, outOfBudget: true } },
    admitted: ['a1', 'c1', 'a2'],
    waiting: ['b1:NamespaceTokenBudget', 'b2:NamespaceTokenBudget'],
  },
  {
    name: 'a cap of 0 holds every run of the namespace',
    queued: { a: 2 },
    freeSlots: 5,
    limits: { a: { active: 0, maxActiveRuns: 0 } },
    admitted: [],
    waiting: ['a1:NamespaceActiveRuns', 'a2:NamespaceActiveRuns'],
  },
  {
    name: 'more runs active than free slots (an over-admission) gives no slot and keeps positions from 1',
    queued: { a: 1 },
    freeSlots: -1,
    admitted: [],
    waiting: ['a1:ClusterSlots:1'],
  },
];

describe('decideFairAdmission', () => {
  it.each(rows)('$name', (row) => {
    const input: FairAdmissionInput = {
      queued: queue(row.queued),
      freeSlots: row.freeSlots,
      limits: new Map(Object.entries(row.limits ?? {})),
      ...(row.lastServed ? { lastServed: row.lastServed } : {}),
    };
    const decision = decideFairAdmission(input);
    expect(decision.admitted).toEqual(row.admitted);
    const waiting = [...decision.waiting]
      .sort(([, a], [, b]) => (a.position ?? Infinity) - (b.position ?? Infinity))
      .map(([run, place]) => [run, place.heldBy, ...(place.position !== undefined ? [place.position] : [])].join(':'));
    expect(waiting).toEqual(row.waiting);
  });

  it('gives 20 runs each of two namespaces, one slot at a time, strictly alternately', () => {
    let queued = queue({ a: 20, b: 20 });
    let lastServed: string | undefined;
    const order: string[] = [];
    while ([...queued.values()].some((runs) => runs.length > 0)) {
      const { admitted } = decideFairAdmission({ queued, freeSlots: 1, limits: new Map(), ...(lastServed ? { lastServed } : {}) });
      const run = admitted[0]!;
      order.push(run);
      lastServed = run.replace(/[0-9]+$/, '');
      queued = new Map([...queued].map(([namespace, runs]) => [namespace, runs.filter((other) => other !== run)]));
    }
    expect(order.map((run) => run[0]).join('')).toBe('ab'.repeat(20));
  });
});

describe('turnOrder', () => {
  it('starts after the last served namespace and wraps around', () => {
    expect(turnOrder(['c', 'a', 'b'], undefined)).toEqual(['a', 'b', 'c']);
    expect(turnOrder(['c', 'a', 'b'], 'a')).toEqual(['b', 'c', 'a']);
    expect(turnOrder(['c', 'a', 'b'], 'c')).toEqual(['a', 'b', 'c']);
    expect(turnOrder(['a', 'c'], 'b')).toEqual(['c', 'a']);
  });
});
