// What the image's two processes, the operator (main.ts) and the egress proxy
// (egress-proxy-main.ts), do alike at start and at stop: read the config file named by
// --config or an environment variable, exit 2 naming the bad key (a crash loop that says why),
// connect to the cluster as kubectl would (in-cluster, or KUBECONFIG), and stop once on
// SIGTERM or SIGINT within a bounded time.
import { KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { reuseConnections } from './kube/connection-reuse.ts';
import type { Logger } from './observability/logger.ts';

/**
 * A shutdown that waits on a dependency that does not answer (Redis down, API server gone) still
 * ends. The egress proxy's default; the operator passes its shutdownTimeoutSeconds, which the
 * chart derives from the pod's terminationGracePeriodSeconds, so its steps may finish first.
 */
const DEFAULT_SHUTDOWN_LIMIT_MS = 10_000;

/**
 * The parsed YAML of the file named by `--config FILE` or the environment variable (undefined
 * when neither is given); `configError` makes the error that says which file could not be read.
 */
export function readConfigFile(
  argv: string[],
  env: NodeJS.ProcessEnv,
  envVariable: string,
  configError: (message: string) => Error,
): unknown {
  const flag = argv.indexOf('--config');
  const path = flag >= 0 ? argv[flag + 1] : env[envVariable];
  if (!path) return undefined;
  try {
    return parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw configError(`config file ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** `load()`'s config; on a config error (isConfigError), logs it and exits 2. Any other error is thrown on. */
export function loadConfigOrExit<T>(program: string, logger: Logger, load: () => T, isConfigError: (error: unknown) => error is Error): T {
  try {
    return load();
  } catch (error) {
    if (!isConfigError(error)) throw error;
    logger.fatal({}, error.message);
    console.error(`${program}: ${error.message}`);
    process.exit(2);
  }
}

/** The cluster as kubectl finds it (in-cluster ServiceAccount, or KUBECONFIG), with pooled connections. */
export function loadKubeConfig(): KubeConfig {
  const kubeConfig = reuseConnections(new KubeConfig());
  kubeConfig.loadFromDefault();
  return kubeConfig;
}

/**
 * Runs `stop` once on the first SIGTERM or SIGINT, then exits 0; exits anyway `limitMs` after
 * the signal. Keep `limitMs` below the pod's terminationGracePeriodSeconds: the kubelet's
 * SIGKILL at its end leaves no log line saying what was cut. Returns whether a stop has begun
 * (for loops that must not start again).
 */
export function stopOnSignals(
  logger: Logger,
  stop: () => Promise<void> | void,
  limitMs: number = DEFAULT_SHUTDOWN_LIMIT_MS,
): () => boolean {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, limitSeconds: limitMs / 1000 }, 'shutting down');
    setTimeout(() => process.exit(0), limitMs).unref();
    await stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  return () => stopping;
}

/** Runs a process's main; an error nothing caught ends it with status 1, saying so. */
export function runMain(program: string, main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    console.error(`${program}: fatal:`, error);
    process.exit(1);
  });
}
