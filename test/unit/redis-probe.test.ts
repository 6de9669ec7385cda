// A probe of Redis (workers/redis-probe.ts) sends nothing while its connection is not ready and
// one command for all the calls made while one is in flight: /readyz and /metrics, which anyone
// who reaches the health port can call, must not grow ioredis's queues while Redis is away.
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../operator/src/cli/local/free-port.ts';
import { RedisNotConnectedError } from '../../operator/src/workers/errors/redis-not-connected-error.ts';
import { redisProbe } from '../../operator/src/workers/redis-probe.ts';

let client: Redis | undefined;
afterEach(() => {
  client?.disconnect();
  client = undefined;
});

/** A call of `ask` that answers when the test says. */
function heldAsk() {
  const calls: Array<{ resolve(value: string): void; reject(error: Error): void }> = [];
  const ask = () => new Promise<string>((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, ask };
}

describe('redisProbe', () => {
  it('queues nothing on a real ioredis client whose Redis is down: 10 000 probes, an empty offline queue', async () => {
    // The operator's connections: commands retried without limit, kept while disconnected.
    client = new Redis(`redis://127.0.0.1:${await freePort()}`, { maxRetriesPerRequest: null, lazyConnect: false });
    client.on('error', () => undefined);
    const ping = redisProbe(client, () => client!.ping());
    const answers = await Promise.allSettled(Array.from({ length: 10_000 }, () => ping()));
    expect(answers.every((answer) => answer.status === 'rejected' && RedisNotConnectedError.isInstance(answer.reason))).toBe(true);
    expect((answers[0] as PromiseRejectedResult).reason.message).toMatch(/^redis not connected \(status (connecting|reconnecting|close)\)/);
    expect((client as unknown as { offlineQueue: { length: number } }).offlineQueue.length).toBe(0);
  });

  it('shares the command in flight with every probe made before it answers, and asks again after', async () => {
    const { calls, ask } = heldAsk();
    const probe = redisProbe({ status: 'ready' }, ask);
    const waiting = Array.from({ length: 100 }, () => probe());
    expect(calls).toHaveLength(1);
    calls[0]!.resolve('PONG');
    expect(await Promise.all(waiting)).toEqual(Array(100).fill('PONG'));
    void probe();
    expect(calls).toHaveLength(2);
  });

  it('asks again after a command in flight failed, and passes its error to every probe that waited', async () => {
    const { calls, ask } = heldAsk();
    const probe = redisProbe({ status: 'ready' }, ask);
    const waiting = [probe(), probe()];
    calls[0]!.reject(new Error('NOAUTH'));
    for (const answer of waiting) await expect(answer).rejects.toThrow('NOAUTH');
    void probe().catch(() => undefined);
    expect(calls).toHaveLength(2);
  });

  it('answers not connected at once when the connection drops with a command in flight, and sends none', async () => {
    const { calls, ask } = heldAsk();
    const connection = { status: 'ready' };
    const probe = redisProbe(connection, ask);
    void probe().catch(() => undefined);
    connection.status = 'reconnecting';
    await expect(probe()).rejects.toThrow('redis not connected (status reconnecting)');
    expect(calls).toHaveLength(1);
  });
});
