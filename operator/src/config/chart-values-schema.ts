// The `config` part of the Helm chart's values.schema.json, generated from the operator's zod
// config schema, so `helm install` refuses the values the operator would refuse at start-up,
// with the same bounds and descriptions (the rules between keys are the chart's
// templates/_config-checks.tpl's). The rest of values.schema.json (replicas, image,
// redis, ...) is the chart's own and written by hand. `make chart-schema` writes the file;
// test/unit/chart-values-schema.test.ts fails when the committed one is stale.
import { z } from 'zod';
import { operatorConfigSchema } from './operator-config.ts';

/**
 * Config keys the chart fills in itself, so values never set them: redisUrl, httpPort,
 * leaderElection and approvalSeparationOfDuties come from their own sections, identity is the pod's name. Security #11.1:
 * redisPassword, redisSentinelPassword and stateKey come from Secrets as env (never the
 * ConfigMap), redisCaFile from redis.caSecretRef.
 */
export const CHART_OWNED_CONFIG_KEYS = [
  'redisUrl',
  'httpPort',
  'leaderElection',
  'identity',
  'redisPassword',
  'redisCaFile',
  'redisSentinelPassword',
  'stateKey',
  // The key that makes every run's proxy credential: from the chart's Secret with the bundled
  // proxy, else as CHAMVI_EGRESS_KEY in extraEnv from your own Secret, never in the ConfigMap.
  'egressKey',
  // From approvalPolicy.separationOfDuties: the operator and the API server's policy judge answers alike.
  'approvalSeparationOfDuties',
  // From terminationGracePeriodSeconds (as env, a few seconds below it): the two must not disagree.
  'shutdownTimeoutSeconds',
] as const;

const DESCRIPTION =
  'The operator\'s own config keys (API.md "Operator configuration", generated from operator/src/config/operator-config.ts); ' +
  'redisUrl, httpPort and leaderElection come from their own sections, secrets from Secrets.';

/**
 * Checks of one key that operator-config.ts makes in code (refine), which z.toJSONSchema cannot
 * see, as the JSON Schema keywords that say the same, by the key's path under config. The rules
 * between keys (a warm pool's namespace in watchNamespaces, leaderElection's order) are the
 * templates' (templates/_config-checks.tpl): JSON Schema cannot compare two values.
 */
export const CODE_CHECKS_AS_SCHEMA: Readonly<Record<string, Record<string, unknown>>> = {
  // refine: 'lists a namespace more than once'.
  watchNamespaces: { uniqueItems: true },
  // refine: isIP(value) !== 0. helm asserts draft-07 formats; it also refuses an IPv6 zone
  // (fe80::1%eth0), which isIP takes and no address a sandbox dials has.
  'egressProxy.address': { anyOf: [{ format: 'ipv4' }, { format: 'ipv6' }] },
};

interface ObjectSchema {
  properties?: Record<string, ObjectSchema>;
}

/** `schema` with each of CODE_CHECKS_AS_SCHEMA's keywords added at its path; a path it lacks is a renamed key, so it throws. */
function withCodeChecks(schema: ObjectSchema): ObjectSchema {
  for (const [path, keywords] of Object.entries(CODE_CHECKS_AS_SCHEMA)) {
    const target = path.split('.').reduce<ObjectSchema | undefined>((node, key) => node?.properties?.[key], schema);
    if (!target) throw new Error(`CODE_CHECKS_AS_SCHEMA names ${path}, which the config schema does not have`);
    Object.assign(target, keywords);
  }
  return schema;
}

/** The JSON Schema of values.config: draft-07, which helm's validator reads. */
export function chartConfigSchema(): Record<string, unknown> {
  const settable = operatorConfigSchema.omit(
    Object.fromEntries(CHART_OWNED_CONFIG_KEYS.map((key) => [key, true])) as { [K in (typeof CHART_OWNED_CONFIG_KEYS)[number]]: true },
  );
  // io 'input': what a values file may write. Keys with defaults stay optional, and coerced
  // numbers are described as the integers they must be.
  const { $schema: _nested, ...schema } = z.toJSONSchema(settable, { target: 'draft-7', io: 'input' }) as Record<string, unknown>;
  return { ...withCodeChecks(schema as ObjectSchema), description: DESCRIPTION };
}

/** values.schema.json with its config part replaced by the generated one, formatted as committed. */
export function renderChartValuesSchema(current: string): string {
  const values = JSON.parse(current) as { properties: Record<string, unknown> };
  values.properties.config = chartConfigSchema();
  return `${JSON.stringify(values, null, 2)}\n`;
}
