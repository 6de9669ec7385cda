// The operator process: load and validate the config, connect to the cluster, serve
// health, take the leader lease, and reconcile CodingRuns until told to stop.
//
//   node --import tsx operator/src/main.ts [--config FILE]     (or CHAMVI_CONFIG=FILE)
import { KubeConfig } from '@kubernetes/client-node';
import { lookup } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { AddressInfo } from 'node:net';
import { parse } from 'yaml';
import { ConfigError, loadOperatorConfig, type OperatorConfig } from './config/operator-config.ts';
import { reuseConnections } from './kube/connection-reuse.ts';
import { EventRecorder } from './kube/event-recorder.ts';
import {
  IsolationProbe,
  createExecConnector,
  createIsolationProbeKube,
  defaultIsolationProbeTarget,
} from './controller/isolation-probe.ts';
import { createKubeGateway } from './kube/kube-gateway.ts';
import { LeaderElector, kubernetesLeaseStore } from './controller/leader-election.ts';
import { EvalController } from './controller/eval-controller.ts';
import { RunController } from './controller/run-controller.ts';
import { createEvalGateway } from './kube/eval-gateway.ts';
import { startHealthServer } from './observability/health-server.ts';
import { createLogger } from './observability/logger.ts';
import { OperatorMetrics } from './observability/operator-metrics.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from './providers/calling-policy.ts';
import { needsIsolationProbe } from './reconcile/isolation.ts';
import { sandboxPodName } from './reconcile/names.ts';
import { SANDBOX_CONTAINER } from './reconcile/sandbox-pod.ts';
import { createKubernetesSandbox } from './sandbox/kubernetes-sandbox.ts';
import { startAgentRuntime } from './workers/agent-runtime.ts';
import { checkRedisCredentials, redisHasCredentials } from './workers/redis-connection.ts';

function readConfig(argv: string[], env: NodeJS.ProcessEnv): OperatorConfig {
  const flag = argv.indexOf('--config');
  const path = flag >= 0 ? argv[flag + 1] : env.CHAMVI_CONFIG;
  let file: unknown;
  if (path) {
    try {
      file = parse(readFileSync(path, 'utf8'));
    } catch (error) {
      throw new ConfigError(`config file ${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return loadOperatorConfig(file, env);
}

/**
 * Sandboxes with egress have no DNS (their NetworkPolicy allows the proxy alone), so they get
 * the proxy's address, resolved here once (a Service's ClusterIP does not change while it exists).
 */
async function withEgressProxyAddress(config: OperatorConfig, logger: ReturnType<typeof createLogger>): Promise<OperatorConfig> {
  const { host, address } = config.egressProxy;
  if (address || !host || isIP(host))
    return host && isIP(host) ? { ...config, egressProxy: { ...config.egressProxy, address: host } } : config;
  for (let attempt = 1; ; attempt++) {
    try {
      const resolved = await lookup(host);
      logger.info({ host, address: resolved.address }, 'egress proxy address');
      return { ...config, egressProxy: { ...config.egressProxy, address: resolved.address } };
    } catch (error) {
      if (attempt >= 30) throw new ConfigError(`config key egressProxy.host: ${host} does not resolve (${String(error)})`);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
  }
}

async function main(): Promise<void> {
  const logger = createLogger();
  let config: OperatorConfig;
  try {
    config = readConfig(process.argv.slice(2), process.env);
    checkRedisCredentials(config);
  } catch (error) {
    if (!ConfigError.isInstance(error)) throw error;
    logger.fatal({}, error.message);
    console.error(`chamvi-operator: ${error.message}`);
    process.exit(2);
  }
  config = await withEgressProxyAddress(config, logger);
  const kubeConfig = reuseConnections(new KubeConfig());
  kubeConfig.loadFromDefault();
  const kube = createKubeGateway(kubeConfig);
  const events = new EventRecorder(kube, config.identity, logger);
  // The gauges read the controller and the queue when scraped; both exist by then.
  let controllerRef: RunController | undefined;
  let agentRef: { queueDepth(): Promise<Record<string, number>> } | undefined;
  const metrics = new OperatorMetrics({
    runsByPhase: () => controllerRef?.runsByPhase() ?? [],
    queueDepth: () => agentRef?.queueDepth() ?? Promise.resolve({}),
  });
  // Workers run in every replica; only the leader reconciles.
  const agent = startAgentRuntime({
    config,
    kubeConfig,
    kube,
    events,
    metrics,
    logger,
    sandboxFor: (run) =>
      createKubernetesSandbox({
        kubeConfig,
        namespace: run.metadata.namespace,
        podName: sandboxPodName(run),
        expectedOwnerUid: run.metadata.uid,
        container: SANDBOX_CONTAINER,
        toolboxCommand: config.toolboxCommand,
        mode: 'serve',
      }),
    callingPolicy: { ...DEFAULT_CALLING_POLICY, attemptTimeoutMs: config.modelCallTimeoutSeconds * 1000 },
    callingPolicyDependencies: createSystemCallingPolicyDependencies(),
  });
  // Security #11.8: runs start only where NetworkPolicy is shown to be enforced, unless the
  // admin accepts unisolated sandboxes. The probe's default target is this process's HTTP
  // port, known once the health server listens (httpPort 0 picks one).
  let listeningPort = config.httpPort;
  const probeIsolation = needsIsolationProbe(config);
  const newIsolationProbe = () =>
    new IsolationProbe({
      kube: createIsolationProbeKube(kubeConfig),
      connector: createExecConnector(kubeConfig, config.toolboxCommand),
      config,
      target: () => config.isolationProbe.target ?? defaultIsolationProbeTarget(process.env.POD_IP, listeningPort),
      logger,
    });
  // One controller per leadership term: a stopped one cannot start again.
  const newController = () =>
    new RunController(
      kubeConfig,
      config,
      { kube, agent: agent.runAgent, events, ...(probeIsolation ? { isolation: newIsolationProbe() } : {}) },
      logger,
      metrics,
    );
  let controller = newController();
  controllerRef = controller;
  // CodingEvals (evals/): the leader creates and grades their runs, beside the run controller.
  const evalGateway = createEvalGateway(kubeConfig);
  let evalController = new EvalController(kubeConfig, config, evalGateway, logger);
  const startControllers = async () => {
    await Promise.all([controller.start(), evalController.start()]);
  };
  agentRef = agent;
  const elector = config.leaderElection.enabled
    ? new LeaderElector(
        kubernetesLeaseStore(kubeConfig, config.leaderElection.namespace, config.leaderElection.leaseName),
        { ...config.leaderElection, identity: config.identity },
        logger,
      )
    : undefined;
  // A standby is ready when its workers can work (Redis); only the leader also needs its
  // caches, or a rolling update would wait forever for a standby that never leads.
  const health = await startHealthServer(
    config.httpPort,
    {
      informers: async () => (elector && !elector.isLeader ? undefined : controller.synced ? undefined : 'caches not synced yet'),
      redis: agent.checkRedis,
    },
    { contentType: metrics.registry.contentType, metrics: () => metrics.registry.metrics() },
  );
  logger.info(
    { port: (health.address() as AddressInfo).port, identity: config.identity, allowRepo: config.allowRepo },
    'operator starting',
  );
  listeningPort = (health.address() as AddressInfo).port;
  if (config.allowUnisolatedSandboxes) {
    logger.warn(
      {},
      'allowUnisolatedSandboxes: sandboxes start even where NetworkPolicy is not enforced, and then reach Redis, cloud metadata, the API server, internal services and the internet',
    );
  } else if (!config.networkPolicy) {
    logger.warn({}, 'networkPolicy is false and allowUnisolatedSandboxes is not set: every run fails IsolationNotEnforced');
  }
  if (!config.stateKey) {
    logger.warn(
      {},
      'stateKey is not set (env CHAMVI_STATE_KEY): run state is sealed with a key of this process alone, so runs in flight fail StateLost ' +
        'when it restarts or when another replica takes their jobs; set one shared key (the chart does) for more than a single process',
    );
  }
  if (config.allowInsecureRedis && !redisHasCredentials(config)) {
    logger.warn({}, 'allowInsecureRedis: Redis has no password; anyone who reaches it can stop or stall every run');
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // Shutdown must end even when a dependency does not answer (Redis down, API server gone).
    setTimeout(() => process.exit(0), 10_000).unref();
    controller.stop();
    evalController.stop();
    await elector?.release();
    await agent.close();
    health.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  if (!elector) {
    await startControllers();
    return;
  }
  // When the lease cannot be renewed in time (the API server unreachable, or another
  // replica holds it), stop reconciling at once, since another replica may lead once the
  // lease expires, and stand for election again; the workers go on. Exiting instead made
  // every replica crash through an API server outage.
  while (!stopping) {
    await elector.run(
      () => startControllers(),
      () => {
        logger.error({}, 'lost the leader lease; reconciling stops until this replica leads again');
        controller.stop();
        evalController.stop();
        evalController = new EvalController(kubeConfig, config, evalGateway, logger);
        controller = newController();
        controllerRef = controller;
      },
    );
  }
}

main().catch((error: unknown) => {
  console.error('chamvi-operator: fatal:', error);
  process.exit(1);
});
