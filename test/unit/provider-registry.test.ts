import { describe, expect, it } from 'vitest';
import { PROVIDER_NAMES } from '../../operator/src/api/providers.ts';
import { createLanguageModel } from '../../operator/src/providers/create-language-model.ts';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { PROVIDER_REGISTRY } from '../../operator/src/providers/provider-registry.ts';

const isRunFailure = (error: unknown, reason: string): boolean => RunFailure.isInstance(error) && error.reason === reason;

describe('provider registry', () => {
  it('declares exactly the providers the CodingRun API accepts', () => {
    expect(Object.keys(PROVIDER_REGISTRY).sort()).toEqual([...PROVIDER_NAMES].sort());
  });

  it('gives every named compatible vendor an https default endpoint and a key variable', () => {
    for (const declaration of Object.values(PROVIDER_REGISTRY)) {
      if (declaration.api !== 'openai-compatible-chat' || declaration.requiresBaseURL) continue;
      expect(declaration.defaultBaseURL, declaration.name).toMatch(/^https:\/\//);
      expect(declaration.apiKeyEnv, declaration.name).toMatch(/^[A-Z]+_API_KEY$/);
    }
  });

  it.each([
    ['openai', 'openai.responses', 'gpt-5.6'],
    ['deepseek', 'deepseek.chat', 'deepseek-v4-flash'],
    ['groq', 'groq.chat', 'llama-x'],
    ['moonshot', 'moonshot.chat', 'kimi-x'],
  ])('builds %s with its adapter and model', (provider, providerId, modelId) => {
    const name = provider === 'openai' || provider === 'deepseek' ? undefined : modelId;
    const model = createLanguageModel({ provider, name }, { apiKey: 'sk-test-key-123456' });
    expect(model.provider).toBe(providerId);
    expect(model.modelId).toBe(modelId);
  });

  it('says what to set when the configuration is incomplete', () => {
    const attempt = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        expect(isRunFailure(error, 'ModelConfigurationInvalid')).toBe(true);
        return (error as Error).message;
      }
      throw new Error('expected a RunFailure (ModelConfigurationInvalid)');
    };
    expect(attempt(() => createLanguageModel({ provider: 'mistral', name: 'm' }))).toMatch(
      /Unknown model provider "mistral".*openai-compatible/,
    );
    expect(attempt(() => createLanguageModel({ provider: 'openai-compatible', name: 'm' }))).toContain('spec.model.baseURL');
    expect(attempt(() => createLanguageModel({ provider: 'groq', name: 'm' }))).toContain('spec.model.apiKeySecretRef');
    expect(attempt(() => createLanguageModel({ provider: 'xai' }, { apiKey: 'sk-test-key-123456' }))).toContain('spec.model.name');
    expect(attempt(() => createLanguageModel({ provider: 'scripted' }))).toContain('spec.model.scriptRef');
  });

  it('accepts a keyless openai-compatible endpoint (self-hosted servers often take none)', () => {
    const model = createLanguageModel({ provider: 'openai-compatible', name: 'm', baseURL: 'http://127.0.0.1:1/v1' });
    expect(model.modelId).toBe('m');
  });
});
