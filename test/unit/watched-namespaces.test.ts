// How a controller's informers, grouped by watched namespace (controller/watched-namespaces.ts),
// decide when the controller starts: a namespace whose lists are refused (403, 404) is set
// aside at once and holds back no other; other failures are waited for up to the grace; a
// namespace set aside joins once it lists, and the keys it queued meanwhile are handed back.
import type { Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Informer, type CachedObject, type ListAnswer } from '../../operator/src/controller/informer.ts';
import {
  WatchedNamespaces,
  cachesReadiness,
  namespaceListing,
  type InformerListing,
} from '../../operator/src/controller/watched-namespaces.ts';

const forbidden = () => Object.assign(new Error('codingruns is forbidden'), { code: 403 });
const notFound = () => Object.assign(new Error('the server could not find the requested resource'), { code: 404 });
const serverError = () => Object.assign(new Error('etcdserver: request timed out'), { code: 500 });

describe('namespaceListing', () => {
  const listed: InformerListing = { listed: true };
  const pending: InformerListing = { listed: false };
  it.each([
    ['every informer listed', [listed, listed], 0, 'listed'],
    ['one still listing, none failed, long after the grace', [listed, pending], 120_000, 'waiting'],
    ['one refused (403) at once', [listed, { listed: false, failure: forbidden() }], 0, 'setAside'],
    ['one not found (404) at once', [{ listed: false, failure: notFound() }, pending], 0, 'setAside'],
    ['one failing with a 5xx within the grace', [listed, { listed: false, failure: serverError() }], 59_999, 'waiting'],
    ['one failing with a 5xx past the grace', [listed, { listed: false, failure: serverError() }], 60_000, 'setAside'],
    ['one dropped connection past the grace', [{ listed: false, failure: new TypeError('fetch failed') }], 60_000, 'setAside'],
  ] as const)('%s: %s', (_name, informers, waitedMs, expected) => {
    expect(namespaceListing(informers, waitedMs, 60_000)).toBe(expected);
  });
});

describe('cachesReadiness', () => {
  it('is not ready before the start, ready when all listed, degraded naming the namespace set aside, not ready when none listed', () => {
    expect(cachesReadiness(false, 2, [])).toBe('caches not synced yet');
    expect(cachesReadiness(true, 2, [])).toBeUndefined();
    expect(cachesReadiness(true, 2, [{ namespace: 'team-b', problem: 'HTTP 403' }])).toEqual({
      degraded: 'reconciling without namespaces it cannot list, until they list: team-b (HTTP 403)',
    });
    expect(cachesReadiness(true, 1, [{ namespace: '*', problem: 'HTTP 403' }])).toBe('no watched namespace could be listed: * (HTTP 403)');
  });
});

/** A Watch whose watches stay open until aborted. */
const openWatch = {
  watch: async () => new AbortController(),
} as unknown as Watch;

/** A list source whose answer is switched by the test: refused with `failure`, or one object. */
function switchableSource(namespace: string) {
  const state: { failure: (() => Error) | undefined; lists: number } = { failure: undefined, lists: 0 };
  const source = {
    path: `/apis/chamvi.dev/v1alpha1/namespaces/${namespace}/codingruns`,
    list: async (): Promise<ListAnswer<CachedObject>> => {
      state.lists++;
      if (state.failure) throw state.failure();
      return { items: [{ metadata: { namespace, name: `run-${namespace}`, resourceVersion: '1' } }], metadata: { resourceVersion: '1' } };
    },
  };
  return { state, source };
}

function scene(options: { graceMs?: number } = {}) {
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const infos: string[] = [];
  const handedBack: Array<{ namespace: string; keys: string[] }> = [];
  const timers: Array<() => void> = [];
  let now = 0;
  const logger = {
    warn: (fields: object, message: string) => warnings.push({ fields: fields as Record<string, unknown>, message }),
    info: (_fields: object, message: string) => infos.push(message),
  };
  const watched = new WatchedNamespaces({
    controller: 'runs',
    logger,
    onListed: (namespace, keys) => handedBack.push({ namespace, keys }),
    graceMs: options.graceMs ?? 60_000,
    now: () => now,
    setTimer: (callback) => timers.push(callback),
    clearTimer: () => undefined,
  });
  const sources = ['team-a', 'team-b'].map((namespace) => {
    const { state, source } = switchableSource(namespace);
    // Retries 1 ms apart: the back-off's length is the informer's business, not this test's.
    const informer = new Informer<CachedObject>(
      openWatch,
      source,
      { onChange: () => undefined, onDelete: () => undefined },
      logger,
      () => new Promise((resolve) => setTimeout(resolve, 1)),
    );
    watched.add(namespace, informer);
    return { state, informer };
  });
  return {
    watched,
    a: sources[0]!,
    b: sources[1]!,
    warnings,
    infos,
    handedBack,
    /** The grace passes: the clock moves on and the group's timer fires. */
    graceEnds(): void {
      now += options.graceMs ?? 60_000;
      for (const fire of timers.splice(0)) fire();
    },
  };
}

/** Resolves to 'started', or 'waiting' if `start` has not resolved within `ms`. */
const within = (start: Promise<void>, ms: number) =>
  Promise.race([start.then(() => 'started'), new Promise((resolve) => setTimeout(() => resolve('waiting'), ms))]);

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !condition(); waited += 5) {
    if (waited > 2_000) throw new Error(`not within 2 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('WatchedNamespaces', () => {
  it('starts without a namespace whose lists are refused (403), and reconciles it once it lists', async () => {
    const { watched, a, b, warnings, handedBack } = scene();
    b.state.failure = forbidden;
    try {
      expect(await within(watched.start(), 1_000)).toBe('started');
      expect(watched.listed('team-a')).toBe(true);
      expect(watched.listed('team-b')).toBe(false);
      expect(watched.mayReconcile('team-a/run-team-a')).toBe(true);
      expect(watched.mayReconcile('team-b/run-team-b')).toBe(false);
      expect(watched.readiness()).toEqual({ degraded: expect.stringContaining('team-b (HTTP 403)') });

      // Retried in the background, with one warning for the namespace, not one per retry.
      await until(() => b.state.lists >= 5, 'five lists of team-b');
      expect(warnings.map(({ fields }) => fields.namespace)).toEqual(['team-b']);
      expect(warnings[0]!.fields).toMatchObject({
        controller: 'runs',
        code: 403,
        paths: ['/apis/chamvi.dev/v1alpha1/namespaces/team-b/codingruns'],
      });
      expect(handedBack).toEqual([]);

      b.state.failure = undefined;
      await until(() => handedBack.length > 0, 'team-b listed');
      expect(handedBack).toEqual([{ namespace: 'team-b', keys: ['team-b/run-team-b'] }]);
      expect(b.informer.get('team-b', 'run-team-b')).toBeDefined();
      expect(watched.mayReconcile('team-b/run-team-b')).toBe(true);
      expect(watched.readiness()).toBeUndefined();
      expect(a.state.lists).toBe(1);
    } finally {
      watched.stop();
    }
  });

  it('waits for a namespace whose lists fail with a 5xx, and starts with it when it lists within the grace', async () => {
    const { watched, b, warnings } = scene();
    b.state.failure = serverError;
    try {
      const start = watched.start();
      await until(() => b.state.lists >= 3, 'three lists of team-b');
      expect(await within(start, 50)).toBe('waiting');
      expect(watched.readiness()).toBe('caches not synced yet');
      b.state.failure = undefined;
      expect(await within(start, 1_000)).toBe('started');
      expect(watched.listed('team-b')).toBe(true);
      // The failure is logged once, as something waited for; nothing is set aside.
      expect(warnings.map(({ message }) => message)).toEqual([
        'cannot list a watched namespace yet; waiting for it before reconciling without it',
      ]);
    } finally {
      watched.stop();
    }
  });

  it('sets a namespace still failing with a 5xx aside once the grace has passed', async () => {
    const { watched, b, warnings, graceEnds } = scene();
    b.state.failure = serverError;
    try {
      const start = watched.start();
      await until(() => b.state.lists >= 2, 'two lists of team-b');
      expect(await within(start, 50)).toBe('waiting');
      graceEnds();
      expect(await within(start, 1_000)).toBe('started');
      expect(watched.listed('team-a')).toBe(true);
      expect(watched.listed('team-b')).toBe(false);
      expect(warnings.map(({ fields }) => fields.namespace)).toEqual(['team-b', 'team-b']);
      expect(warnings[1]!.message).toMatch(/^cannot list a watched namespace: reconciling the other namespaces without it/);
    } finally {
      watched.stop();
    }
  });

  it('is not ready when no watched namespace could be listed', async () => {
    const { watched, a, b } = scene();
    a.state.failure = forbidden;
    b.state.failure = notFound;
    try {
      expect(await within(watched.start(), 1_000)).toBe('started');
      expect(watched.readiness()).toBe('no watched namespace could be listed: team-a (HTTP 403), team-b (HTTP 404)');
    } finally {
      watched.stop();
    }
  });
});
