// A Redis call the controller awaits is bounded (workers/answer-within.ts): one queued by a
// client that reconnects without limit must not hold a reconcile slot until Redis is back.
import { describe, expect, it } from 'vitest';
import { answerWithin, NoAnswerError } from '../../operator/src/workers/answer-within.ts';

describe('answerWithin', () => {
  it('gives up on a call that never answers (Redis down, the command queued) with NoAnswerError', async () => {
    const never = new Promise<number>(() => {});
    await expect(answerWithin(never, 20, 'stopping the agent')).rejects.toThrow(NoAnswerError);
    await expect(answerWithin(never, 20, 'stopping the agent')).rejects.toThrow('stopping the agent: no answer from Redis within 20 ms');
  });

  it("passes a call's answer or its own error through", async () => {
    await expect(answerWithin(Promise.resolve(3), 1_000, 'x')).resolves.toBe(3);
    await expect(answerWithin(Promise.reject(new Error('WRONGTYPE')), 1_000, 'x')).rejects.toThrow('WRONGTYPE');
  });
});
