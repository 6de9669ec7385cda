// One operator for an e2e file: its namespace (PodSecurity restricted) and lease namespace,
// the exec registrar that turns the namespace's kwok pods into toolbox processes, and the
// operator itself, watching only that namespace, started and synced.
import { join } from 'node:path';
import { createNamespace, kubeconfigPath, redisUrl } from './cluster.ts';
import { OperatorProcess } from './operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from './sandbox-exec-registrar.ts';

const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

export interface E2eOperatorOptions {
  /** The namespace the runs live in; `<namespace>-lease` holds the leader lease. */
  namespace: string;
  /** A directory of the test's own: the registrar keeps the sandboxes' workspaces under it. */
  root: string;
  identity: string;
  redisPrefix: string;
  /** CHAMVI_ALLOW_REPO: the repositories the test's runs may clone. */
  allowRepo: string;
  /** More operator environment (CHAMVI_*), over the defaults. */
  env?: Record<string, string>;
  syncTimeoutMs?: number;
}

export interface E2eOperator {
  readonly operator: OperatorProcess;
  readonly registrar: SandboxExecRegistrar;
  stop(): Promise<void>;
}

export async function startE2eOperator(options: E2eOperatorOptions): Promise<E2eOperator> {
  const { namespace } = options;
  await createNamespace(namespace, { restricted: true });
  await createNamespace(`${namespace}-lease`);
  const registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(options.root, 'workspaces') });
  const operator = await startOperatorOnly(options);
  return {
    operator,
    registrar,
    async stop() {
      await operator.kill();
      await registrar.stop();
    },
  };
}

/** Another operator for the same namespace (one killed, a replacement): no namespace or registrar made. */
export async function startOperatorOnly(options: E2eOperatorOptions): Promise<OperatorProcess> {
  const { namespace } = options;
  const operator = new OperatorProcess({
    kubeconfig: kubeconfigPath(),
    env: {
      REDIS_URL: redisUrl(),
      CHAMVI_REDIS_PREFIX: options.redisPrefix,
      CHAMVI_ALLOW_REPO: options.allowRepo,
      CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
      CHAMVI_WATCH_NAMESPACES: namespace,
      CHAMVI_LEADER_ELECTION_NAMESPACE: `${namespace}-lease`,
      CHAMVI_IDENTITY: options.identity,
      ...options.env,
    },
  });
  await operator.waitForLog('caches synced; reconciling', options.syncTimeoutMs);
  return operator;
}
