// Turns spec.model into an ai SDK LanguageModel, driven by the provider registry. The key is
// passed in per call (the worker reads it from the run's Secret each time) and never stored
// anywhere else; the built model holds it only inside the SDK's request headers.

import type { LanguageModelV4 } from '@ai-sdk/provider';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { limitResponseSize } from './limit-response-size.ts';
import { withoutRedirects } from './without-redirects.ts';
import { findProviderDeclaration, PROVIDER_REGISTRY, type ProviderApi, type ProviderDeclaration } from './provider-registry.ts';
import type { ModelScript } from './scripted/model-script-schema.ts';
import { ScriptedLanguageModel } from './scripted/scripted-language-model.ts';

/** The part of spec.model this needs; the CodingRun schema's type fits it. */
export interface ModelSpecInput {
  readonly provider: string;
  readonly name?: string | undefined;
  readonly baseURL?: string | undefined;
}

export interface CreateLanguageModelOptions {
  /** From spec.model.apiKeySecretRef; required when the provider declares requiresApiKey. */
  readonly apiKey?: string | undefined;
  /** Injected fetch (tests, proxies); defaults to the global fetch. */
  readonly fetch?: typeof globalThis.fetch | undefined;
  /** The parsed script from spec.model.scriptRef; required for `scripted`. */
  readonly script?: ModelScript | undefined;
}

interface AdapterInput {
  readonly declaration: ProviderDeclaration;
  readonly modelName: string;
  readonly baseURL: string | undefined;
  readonly options: CreateLanguageModelOptions;
}

// One adapter per wire protocol; providers choose theirs by declaration.
const ADAPTERS: Record<ProviderApi, (input: AdapterInput) => LanguageModelV4> = {
  'openai-responses': ({ declaration, modelName, baseURL, options }) =>
    createOpenAI({
      name: declaration.name,
      // Always passed: without it the SDK falls back to process.env.OPENAI_API_KEY, which
      // is the operator's own environment, not the run's Secret.
      apiKey: options.apiKey ?? '',
      ...(baseURL === undefined ? {} : { baseURL }),
      ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    }).responses(modelName),
  'openai-compatible-chat': ({ declaration, modelName, baseURL, options }) =>
    createOpenAICompatible({
      name: declaration.name,
      baseURL: baseURL ?? '',
      ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
      ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      // Streamed Chat Completions report usage only when asked (stream_options.include_usage).
      includeUsage: true,
      // Send a tool result's image as an image_url part of the tool message; without this the
      // SDK would stringify it, base64 and all, into text. Only image reads produce such results
      // (workers/tool-execution.ts), and only for models that accept images.
      supportsMultiPartToolContent: true,
    }).chatModel(modelName),
  scripted: ({ modelName, options }) => {
    if (options.script === undefined) {
      throw new RunFailure(
        REASONS.ModelConfigurationInvalid,
        'The scripted provider needs a script: set spec.model.scriptRef to a ConfigMap key holding the script JSON.',
      );
    }
    return new ScriptedLanguageModel(options.script, modelName);
  },
};

export function createLanguageModel(modelSpec: ModelSpecInput, options: CreateLanguageModelOptions = {}): LanguageModelV4 {
  const declaration = findProviderDeclaration(modelSpec.provider);
  if (declaration === undefined) {
    throw new RunFailure(
      REASONS.ModelConfigurationInvalid,
      `Unknown model provider "${modelSpec.provider}". Set spec.model.provider to one of: ${Object.keys(PROVIDER_REGISTRY).join(', ')}.`,
    );
  }
  const modelName = modelSpec.name ?? declaration.defaultModel;
  if (modelName === undefined || modelName === '') {
    throw new RunFailure(REASONS.ModelConfigurationInvalid, `The ${declaration.name} provider has no default model: set spec.model.name.`);
  }
  const baseURL = modelSpec.baseURL ?? declaration.defaultBaseURL;
  if (declaration.requiresBaseURL && (baseURL === undefined || baseURL === '')) {
    throw new RunFailure(
      REASONS.ModelConfigurationInvalid,
      `The ${declaration.name} provider needs an endpoint: set spec.model.baseURL to the API root, e.g. https://llm.example/v1.`,
    );
  }
  if (declaration.requiresApiKey && (options.apiKey === undefined || options.apiKey === '')) {
    throw new RunFailure(
      REASONS.ModelConfigurationInvalid,
      `The ${declaration.name} provider needs an API key: set spec.model.apiKeySecretRef to a Secret key in the run namespace.`,
    );
  }
  // Every HTTP answer is read through a size bound (limit-response-size.ts says why), and no
  // redirect is followed (without-redirects.ts).
  const fetch = limitResponseSize(withoutRedirects(options.fetch ?? ((input, init) => globalThis.fetch(input, init))));
  return ADAPTERS[declaration.api]({ declaration, modelName, baseURL, options: { ...options, fetch } });
}
