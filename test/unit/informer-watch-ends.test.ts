// How the Informer (controller/informer.ts) takes the end of a watch: client-node's inactivity
// timeout on a watch that was open is a normal end (resume at once, no warning, no back-off);
// a connect that timed out, or any other error, is a failure that is logged and backed off.
import type { Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Informer, type CachedObject } from '../../operator/src/controller/informer.ts';

type OnEvent = (type: string, object: CachedObject) => void;
type OnDone = (error: unknown) => void;

/** What one watch call does: `connected` ones answer first and end later; others end before they answer. */
interface Ending {
  connected: boolean;
  error?: unknown;
  event?: CachedObject;
}

/** client-node's error for both of its timeouts (connect, and 30 s without data). */
const timeout = () => new DOMException('The operation was aborted due to timeout', 'TimeoutError');

/** A Watch that plays `endings` in order, then stays open; records each call's resourceVersion. */
function scriptedWatch(endings: Ending[], from: string[]): Watch {
  return {
    watch: async (_path: string, query: { resourceVersion?: string }, onEvent: OnEvent, onDone: OnDone) => {
      from.push(query.resourceVersion ?? '');
      const controller = new AbortController();
      const ending = endings.shift();
      if (!ending) {
        controller.signal.addEventListener('abort', () => onDone(null));
        return controller;
      }
      if (!ending.connected) {
        onDone(ending.error); // as client-node does when the fetch never answered
        return controller;
      }
      setTimeout(() => {
        if (ending.event) onEvent('ADDED', ending.event);
        onDone(ending.error);
      }, 1);
      return controller;
    },
  } as unknown as Watch;
}

async function play(endings: Ending[]) {
  const from: string[] = [];
  const warnings: Array<{ retryInMs?: number }> = [];
  const sleeps: number[] = [];
  const calls = endings.length + 1;
  const informer = new Informer<CachedObject>(
    scriptedWatch(endings, from),
    { path: '/p', list: async () => ({ items: [], metadata: { resourceVersion: '5' } }) },
    { onChange: () => undefined, onDelete: () => undefined },
    { warn: (fields) => warnings.push(fields as { retryInMs?: number }) },
    async (ms) => void sleeps.push(ms),
  );
  await informer.start();
  for (let waited = 0; from.length < calls && waited < 200; waited += 1) await new Promise((resolve) => setTimeout(resolve, 5));
  informer.stop();
  return { from, warnings, sleeps, informer };
}

const object = (name: string, resourceVersion: string): CachedObject => ({ metadata: { name, namespace: 'ns', resourceVersion } });

describe('Informer: how a watch ends', () => {
  it('resumes a quiet watch that client-node timed out at once, from where it was, without a warning', async () => {
    const { from, warnings, sleeps, informer } = await play([
      { connected: true, event: object('a', '9'), error: timeout() },
      { connected: true, error: timeout() },
      { connected: true, error: timeout() },
    ]);
    expect(warnings).toEqual([]);
    expect(sleeps).toEqual([]);
    expect(from).toEqual(['5', '9', '9', '9']);
    expect(informer.get('ns', 'a')?.metadata?.resourceVersion).toBe('9');
  });

  it('backs off, with a warning, when the watch timed out before it was answered', async () => {
    const { from, warnings, sleeps } = await play([
      { connected: false, error: timeout() },
      { connected: false, error: timeout() },
    ]);
    expect(warnings.map((each) => each.retryInMs)).toEqual([250, 500]);
    expect(sleeps).toEqual([250, 500]);
    expect(from).toEqual(['5', '5', '5']);
  });

  it('backs off, with a warning, when an open watch fails otherwise', async () => {
    const { warnings, sleeps } = await play([{ connected: true, error: new TypeError('terminated') }]);
    expect(warnings.map((each) => each.retryInMs)).toEqual([250]);
    expect(sleeps).toEqual([250]);
  });
});
