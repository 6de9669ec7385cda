// The Informer lists in pages (controller/informer.ts): every page into the cache, the watch
// from the snapshot's resourceVersion, a failed page starting the list over.
import type { Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Informer, type CachedObject, type ListAnswer, type ListPage } from '../../operator/src/controller/informer.ts';

const object = (name: string): CachedObject => ({ metadata: { name, namespace: 'ns', resourceVersion: '7' } });

/** A Watch that records the resourceVersion it was started from, then stays open until aborted. */
function recordingWatch(from: string[]): Watch {
  return {
    watch: async (_path: string, query: { resourceVersion?: string }, _onEvent: unknown, onDone: (error: unknown) => void) => {
      from.push(query.resourceVersion ?? '');
      const controller = new AbortController();
      controller.signal.addEventListener('abort', () => onDone(undefined));
      return controller;
    },
  } as unknown as Watch;
}

/** Names `a`…: a list of them served `limit` at a time, with the token as the next index. */
function pagedSource(names: string[], asked: ListPage[], failFirstAt?: number, typed = false) {
  let failed = false;
  return async (page: ListPage): Promise<ListAnswer<CachedObject>> => {
    asked.push(page);
    const start = Number(page.continue ?? 0);
    if (failFirstAt === start && !failed) {
      failed = true;
      throw Object.assign(new Error('the continue token has expired'), { code: 410 });
    }
    const end = Math.min(start + page.limit, names.length);
    const next = end < names.length ? String(end) : undefined;
    const token = next === undefined ? {} : typed ? { _continue: next } : { continue: next };
    return { items: names.slice(start, end).map(object), metadata: { resourceVersion: '7', ...token } };
  };
}

const quiet = { warn: () => undefined };
const noSleep = async () => undefined;
const NAMES = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];

describe('Informer lists in pages', () => {
  for (const typed of [false, true]) {
    it(`asks page after page until no token is left, and watches from the snapshot (${typed ? '_continue' : 'continue'})`, async () => {
      const asked: ListPage[] = [];
      const from: string[] = [];
      const changed: string[] = [];
      const informer = new Informer<CachedObject>(
        recordingWatch(from),
        { path: '/p', list: pagedSource(NAMES, asked, undefined, typed) },
        { onChange: (each) => changed.push(each.metadata!.name!), onDelete: () => undefined },
        quiet,
        noSleep,
        3,
      );
      await informer.start();
      await new Promise((resolve) => setTimeout(resolve, 5));
      informer.stop();

      expect(asked).toEqual([{ limit: 3 }, { limit: 3, continue: '3' }, { limit: 3, continue: '6' }]);
      expect(informer.list().map((each) => each.metadata!.name)).toEqual(NAMES);
      expect(changed).toEqual(NAMES);
      expect(from).toEqual(['7']);
    });
  }

  it('starts over from the first page when a page fails, and is not synced before the last page', async () => {
    const asked: ListPage[] = [];
    const from: string[] = [];
    const informer = new Informer<CachedObject>(
      recordingWatch(from),
      { path: '/p', list: pagedSource(NAMES, asked, 3) },
      { onChange: () => undefined, onDelete: () => undefined },
      quiet,
      noSleep,
      3,
    );
    await informer.start();
    // Synced only once the second list's last page is in.
    expect(informer.list()).toHaveLength(NAMES.length);
    await new Promise((resolve) => setTimeout(resolve, 5));
    informer.stop();

    expect(asked.map((page) => page.continue)).toEqual([undefined, '3', undefined, '3', '6']);
    expect(from).toEqual(['7']);
  });

  it('forgets what no page of a new list holds', async () => {
    const names = [...NAMES];
    const deleted: string[] = [];
    let lists = 0;
    const list = pagedSource(names, []);
    const informer = new Informer<CachedObject>(
      {
        // The first watch ends at once with 410 Gone: the informer lists again.
        watch: async (_path: string, _query: unknown, _onEvent: unknown, onDone: (error: unknown) => void) => {
          const controller = new AbortController();
          if (lists === 1) {
            names.splice(names.indexOf('d'), 1);
            queueMicrotask(() => onDone(Object.assign(new Error('too old resource version'), { code: 410 })));
          } else controller.signal.addEventListener('abort', () => onDone(undefined));
          return controller;
        },
      } as unknown as Watch,
      {
        path: '/p',
        list: async (page) => {
          if (page.continue === undefined) lists += 1;
          return list(page);
        },
      },
      { onChange: () => undefined, onDelete: (each) => deleted.push(each.metadata!.name!) },
      quiet,
      noSleep,
      3,
    );
    await informer.start();
    await new Promise((resolve) => setTimeout(resolve, 20));
    informer.stop();

    expect(lists).toBe(2);
    expect(deleted).toEqual(['d']);
    expect(informer.get('ns', 'd')).toBeUndefined();
    expect(informer.list()).toHaveLength(NAMES.length - 1);
  });
});
