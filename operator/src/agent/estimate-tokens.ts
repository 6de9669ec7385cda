// Token counts estimated from character length: about four characters per token for English
// and code. A real tokenizer would be model-specific and a large dependency for a number that
// only decides when to compact; the reserve in the context budget absorbs the error. JSON
// encoding of structured parts adds quotes and escapes, which errs on the safe side.

import type { ModelMessage } from 'ai';

const CHARACTERS_PER_TOKEN = 4;
// Role markers and message framing cost a few tokens per message whatever the content.
const MESSAGE_OVERHEAD_TOKENS = 4;

export function estimateTextTokens(text: string): number {
  return Math.ceil(text.length / CHARACTERS_PER_TOKEN);
}

// An image costs the model a bounded number of tokens whatever its size (OpenAI counts at most
// about 1 600 for a detailed one); its base64 is not text the model reads, so it is not counted
// as characters, or one image read would look like 350 000 tokens and force a compaction.
export const IMAGE_TOKENS = 1600;

export function estimateMessageTokens(message: ModelMessage): number {
  if (typeof message.content === 'string') return MESSAGE_OVERHEAD_TOKENS + estimateTextTokens(message.content);
  let images = 0;
  const content = JSON.stringify(message.content, (_key, value: unknown) => {
    if (!isImagePart(value)) return value;
    images += 1;
    return { type: value.type, mediaType: value.mediaType };
  });
  return MESSAGE_OVERHEAD_TOKENS + estimateTextTokens(content) + images * IMAGE_TOKENS;
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
