// The operator configuration of one local run: every repository allowed (LOCAL_ALLOW_REPO),
// no NetworkPolicy (there is no pod), no leader election, and a Redis key prefix of its own
// so a shared Redis (REDIS_URL) can hold several local runs and an operator side by side.
import { randomBytes } from 'node:crypto';
import { loadOperatorConfig, type OperatorConfig } from '../../config/operator-config.ts';
import { LOCAL_ALLOW_REPO } from './local-repository.ts';

export const LOCAL_IDENTITY = 'kubectl-codingrun-local';

/** A fresh prefix per invocation: chamvi-local-<12 hex>. */
export function localRedisPrefix(): string {
  return `chamvi-local-${randomBytes(6).toString('hex')}`;
}

export function localOperatorConfig(redisUrl = 'redis://127.0.0.1:6379', redisPrefix = 'chamvi-local'): OperatorConfig {
  // Parsed with an empty environment: the user's CHAMVI_* variables are the operator's, not these.
  return loadOperatorConfig(
    {
      allowRepo: [...LOCAL_ALLOW_REPO],
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
