// Every model provider a run may name, declared as data. Adding an OpenAI-compatible vendor
// is one entry here; the code that builds a model switches on the wire protocol (`api`),
// never on the provider name. Base URLs and key variable names follow each vendor's docs.

/** Wire protocol, and so which adapter builds the model. */
export type ProviderApi = 'openai-responses' | 'openai-compatible-chat' | 'scripted';

export interface ProviderDeclaration {
  readonly name: string;
  readonly api: ProviderApi;
  /** Endpoint root used when spec.model.baseURL is not set. */
  readonly defaultBaseURL?: string;
  /** spec.model.baseURL must be given (no vendor default exists). */
  readonly requiresBaseURL: boolean;
  /** Calls need a key from spec.model.apiKeySecretRef. */
  readonly requiresApiKey: boolean;
  /** Conventional environment variable for the key (local mode, docs); the operator reads Secrets. */
  readonly apiKeyEnv?: string;
  /** Conventional environment variable for the model name (local mode, docs). */
  readonly modelEnv?: string;
  /** Used when spec.model.name is not set; absent means the name is required. */
  readonly defaultModel?: string;
  /**
   * Names of this provider's models that accept image inputs (read_file shows them images);
   * absent: none do. spec.model.images overrides it for a model this does not know.
   */
  readonly imageModels?: RegExp;
}

// Model families known to take images, for providers that serve many vendors' models. A name
// not matched gets text placeholders, which is safe; a wrong match would have the provider
// refuse the request, so the pattern stays narrow.
const VISION_MODEL_NAMES = /(gpt-4o|gpt-4\.1|gpt-5|claude|gemini|vision|llava|pixtral|[-_.]vl\b|-vl-)/i;

export const PROVIDER_REGISTRY = {
  openai: {
    name: 'openai',
    api: 'openai-responses',
    defaultBaseURL: 'https://api.openai.com/v1',
    requiresBaseURL: false,
    requiresApiKey: true,
    apiKeyEnv: 'OPENAI_API_KEY',
    modelEnv: 'OPENAI_MODEL',
    defaultModel: 'gpt-5.6',
    imageModels: /^(gpt-4o|gpt-4\.1|gpt-5|o3|o4|chatgpt)/,
  },
  'openai-compatible': {
    name: 'openai-compatible',
    api: 'openai-compatible-chat',
    requiresBaseURL: true,
    // Many self-hosted endpoints (vLLM, Ollama) take no key, so it is optional here.
    requiresApiKey: false,
    apiKeyEnv: 'OPENAI_API_KEY',
    modelEnv: 'OPENAI_MODEL',
    imageModels: VISION_MODEL_NAMES,
  },
  deepseek: {
    name: 'deepseek',
    api: 'openai-compatible-chat',
    defaultBaseURL: 'https://api.deepseek.com/v1',
    requiresBaseURL: false,
    requiresApiKey: true,
    apiKeyEnv: 'DEEPSEEK_API_KEY',
    modelEnv: 'DEEPSEEK_MODEL',
    defaultModel: 'deepseek-v4-flash',
  },
  openrouter: {
    name: 'openrouter',
    api: 'openai-compatible-chat',
    defaultBaseURL: 'https://openrouter.ai/api/v1',
    requiresBaseURL: false,
    requiresApiKey: true,
    apiKeyEnv: 'OPENROUTER_API_KEY',
    modelEnv: 'OPENROUTER_MODEL',
    imageModels: VISION_MODEL_NAMES,
  },
  groq: {
    name: 'groq',
    api: 'openai-compatible-chat',
    defaultBaseURL: 'https://api.groq.com/openai/v1',
    requiresBaseURL: false,
    requiresApiKey: true,
    apiKeyEnv: 'GROQ_API_KEY',
    modelEnv: 'GROQ_MODEL',
  },
  xai: {
    name: 'xai',
    api: 'openai-compatible-chat',
    defaultBaseURL: 'https://api.x.ai/v1',
    requiresBaseURL: false,
    requiresApiKey: true,
    apiKeyEnv: 'XAI_API_KEY',
    modelEnv: 'XAI_MODEL',
  },
  moonshot: {
    name: 'moonshot',
    api: 'openai-compatible-chat',
    // The international endpoint; mainland China accounts use https://api.moonshot.cn/v1 via baseURL.
    defaultBaseURL: 'https://api.moonshot.ai/v1',
    requiresBaseURL: false,
    requiresApiKey: true,
    apiKeyEnv: 'MOONSHOT_API_KEY',
    modelEnv: 'MOONSHOT_MODEL',
  },
  scripted: {
    name: 'scripted',
    api: 'scripted',
    requiresBaseURL: false,
    requiresApiKey: false,
    defaultModel: 'script',
  },
} as const satisfies Record<string, ProviderDeclaration>;

export type RegisteredProviderName = keyof typeof PROVIDER_REGISTRY;

export function isRegisteredProvider(name: string): name is RegisteredProviderName {
  return Object.hasOwn(PROVIDER_REGISTRY, name);
}

/** Whether read_file shows this model images: spec.model.images when set, else what the registry knows. */
export function modelAcceptsImages(model: {
  readonly provider: string;
  readonly name?: string | undefined;
  readonly images?: boolean | undefined;
}): boolean {
  if (model.images !== undefined) return model.images;
  const declaration = findProviderDeclaration(model.provider);
  const name = model.name ?? declaration?.defaultModel;
  return declaration?.imageModels !== undefined && name !== undefined && declaration.imageModels.test(name);
}

export function findProviderDeclaration(name: string): ProviderDeclaration | undefined {
  return isRegisteredProvider(name) ? PROVIDER_REGISTRY[name] : undefined;
}
