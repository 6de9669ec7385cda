// Accepting a run for local mode before anything starts: the same spec schema and
// cross-field rules as the operator (parseSpec), the same reference checks (validateRun)
// against the objects in the file, and the local rules for repositories, API keys and the
// sandbox's variables (local-env-names.ts).
// An API key the file does not hold comes from CHAMVI_API_KEY, or from the provider's own
// variable (OPENAI_API_KEY, ...) only when it goes to that provider's own endpoint: a
// repository's run.yaml naming openai-compatible and its own baseURL would otherwise have the
// user's OpenAI key sent as a Bearer token to a host of its choosing. Security #11.3. Nor may
// any other reference in the file name the Secret that key fills: the clone would send it to the
// repository's host.
// A refusal is a ManifestError that names the file, the run and the field.
import { randomUUID } from 'node:crypto';
import { API_VERSION, type CodingRun, type CodingRunSpec } from '../../api/index.ts';
import type { OperatorConfig } from '../../config/operator-config.ts';
import { findProviderDeclaration } from '../../providers/provider-registry.ts';
import { USABLE_BY_RUNS_LABEL, USABLE_BY_RUNS_VALUE } from '../../reconcile/secret-opt-in.ts';
import { parseSpec, referencesOf, validateRun } from '../../reconcile/validate-run.ts';
import { ManifestError } from '../errors/manifest-error.ts';
import { localEnvNameProblem } from './local-env-names.ts';
import { localRepositoryUrl } from './local-repository.ts';
import type { LocalManifest, ManifestObjects } from './manifest-file.ts';

/** Checked first for any provider's key when the file holds no Secret for it. */
export const API_KEY_ENV = 'CHAMVI_API_KEY';

export interface AcceptedRun extends ManifestObjects {
  /** As the API server would store it: uid, generation and creation time set; local paths as file:// URLs. */
  run: CodingRun;
  spec: CodingRunSpec;
  /** Where the API key came from, when not from the file. */
  apiKeyFrom?: string;
}

type ModelEndpointSpec = Pick<CodingRunSpec['model'], 'provider' | 'baseURL'>;

/**
 * The variables an API key may come from for a run's model, in the order they are read. The
 * provider's variable holds a key for the vendor's endpoint, so it is read only when the run
 * names none (spec.model.baseURL unset): a run whose file chooses the endpoint gets
 * CHAMVI_API_KEY, which the user sets for this command, or a Secret in the file.
 */
export function apiKeyVariables(model: ModelEndpointSpec): string[] {
  const conventional = findProviderDeclaration(model.provider)?.apiKeyEnv;
  return conventional && model.baseURL === undefined ? [API_KEY_ENV, conventional] : [API_KEY_ENV];
}

/** Host (and port) the model's calls, and so its key, go to; undefined when there is none (scripted). */
export function modelEndpointHost(model: ModelEndpointSpec): string | undefined {
  const baseURL = model.baseURL ?? findProviderDeclaration(model.provider)?.defaultBaseURL;
  if (baseURL === undefined) return undefined;
  try {
    return new URL(baseURL).host;
  } catch {
    return undefined;
  }
}

/** What run --local tells the user when it took the key from a variable: which one, and where it goes. */
export function apiKeySourceNote(accepted: Pick<AcceptedRun, 'spec' | 'apiKeyFrom'>): string | undefined {
  const keyRef = accepted.spec.model.apiKeySecretRef;
  if (!accepted.apiKeyFrom || !keyRef) return undefined;
  const host = modelEndpointHost(accepted.spec.model);
  return `the API key for Secret ${keyRef.name} comes from $${accepted.apiKeyFrom}${host ? ` and is sent to ${host}` : ''}`;
}

/** Why the provider's variable was not offered, for the refusal; '' when it was (or there is none). */
function unusedProviderVariable(model: ModelEndpointSpec): string {
  const conventional = findProviderDeclaration(model.provider)?.apiKeyEnv;
  if (!conventional || model.baseURL === undefined) return '';
  return ` (${conventional} is not sent to an endpoint the file names: ${model.baseURL})`;
}

/**
 * The run ready for the local loop, or a ManifestError. `config` supplies allowRepo
 * (LOCAL_ALLOW_REPO), so the refusal of option-like URLs is the operator's own.
 */
export function acceptLocalRun(manifest: LocalManifest, env: NodeJS.ProcessEnv, config: OperatorConfig, now: Date): AcceptedRun {
  const { source } = manifest;
  const { name, namespace } = manifest.run.metadata;
  const refused = (message: string) => new ManifestError(`${source}: codingrun/${name}: ${message}`);

  const parsed = parseSpec(manifest.run);
  if (!parsed.ok) throw refused(parsed.refusal.message.replace(/; fix the field and create the run again$/, ''));
  for (const [index, { name }] of (parsed.spec.sandbox.env ?? []).entries()) {
    const problem = localEnvNameProblem(name);
    if (problem) throw refused(`spec.sandbox.env[${index}].name: ${problem}`);
  }
  const url = localRepositoryUrl(parsed.spec.repository.url, manifest.directory);
  const spec: CodingRunSpec = { ...parsed.spec, repository: { ...parsed.spec.repository, url } };
  const rawSpec = manifest.run.spec as { repository: object };
  const run: CodingRun = {
    apiVersion: API_VERSION,
    kind: manifest.run.kind,
    metadata: { ...manifest.run.metadata, uid: randomUUID(), generation: 1, resourceVersion: '1', creationTimestamp: now.toISOString() },
    spec: { ...manifest.run.spec, repository: { ...rawSpec.repository, url } },
  };

  const secrets = new Map(manifest.secrets);
  const secretLabels = new Map(manifest.secretLabels);
  let apiKeyFrom: string | undefined;
  const keyRef = spec.model.apiKeySecretRef;
  if (keyRef && secrets.get(keyRef.name)?.[keyRef.key] === undefined) {
    const variables = apiKeyVariables(spec.model);
    const variable = variables.find((candidate) => env[candidate]);
    if (!variable) {
      throw refused(
        `spec.model.apiKeySecretRef names Secret ${keyRef.name} (key "${keyRef.key}"), which is not in the file; ` +
          `add the Secret to the file or set ${variables.join(' or ')}${unusedProviderVariable(spec.model)}`,
      );
    }
    // The variable's key is for the model's endpoint, the host the note names. Any other reference
    // to its Secret would hand it to someone else: a clone's or a push's credentialsSecretRef has
    // git send it as Basic auth to the repository's host, which the file chooses, before any model
    // call or approval. Any key of it, for the Secret will carry the opt-in the variable gives.
    const other = referencesOf(spec).find(
      (reference) => reference.kind === 'Secret' && reference.name === keyRef.name && reference.field !== 'spec.model.apiKeySecretRef',
    );
    if (other) {
      throw refused(
        `${other.field} names Secret ${keyRef.name}, which holds the API key from $${variable} for the model's endpoint only; ` +
          `give it a Secret of its own in the file, holding the repository's token`,
      );
    }
    secrets.set(keyRef.name, { ...secrets.get(keyRef.name), [keyRef.key]: env[variable]! });
    // The user gave this key to this run by setting the variable: that is its opt-in.
    secretLabels.set(keyRef.name, { ...secretLabels.get(keyRef.name), [USABLE_BY_RUNS_LABEL]: USABLE_BY_RUNS_VALUE });
    apiKeyFrom = variable;
  }

  const found = {
    secrets: Object.fromEntries([...secrets].map(([secret, values]) => [secret, Object.keys(values)])),
    configMaps: Object.fromEntries(
      [...manifest.configMaps].map(([configMap, { data, binaryData }]) => [configMap, Object.keys({ ...data, ...binaryData })]),
    ),
    secretLabels: Object.fromEntries(secretLabels),
  };
  const refusal = validateRun({ ...run, metadata: { ...run.metadata, namespace } }, spec, config, found);
  if (refusal) {
    // The operator's messages speak of creating objects in the namespace; here they go in the file.
    throw refused(
      `${refusal.reason}: ${refusal.message.replace(/; create it in the run's namespace and create the run again$/, '; add it to the file')}`,
    );
  }
  return { run, spec, configMaps: manifest.configMaps, secrets, secretLabels, ...(apiKeyFrom ? { apiKeyFrom } : {}) };
}
