// The model for one step: reads the API key from the run's namespace for every call, so a
// rotated key takes effect at the next step and no key is ever kept in memory longer than a
// call, in Redis or in job data. The scripted model's script is read at a run's first step and
// kept for its later ones while this replica has room (run-script-cache.ts).
import type { LanguageModel } from 'ai';
import type { CodingRunSpec } from '../api/index.ts';
import type { CallingPolicy, CallingPolicyDependencies } from '../providers/calling-policy.ts';
import { createLanguageModel } from '../providers/create-language-model.ts';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { parseModelScript } from '../providers/scripted/model-script-schema.ts';
import { withCallingPolicy } from '../providers/with-calling-policy.ts';
import type { ModelFactory } from './agent-dependencies.ts';
import type { RunResources } from './run-resources.ts';
import { RunScriptCache } from './run-script-cache.ts';
import { isTokenShaped, TOKEN_SHAPE } from './token-shape.ts';

export function createModelFactory(
  resources: RunResources,
  policy: CallingPolicy,
  dependencies: CallingPolicyDependencies,
  fetch?: typeof globalThis.fetch,
  scripts: RunScriptCache = new RunScriptCache(),
): ModelFactory {
  return async (namespace: string, model: CodingRunSpec['model'], runUid?: string): Promise<LanguageModel> => {
    let apiKey: string | undefined;
    let script;
    if (model.apiKeySecretRef) {
      apiKey = await resources.secretValue(namespace, model.apiKeySecretRef.name, model.apiKeySecretRef.key);
      if (apiKey === undefined)
        throw new RunFailure(
          REASONS.ModelConfigurationInvalid,
          `Secret ${namespace}/${model.apiKeySecretRef.name} has no key "${model.apiKeySecretRef.key}" any more: restore it to let the run go on.`,
        );
      // Only a token goes into a header. A value with a line break (a PEM key, a credentials
      // file: any labelled Secret's key may be named) made fetch throw with the whole header
      // value in its message, which reached the run's status, Events and logs.
      if (!isTokenShaped(apiKey))
        throw new RunFailure(
          REASONS.ModelConfigurationInvalid,
          `Secret ${namespace}/${model.apiKeySecretRef.name} key "${model.apiKeySecretRef.key}" does not hold an API key: ` +
            `it must be ${TOKEN_SHAPE}; put only the key in it.`,
        );
      // The value checked is the one sent, as for a git token (git-token.ts): the raw value with a
      // leading newline made fetch throw quoting it (a key under 8 characters is not redacted), and
      // a leading byte order mark (U+FEFF, which trim() removes) made every call throw a TypeError.
      apiKey = apiKey.trim();
    }
    if (model.scriptRef) {
      const { name, key } = model.scriptRef;
      // The script the run started with, if kept; else read again (run-script-cache.ts says why both are right).
      script = runUid === undefined ? undefined : scripts.get(runUid, name, key);
      if (!script) {
        const text = await resources.configMapValue(namespace, name, key);
        if (text === undefined)
          throw new RunFailure(REASONS.ModelConfigurationInvalid, `ConfigMap ${namespace}/${name} has no key "${key}" any more.`);
        script = parseModelScript(text);
        if (runUid !== undefined) scripts.set(runUid, name, key, script, text.length);
      }
    }
    const languageModel = createLanguageModel(model, { apiKey, script, ...(fetch ? { fetch } : {}) });
    return withCallingPolicy(languageModel, { policy, dependencies, secrets: [apiKey] });
  };
}
