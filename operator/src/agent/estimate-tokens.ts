// Token counts estimated without a tokenizer: a real one is model-specific and a large
// dependency for a number that decides when to compact and how far to cut a step's tool
// results; the reserve in the context budget absorbs the error.
//
// Four characters a token holds for English and code, but not for what tool results are
// often full of: base64, hex, hashes and UUIDs cost a token every 1.5-2 characters, CJK text
// about a token a character, an emoji two (2-4x the old count, so a step of such reads passed
// the window unnoticed). Tokenizers (tiktoken's cl100k and o200k and most open models' BPE)
// first split text where the kind of character changes: a word (with one space or mark before
// it), at most three digits, a run of punctuation, a lower-to-upper case change; they rarely
// merge across those splits. So the estimate counts those pieces. Against o200k and cl100k
// (docs/benchmarks.md) it comes to 0.94-1.2x for English, code, JSON and minified code, about
// 0.75-1x for base64, hex dumps and hashes, and 0.87-1.5x for CJK; it is never below the old
// four characters a token, so it errs only the safe way from where it was. One pass over the
// characters, no allocation, each message measured once a step: it runs on every message of
// every step.

import type { ModelMessage } from 'ai';

const CHARACTERS_PER_TOKEN = 4;
// Role markers and message framing cost a few tokens per message whatever the content.
const MESSAGE_OVERHEAD_TOKENS = 4;
// A lower-case word longer than this is more than one token.
const LETTERS_PER_TOKEN = 12;
// Digits go to the tokenizer in groups of at most three.
const DIGITS_PER_TOKEN = 3;
// Punctuation merges a few marks a token ('");', '===').
const MARKS_PER_TOKEN = 3;
// Indentation: the second space of a run is a token of its own, then one per eight more.
const SPACES_PER_TOKEN = 8;

const SPACE = 0;
const LOWER = 1;
const UPPER = 2;
const DIGIT = 3;
const MARK = 4;
const NEWLINE = 5;
const OTHER = 6;

function kindOf(code: number): number {
  if (code >= 97 && code <= 122) return LOWER;
  if (code >= 65 && code <= 90) return UPPER;
  if (code >= 48 && code <= 57) return DIGIT;
  if (code === 32 || code === 9) return SPACE;
  if (code === 10 || code === 13) return NEWLINE;
  return MARK;
}

/** The pieces a tokenizer's pre-split makes of the text, as described above. */
function countPieces(text: string): number {
  let tokens = 0;
  let previous = SPACE;
  // Characters in the current run of letters, digits or spaces; upper-case letters in a row; marks in a row.
  let run = 0;
  let upperRun = 0;
  let marks = 0;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code >= 0x80) {
      // Cyrillic, Greek and accented Latin (two UTF-8 bytes) about half a token; CJK and the rest
      // of the BMP a token; an emoji, two UTF-16 units, a token each.
      tokens += code < 0x800 ? 0.5 : 1;
      previous = OTHER;
      run = 0;
      continue;
    }
    const kind = kindOf(code);
    if (kind === LOWER || kind === UPPER) {
      if (previous !== LOWER && previous !== UPPER) {
        // One mark before a word goes with it ('.slice', '"path'), as one space does.
        if (!(previous === MARK && marks === 1)) tokens += 1;
        run = 1;
        upperRun = kind === UPPER ? 1 : 0;
      } else if (kind === UPPER && previous === LOWER) {
        tokens += 1; // camelCase: a new piece
        run = 1;
        upperRun = 1;
      } else if (kind === LOWER && upperRun >= 2) {
        tokens += 1; // 'HTTPServer': 'HTTP', 'Server'
        run = 1;
        upperRun = 0;
      } else {
        if (kind === UPPER) upperRun += 1;
        run += 1;
        if (run > LETTERS_PER_TOKEN) {
          tokens += 1;
          run = 1;
        }
      }
    } else if (kind === DIGIT) {
      if (previous !== DIGIT || run >= DIGITS_PER_TOKEN) {
        tokens += 1;
        run = 1;
      } else run += 1;
    } else if (kind === MARK) {
      if (previous !== MARK) marks = 0;
      if (marks % MARKS_PER_TOKEN === 0) tokens += 1;
      marks += 1;
    } else if (kind === NEWLINE) {
      if (previous !== NEWLINE) tokens += 1;
    } else if (previous === SPACE) {
      run += 1;
      if (run % SPACES_PER_TOKEN === 2) tokens += 1;
    } else run = 1;
    previous = kind;
  }
  return tokens;
}

export function estimateTextTokens(text: string): number {
  return Math.ceil(Math.max(text.length / CHARACTERS_PER_TOKEN, countPieces(text)));
}

// An image costs the model a bounded number of tokens whatever its size (OpenAI counts at most
// about 1 600 for a detailed one); its base64 is not text the model reads, so it is not counted
// as characters, or one image read would look like 350 000 tokens and force a compaction.
export const IMAGE_TOKENS = 1600;

/**
 * One part of a message's content (a text, a tool call, a tool result) as the provider gets
 * it: JSON, its images counted as IMAGE_TOKENS. A message costs the sum of its parts, so what
 * cutting one tool result saves is exactly its own change (fit-step-results.ts).
 */
export function estimatePartTokens(part: unknown): number {
  if (typeof part !== 'object' || part === null) return measurePart(part);
  let tokens = measured.get(part);
  if (tokens === undefined) measured.set(part, (tokens = measurePart(part)));
  return tokens;
}

// A step's context decisions measure the same messages several times (the request, the split,
// the kept part, the newest results), and a pass over a 128k-token conversation takes about
// 7 ms. Messages and their parts are never changed in place (a cut or a summary makes new
// ones), so each object is measured once.
const measured = new WeakMap<object, number>();

function measurePart(part: unknown): number {
  let images = 0;
  const json = JSON.stringify(part, (_key, value: unknown) => {
    if (!isImagePart(value)) return value;
    images += 1;
    return { type: value.type, mediaType: value.mediaType };
  });
  return estimateTextTokens(json ?? '') + images * IMAGE_TOKENS;
}

export function estimateMessageTokens(message: ModelMessage): number {
  let tokens = measured.get(message);
  if (tokens === undefined) measured.set(message, (tokens = measureMessage(message)));
  return tokens;
}

function measureMessage(message: ModelMessage): number {
  if (typeof message.content === 'string') return MESSAGE_OVERHEAD_TOKENS + estimateTextTokens(message.content);
  let total = MESSAGE_OVERHEAD_TOKENS;
  for (const part of message.content) total += estimatePartTokens(part);
  return total;
}

function isImagePart(value: unknown): value is { type: string; mediaType: string } {
  const part = value as { type?: unknown; mediaType?: unknown } | null;
  return (
    typeof part === 'object' &&
    part !== null &&
    (part.type === 'file' || part.type === 'image-data' || part.type === 'file-data') &&
    typeof part.mediaType === 'string' &&
    part.mediaType.startsWith('image')
  );
}

export function estimateMessagesTokens(messages: readonly ModelMessage[]): number {
  let total = 0;
  for (const message of messages) total += estimateMessageTokens(message);
  return total;
}
