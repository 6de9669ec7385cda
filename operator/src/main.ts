// The operator process: load and validate the config, connect to the cluster, serve
// health, take the leader lease, and reconcile CodingRuns until told to stop.
//
//   node --import tsx operator/src/main.ts [--config FILE]     (or CHAMVI_CONFIG=FILE)
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadOperatorConfig } from './config/operator-config.ts';
import { egressProxyAddressSource } from './egress/egress-proxy-address.ts';
import { EventRecorder } from './kube/event-recorder.ts';
import {
  IsolationProbe,
  createExecConnector,
  createIsolationProbeKube,
  defaultIsolationProbeTarget,
} from './controller/isolation-probe.ts';
import { createKubeGateway } from './kube/kube-gateway.ts';
import { RecentRuns, rememberingRuns } from './kube/recent-runs.ts';
import { kubernetesNamespacePolicyReader } from './kube/namespace-policy-reader.ts';
import { LeaderElector, kubernetesLeaseStore } from './controller/leader-election.ts';
import { EvalController } from './controller/eval-controller.ts';
import { RunController } from './controller/run-controller.ts';
import { ScheduleController } from './controller/schedule-controller.ts';
import { createScheduleGateway } from './kube/schedule-gateway.ts';
import { createEvalGateway } from './kube/eval-gateway.ts';
import { startHealthServer } from './observability/health-server.ts';
import { createLogger } from './observability/logger.ts';
import { OperatorMetrics } from './observability/operator-metrics.ts';
import { loadConfigOrExit, loadKubeConfig, readConfigFile, runMain, stopOnSignals } from './process-bootstrap.ts';
import { settlesWithin } from './settles-within.ts';
import { IN_FLIGHT_RECONCILES_GRACE_MS, shutDown, shutdownTimings } from './shutdown-sequence.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from './providers/calling-policy.ts';
import { needsIsolationProbe } from './reconcile/isolation.ts';
import { admittedImagesOf, sandboxPodShape } from './reconcile/admitted-pod.ts';
import { runPodName } from './reconcile/names.ts';
import { kubernetesWarmPoolGateway } from './kube/warm-pool-gateway.ts';
import { SANDBOX_CONTAINER } from './reconcile/sandbox-pod.ts';
import { createKubernetesSandbox, warmSessionStarter } from './sandbox/kubernetes-sandbox.ts';
import { WarmSessions } from './sandbox/warm-sessions.ts';
import { startAgentRuntime } from './workers/agent-runtime.ts';
import { ProcessLauncher } from './workers/process-launcher.ts';
import { removeStaleClones } from './workers/stale-clones.ts';
import { checkRedisCredentials, redisHasCredentials } from './workers/redis-connection.ts';

const PROGRAM = 'chamvi-operator';

async function main(): Promise<void> {
  const logger = createLogger();
  const config = loadConfigOrExit(
    PROGRAM,
    logger,
    () => {
      const loaded = loadOperatorConfig(
        readConfigFile(process.argv.slice(2), process.env, 'CHAMVI_CONFIG', (message) => new ConfigError(message)),
        process.env,
      );
      checkRedisCredentials(loaded);
      return loaded;
    },
    ConfigError.isInstance,
  );
  const kubeConfig = loadKubeConfig();
  const egressProxyAddress = egressProxyAddressSource(config, kubeConfig, logger);
  // Every run the API server returns is remembered for a moment: the workers' next read of it
  // is served from that (kube/recent-runs.ts), checked against the leader's run cache.
  const rawKube = createKubeGateway(kubeConfig);
  const recentRuns = new RecentRuns(
    (namespace, name) => rawKube.getRun(namespace, name),
    () => controllerRef?.liveRuns,
  );
  const kube = rememberingRuns(rawKube, recentRuns);
  const events = new EventRecorder(kube, config.identity, logger);
  // The gauges read the controller and the queue when scraped; both exist by then.
  let controllerRef: RunController | undefined;
  let agentRef: { queueDepth(): Promise<Record<string, number>> } | undefined;
  const metrics = new OperatorMetrics({
    runsByPhase: () => controllerRef?.runsByPhase() ?? [],
    queueDepth: () => agentRef?.queueDepth() ?? Promise.resolve({}),
  });
  // Issue #15.4: each team's settings, from its Namespace's annotations; read by admission and the workers.
  const namespacePolicies = kubernetesNamespacePolicyReader(kubeConfig);
  // The workers' git and tar start from a small helper, not from this big process
  // (workers/process-launcher.ts): process-launcher-main.ts under tsx, .mjs in the image.
  const launcherEntry = fileURLToPath(new URL(`./process-launcher-main${extname(fileURLToPath(import.meta.url))}`, import.meta.url));
  const launcher = existsSync(launcherEntry) ? new ProcessLauncher(launcherEntry) : undefined;
  if (!launcher)
    logger.warn({ launcherEntry }, 'process launcher not found beside the operator; git and tar start from the operator itself');
  // Clones a killed predecessor left in the temp dir (an emptyDir that outlives the
  // container) go before any worker starts (workers/stale-clones.ts).
  const staleClones = await removeStaleClones().catch((error: unknown) => {
    logger.warn({ err: String(error) }, 'could not remove clones left by earlier processes');
    return [];
  });
  if (staleClones.length > 0) logger.info({ removed: staleClones.length }, 'removed clones left by processes that are gone');
  // The leader's pool loop keeps a tool session open into each ready warm pool pod; a run of
  // this process that claims the pod takes it (sandbox/warm-sessions.ts, docs/warm-pools.md).
  const warmSessions =
    config.warmPools.length > 0
      ? new WarmSessions(warmSessionStarter({ kubeConfig, container: SANDBOX_CONTAINER, toolboxCommand: config.toolboxCommand }), {
          logger,
        })
      : undefined;
  // Workers run in every replica; only the leader reconciles.
  const agent = startAgentRuntime({
    launch: launcher?.launch,
    config,
    recentRuns,
    namespacePolicies,
    kubeConfig,
    kube,
    events,
    metrics,
    logger,
    sandboxFor: (run) =>
      createKubernetesSandbox({
        kubeConfig,
        namespace: run.metadata.namespace,
        // A run given a warm pool pod has its name in status and in its prepare job (both written by
        // the operator only); the transport still execs only into a pod this run controls (expectedOwnerUid),
        // and only when it carries nothing the operator did not put there (a webhook's token: expectedPodShape).
        podName: runPodName(run),
        expectedOwnerUid: run.metadata.uid,
        expectedPodShape: sandboxPodShape(run, config),
        // The record of a claimed pool pod's images lands just after its agent starts: read for it then.
        readAdmittedImages: async () => {
          const current = await kube.getRun(run.metadata.namespace, run.metadata.name);
          return current?.metadata.uid === run.metadata.uid ? admittedImagesOf(current.status) : undefined;
        },
        container: SANDBOX_CONTAINER,
        toolboxCommand: config.toolboxCommand,
        mode: 'serve',
        ...(warmSessions ? { warmSessions } : {}),
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
  // The schedules' door also reads the template a CodingRun names (spec.templateRef).
  const scheduleGateway = createScheduleGateway(kubeConfig);
  // One controller per leadership term: a stopped one cannot start again.
  const newController = () =>
    new RunController(
      kubeConfig,
      config,
      {
        kube,
        agent: agent.runAgent,
        runStates: agent.runStates,
        events,
        templates: { get: (namespace, name) => scheduleGateway.getTemplate(namespace, name) },
        ...(egressProxyAddress ? { egressProxyAddress } : {}),
        ...(probeIsolation ? { isolation: newIsolationProbe() } : {}),
        // Without pools too: the loop deletes the pods of pools taken out of the config.
        warmPools: { gateway: kubernetesWarmPoolGateway(kubeConfig), ...(warmSessions ? { sessions: warmSessions } : {}) },
        fairShare: {
          policyOf: (namespace) => namespacePolicies.policyOf(namespace),
          tokensOn: (namespace, day) => agent.tokensOn(namespace, day),
        },
      },
      logger,
      metrics,
    );
  let controller = newController();
  controllerRef = controller;
  // CodingSchedules are reconciled by the leader too, beside the runs they create.
  const newScheduleController = () => new ScheduleController(kubeConfig, config, { kube: scheduleGateway, events }, logger);
  let schedules = newScheduleController();
  // CodingEvals (evals/): the leader creates and grades their runs, beside the run controller.
  const evalGateway = createEvalGateway(kubeConfig);
  const newEvalController = () => new EvalController(kubeConfig, config, evalGateway, logger);
  let evalController = newEvalController();
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
      // Ready with a watched namespace it cannot list, naming it (controller/watched-namespaces.ts cachesReadiness).
      informers: async () => (elector && !elector.isLeader ? undefined : controller.readiness()),
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

  // SIGTERM: the workers stop taking jobs at once and their steps in flight run on while the
  // lease is handed over, until shutdownTimeoutSeconds (the chart's grace period less 5 s); the
  // order and the bounds are shutdown-sequence.ts's.
  const shutdownLimitMs = config.shutdownTimeoutSeconds * 1000;
  const stopping = stopOnSignals(
    logger,
    async () => {
      await shutDown(
        {
          stopTakingJobs: () => agent.stopTakingJobs(),
          stopReconciling: async () => {
            controller.stop();
            schedules.stop();
            evalController.stop();
            await Promise.allSettled([controller.idle(), schedules.idle(), evalController.idle()]);
          },
          releaseLease: async () => elector?.release(),
          closeRest: async () => {
            await agent.close();
            launcher?.close();
            health.close();
          },
        },
        shutdownTimings(shutdownLimitMs),
        logger,
      );
    },
    shutdownLimitMs,
  );

  const startControllers = async () => {
    await Promise.all([controller.start(), schedules.start(), evalController.start()]);
  };
  if (!elector) {
    await startControllers();
    return;
  }
  // When the lease cannot be renewed in time (the API server unreachable, or another
  // replica holds it), stop reconciling at once, since another replica may lead once the
  // lease expires, and stand for election again; the workers go on. Exiting instead made
  // every replica crash through an API server outage.
  let stoppedOnes: Promise<unknown>[] = [];
  while (!stopping()) {
    await elector.run(startControllers, () => {
      logger.error({}, 'lost the leader lease; reconciling stops until this replica leads again');
      controller.stop();
      schedules.stop();
      evalController.stop();
      stoppedOnes = [controller.idle(), schedules.idle(), evalController.idle()];
      controller = newController();
      controllerRef = controller;
      schedules = newScheduleController();
      evalController = newEvalController();
    });
    // The stopped controllers' reconciles in flight end before this replica stands again: won
    // back at once, its new controllers would reconcile the same runs beside them (two claims of
    // a pool pod for one run). Bounded, as at shutdown.
    await settlesWithin(Promise.allSettled(stoppedOnes), IN_FLIGHT_RECONCILES_GRACE_MS);
    stoppedOnes = [];
  }
}

runMain(PROGRAM, main);
