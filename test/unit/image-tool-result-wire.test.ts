// What an image read_file result becomes on the wire, for every provider the registry builds:
// the request body the SDK sends, captured by a fake fetch. modelAcceptsImages says yes only
// where the transport carries a tool result's image as an image part; a transport that turned
// it into text (the SDK's JSON stringification of a `content` tool output, as @ai-sdk/openai's
// `.chat()` model and @ai-sdk/openai-compatible without supportsMultiPartToolContent do)
// would put up to ~1.4 M characters of base64 into the model's context as text.
import { generateText } from 'ai';
import { describe, expect, it } from 'vitest';
import { decideImageResult, type ImageRead } from '../../operator/src/agent/image-result.ts';
import { createLanguageModel } from '../../operator/src/providers/create-language-model.ts';
import { modelAcceptsImages, PROVIDER_REGISTRY } from '../../operator/src/providers/provider-registry.ts';
import { toolMessage } from '../../operator/src/workers/tool-execution.ts';

// A 1×1 PNG.
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
const READ: ImageRead = { path: 'a.png', type: 'image', mediaType: 'image/png', bytes: 70, content: PIXEL };
const DATA_URL = `data:image/png;base64,${PIXEL}`;

// Every provider that goes over HTTP; `scripted` answers from a script and sends nothing.
const HTTP_PROVIDERS = Object.values(PROVIDER_REGISTRY)
  .filter((declaration) => declaration.api !== 'scripted')
  .map((declaration) => declaration.name);

/** The JSON body the SDK sends for one step whose read_file answered the image, as a run of `model` builds it. */
async function requestBody(model: { provider: string; name: string; images?: boolean }): Promise<unknown> {
  const shown = decideImageResult({ read: READ, modelAcceptsImages: modelAcceptsImages(model), shownThisStep: 0 });
  let body: string | undefined;
  const fetch: typeof globalThis.fetch = async (_input, init) => {
    body = String(init?.body);
    return new Response(JSON.stringify({ error: { message: 'captured' } }), {
      status: 400,
      headers: { 'content-type': 'application/json' },
    });
  };
  const languageModel = createLanguageModel({ ...model, baseURL: 'https://llm.example/v1' }, { apiKey: 'sk-test-key-123456', fetch });
  await generateText({
    model: languageModel,
    maxRetries: 0,
    messages: [
      { role: 'user', content: 'Look at a.png.' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'read_file', input: { path: 'a.png' } }] },
      toolMessage([{ toolCallId: 'c1', toolName: 'read_file', ok: true, ...shown }]),
    ],
  }).catch(() => undefined);
  // Undefined here: the SDK refused the prompt before sending it.
  expect(body, `${model.provider}: no request was sent`).toBeDefined();
  return JSON.parse(body ?? 'null') as unknown;
}

/** Image parts (Responses `input_image`, Chat Completions `image_url`) by their URL, and any other string holding the base64. */
function findImage(body: unknown): { images: string[]; asText: string[] } {
  const images: string[] = [];
  const asText: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === 'string') {
      if (value.includes(PIXEL)) asText.push(value.slice(0, 80));
    } else if (Array.isArray(value)) {
      value.forEach(walk);
    } else if (typeof value === 'object' && value !== null) {
      const part = value as { type?: unknown; image_url?: unknown };
      if (part.type === 'input_image' && typeof part.image_url === 'string') images.push(part.image_url);
      else if (part.type === 'image_url' && typeof (part.image_url as { url?: unknown } | undefined)?.url === 'string') {
        images.push((part.image_url as { url: string }).url);
      } else Object.values(value).forEach(walk);
    }
  };
  walk(body);
  return { images, asText };
}

describe('an image read_file result on the wire', () => {
  it.each(HTTP_PROVIDERS)('%s, for a model that accepts images: sends it as an image part, never its base64 as text', async (provider) => {
    // spec.model.images: true, so every transport is checked, not only those the registry knows vision models for.
    const model = { provider, name: 'gpt-4o', images: true };
    expect(modelAcceptsImages(model)).toBe(true);
    expect(findImage(await requestBody(model))).toEqual({ images: [DATA_URL], asText: [] });
  });

  it.each(HTTP_PROVIDERS)('%s, for a model that does not accept images: sends no base64 at all', async (provider) => {
    const model = { provider, name: 'gpt-4o', images: false };
    expect(modelAcceptsImages(model)).toBe(false);
    const body = await requestBody(model);
    expect(findImage(body)).toEqual({ images: [], asText: [] });
    expect(JSON.stringify(body)).toContain('not shown: this model does not accept images');
  });

  it.each([
    ['openai', 'gpt-5.6'],
    ['openai-compatible', 'qwen2.5-vl-72b-instruct'],
    ['openrouter', 'anthropic/claude-sonnet-4.5'],
  ])('%s %s, a vision model the registry knows: sends it as an image part', async (provider, name) => {
    expect(modelAcceptsImages({ provider, name })).toBe(true);
    expect(findImage(await requestBody({ provider, name }))).toEqual({ images: [DATA_URL], asText: [] });
  });
});
