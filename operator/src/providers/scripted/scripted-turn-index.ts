// Which script turn a call plays, derived from the prompt alone so the scripted model is
// stateless: a step redone after a worker crash sends the same prompt and replays the same
// turn. Turn N is played when N assistant messages are already in the conversation.
//
// Compaction folds old assistant messages into one summary message; the context manager
// records how many it folded in the summary's providerOptions under this key, so the count
// survives. Real providers ignore provider options that are not under their own name.

import type { LanguageModelV4Prompt } from '@ai-sdk/provider';

export const SUMMARISED_TURNS_PROVIDER_OPTIONS_NAMESPACE = 'chamvi';
export const SUMMARISED_TURNS_PROVIDER_OPTIONS_KEY = 'summarisedAssistantTurns';

export function scriptedTurnIndex(prompt: LanguageModelV4Prompt): number {
  let turns = 0;
  for (const message of prompt) {
    if (message.role === 'assistant') turns += 1;
    const folded = message.providerOptions?.[SUMMARISED_TURNS_PROVIDER_OPTIONS_NAMESPACE]?.[SUMMARISED_TURNS_PROVIDER_OPTIONS_KEY];
    if (typeof folded === 'number' && Number.isInteger(folded) && folded > 0) turns += folded;
  }
  return turns;
}
