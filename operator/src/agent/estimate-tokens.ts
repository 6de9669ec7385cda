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

export function estimateMessageTokens(message: ModelMessage): number {
  const content = typeof message.content === 'string' ? message.content : JSON.stringify(message.content);
  return MESSAGE_OVERHEAD_TOKENS + estimateTextTokens(content);
}

export function estimateMessagesTokens(messages: readonly ModelMessage[]): number {
  let total = 0;
  for (const message of messages) total += estimateMessageTokens(message);
  return total;
}
