// OutputTail (workers/output-tail.ts): a child's output kept to its last bytes, decoded once.
import { describe, expect, it } from 'vitest';
import { OutputTail } from '../../operator/src/workers/output-tail.ts';

describe('OutputTail', () => {
  it('reads a character split between two chunks as the character', () => {
    const bytes = Buffer.from('1\t0\tdocs/ünï.md\0', 'utf8');
    const split = bytes.indexOf(Buffer.from('ü', 'utf8')) + 1;
    const tail = new OutputTail(1024);
    tail.push(bytes.subarray(0, split));
    tail.push(bytes.subarray(split));
    expect(tail.text()).toBe('1\t0\tdocs/ünï.md\0');
  });

  it('keeps the last `cap` bytes of a long output, whatever the chunks', () => {
    const tail = new OutputTail(10);
    for (let i = 0; i < 1000; i++) tail.push(Buffer.from(`${i % 10}`.repeat(7)));
    expect(tail.text()).toBe('8889999999');
  });
});
