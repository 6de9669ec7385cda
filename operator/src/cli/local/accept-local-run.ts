// Accepting a run for local mode before anything starts: the same spec schema and
// cross-field rules as the operator (parseSpec), the same reference checks (validateRun)
// against the objects in the file, and the local rules for repositories, API keys and the
// sandbox's variables (local-env-names.ts).
// A refusal is a ManifestError that names the file, the run and the field.
import { randomUUID } from 'node:crypto';
import { API_VERSION, type CodingRun, type CodingRunSpec } from '../../api/index.ts';
import type { OperatorConfig } from '../../config/operator-config.ts';
import { findProviderDeclaration } from '../../providers/provider-registry.ts';
import { USABLE_BY_RUNS_LABEL, USABLE_BY_RUNS_VALUE } from '../../reconcile/secret-opt-in.ts';
import { parseSpec, validateRun } from '../../reconcile/validate-run.ts';
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

/** The variables an API key may come from for a provider, in the order they are read. */
export function apiKeyVariables(provider: string): string[] {
  const conventional = findProviderDeclaration(provider)?.apiKeyEnv;
  return conventional ? [API_KEY_ENV, conventional] : [API_KEY_ENV];
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
    const variable = apiKeyVariables(spec.model.provider).find((candidate) => env[candidate]);
    if (!variable) {
      throw refused(
        `spec.model.apiKeySecretRef names Secret ${keyRef.name} (key "${keyRef.key}"), which is not in the file; ` +
          `add the Secret to the file or set ${apiKeyVariables(spec.model.provider).join(' or ')}`,
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
