// The operator configuration of one local run: every repository allowed (LOCAL_ALLOW_REPO),
// no NetworkPolicy (there is no pod), no leader election, and a Redis key prefix of its own
// so a shared Redis (REDIS_URL) can hold several local runs and an operator side by side.
import { randomBytes } from 'node:crypto';
import { loadOperatorConfig, type OperatorConfig } from '../../config/operator-config.ts';
import { parseEndpointUrl } from '../../reconcile/model-endpoints.ts';
import { LOCAL_ALLOW_REPO } from './local-repository.ts';

export const LOCAL_IDENTITY = 'kubectl-codingrun-local';

/** A fresh prefix per invocation: chamvi-local-<12 hex>. */
export function localRedisPrefix(): string {
  return `chamvi-local-${randomBytes(6).toString('hex')}`;
}

/**
 * Local mode has no admin to list endpoints, so the endpoint the run names is allowed when
 * canonical (a non-canonical one is refused with the operator's own message). The file may be
 * a repository's, not the user's: it gets only a key the file holds or CHAMVI_API_KEY, never
 * the provider's variable such as OPENAI_API_KEY (accept-local-run.ts). Security #11.3.
 */
export function localModelEndpoints(run: { spec?: unknown }): string[] {
  const baseURL = (run.spec as { model?: { baseURL?: unknown } } | undefined)?.model?.baseURL;
  return typeof baseURL === 'string' && 'endpoint' in parseEndpointUrl(baseURL) ? [baseURL] : [];
}

export function localOperatorConfig(
  redisUrl = 'redis://127.0.0.1:6379',
  redisPrefix = 'chamvi-local',
  allowModelEndpoints: readonly string[] = [],
): OperatorConfig {
  // Parsed with an empty environment: the user's CHAMVI_* variables are the operator's, not these.
  return loadOperatorConfig(
    {
      allowRepo: [...LOCAL_ALLOW_REPO],
      allowModelEndpoints: [...allowModelEndpoints],
      // No image is started locally: spec.sandbox.image is ignored, so any is accepted.
      allowImages: ['**'],
      redisUrl,
      redisPrefix,
      workerConcurrency: 2,
      networkPolicy: false,
      // There is no pod: the tools run as the user on this machine (the help says so), so a
      // local run is unisolated by design and must not wait for an isolation probe.
      allowUnisolatedSandboxes: true,
      identity: LOCAL_IDENTITY,
      leaderElection: { enabled: false },
      httpPort: 0,
    },
    {},
  );
}
