// The model providers a run may name. Which SDK and base URL each uses is declared in
// operator/src/providers; the API only needs the names and which ones need a key.

export const PROVIDER_NAMES = ['openai', 'openai-compatible', 'deepseek', 'openrouter', 'groq', 'xai', 'moonshot', 'scripted'] as const;

export type ProviderName = (typeof PROVIDER_NAMES)[number];
