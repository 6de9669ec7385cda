// The operator with its workers off, for integration tests about the controller: no worker
// takes a run's jobs, so a started run stays Running until the test moves it on.
import { kubeconfigPath } from './cluster.ts';
import { OperatorProcess } from './operator-process.ts';

export interface ControllerOnlyOperatorOptions {
  /**
   * The namespaces it watches. The first names the install: `<first>-lease` holds the leader
   * lease and `ctl-<first>` prefixes its Redis keys, so replicas started for the same first
   * namespace share their state, as replicas of one install do (a replica that looked under
   * another prefix would find no state or job and fail runs as StateLost).
   */
  namespaces: readonly [string, ...string[]];
  identity: string;
  /** More operator environment (CHAMVI_*), over the shared one. */
  env?: Record<string, string>;
  /** Whom it acts as; the admin's kubeconfig (which bypasses RBAC) by default. */
  kubeconfig?: string;
}

/** Starts the process; the caller waits for 'caches synced; reconciling' where it needs to. */
export function startControllerOnlyOperator(options: ControllerOnlyOperatorOptions): OperatorProcess {
  const [first] = options.namespaces;
  return new OperatorProcess({
    kubeconfig: options.kubeconfig ?? kubeconfigPath(),
    env: {
      CHAMVI_ALLOW_REPO: 'https://github.com/acme/*',
      CHAMVI_WATCH_NAMESPACES: options.namespaces.join(','),
      CHAMVI_LEADER_ELECTION_NAMESPACE: `${first}-lease`,
      CHAMVI_IDENTITY: options.identity,
      CHAMVI_WORKERS_ENABLED: 'false',
      CHAMVI_REDIS_PREFIX: `ctl-${first}`,
      ...options.env,
    },
  });
}
