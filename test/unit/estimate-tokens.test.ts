// The token estimate decides when to compact and how far to cut a step's results: it must not
// count text the tokenizers split finely (CJK, base64, hex, emoji) at English's four
// characters a token, and must not inflate English and code either.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { estimateMessageTokens, estimatePartTokens, estimateTextTokens } from '../../operator/src/agent/estimate-tokens.ts';

const lines = (text: string, width: number) => text.match(new RegExp(`.{1,${width}}`, 'g'))!.join('\n');
const chinese = '模型的上下文窗口有限，因此较早的消息会被压缩成摘要。工具的结果同样受到大小限制，以免一步就让请求溢出。';
const source = readFileSync(new URL('../../operator/src/agent/context-manager.ts', import.meta.url), 'utf8');

describe('estimateTextTokens', () => {
  // Lower bounds are what o200k and cl100k count, give or take (docs/benchmarks.md): 0.66-0.87
  // tokens a CJK character, 1.5-1.7 characters a token of base64 and hex, 1.6 tokens an emoji.
  it.each([
    ['20 000 CJK characters', chinese.repeat(400).slice(0, 20_000), 15_000],
    ['64 KiB of base64 in lines', lines(randomBytes(48_000).toString('base64'), 76), 64_000 / 2],
    ['64 KiB of hex in lines', lines(randomBytes(32_000).toString('hex'), 64), 64_000 / 2],
    ['2 000 UUIDs', Array.from({ length: 2_000 }, () => crypto.randomUUID()).join('\n'), (2_000 * 37) / 2],
    ['4 000 emoji', '😀'.repeat(4_000), 8_000],
    ['10 000 Cyrillic letters', 'контекст '.repeat(1_250), 5_000],
  ])('counts %s at least as finely as a tokenizer splits them', (_, text, atLeast) => {
    expect(estimateTextTokens(text)).toBeGreaterThanOrEqual(atLeast);
    // Four characters a token, the old count, was 2-4x low on each of these.
    expect(estimateTextTokens(text)).toBeGreaterThan(1.5 * Math.ceil(text.length / 4));
  });

  it('keeps English and code at about four characters a token', () => {
    for (const text of [source, 'The quick brown fox jumps over the lazy dog. '.repeat(200)]) {
      expect(estimateTextTokens(text)).toBeGreaterThanOrEqual(Math.ceil(text.length / 4));
      expect(estimateTextTokens(text)).toBeLessThanOrEqual(Math.ceil((1.15 * text.length) / 4));
    }
  });

  it('is never below four characters a token, whatever the text', () => {
    for (const text of ['a'.repeat(400), ' '.repeat(400), '\n'.repeat(400), 'abcdefghijklmnop'.repeat(25)]) {
      expect(estimateTextTokens(text)).toBe(100);
    }
    expect(estimateTextTokens('')).toBe(0);
  });

  it('starts a piece at every change between letters and digits, every third digit and every lower-to-upper change', () => {
    expect(estimateTextTokens('x1y2'.repeat(25))).toBe(100);
    expect(estimateTextTokens('1234567890'.repeat(10))).toBe(34);
    expect(estimateTextTokens('aB'.repeat(50))).toBe(51);
  });
});

describe('estimateMessageTokens', () => {
  it('is the sum of its parts plus a small overhead, so cutting one part saves exactly its own change', () => {
    const parts = [
      { type: 'text' as const, text: chinese },
      { type: 'tool-call' as const, toolCallId: 'c1', toolName: 'read_file', input: { path: 'src/a.ts' } },
    ];
    expect(estimateMessageTokens({ role: 'assistant', content: parts })).toBe(
      4 + estimatePartTokens(parts[0]) + estimatePartTokens(parts[1]),
    );
    expect(estimateMessageTokens({ role: 'user', content: 'a'.repeat(400) })).toBe(104);
  });
});
