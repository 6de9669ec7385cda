// The egress proxy process (its own Deployment in the chart): watch the live CodingRuns,
// serve sandboxes as an HTTP forward proxy on `port`, audit every connection, serve
// /healthz, /readyz and /metrics on `httpPort`.
//
//   node --import tsx operator/src/egress-proxy-main.ts [--config FILE]   (or CHAMVI_EGRESS_CONFIG=FILE)
import { CustomObjectsApi, DiscoveryV1Api, Watch, type V1EndpointSlice } from '@kubernetes/client-node';
import { lookup } from 'node:dns/promises';
import type { AddressInfo } from 'node:net';
import { Informer } from './controller/informer.ts';
import { ApiServerAddressError, apiServerSources, resolveApiServerEndpoints } from './egress/api-server-endpoints.ts';
import { ApiServerEndpoints, apiServerSliceSource, apiServerSliceWatch, readApiServerSlice } from './egress/api-server-slice.ts';
import { OPEN_PER_RUN } from './egress/decide-connection.ts';
import { EgressAudit } from './egress/egress-audit.ts';
import { EgressMetrics } from './egress/egress-metrics.ts';
import { EgressProxyConfigError, loadEgressProxyConfig } from './egress/egress-proxy-config.ts';
import { LOOKUPS_PER_RUN, libuvThreadPoolSize, lookupsPerNamespace } from './egress/lookup-limit.ts';
import { createEgressProxyServer } from './egress/egress-proxy-server.ts';
import { destinationResolver } from './egress/destination-lookup.ts';
import { createEgressStatusWriter } from './egress/egress-status-writer.ts';
import { parseHostPatterns } from './egress/host-pattern.ts';
import { RunDirectory } from './egress/run-directory.ts';
import { egressRunInformers } from './egress/egress-run-informers.ts';
import { egressRunWatch } from './egress/egress-run-watch.ts';
import { egressRunEvents } from './egress/egress-run-events.ts';
import { createKubeGateway } from './kube/kube-gateway.ts';
import { startHealthServer } from './observability/health-server.ts';
import { createLogger } from './observability/logger.ts';
import { loadConfigOrExit, loadKubeConfig, readConfigFile, runMain, stopOnSignals } from './process-bootstrap.ts';

const PROGRAM = 'chamvi-egress-proxy';

/** Every address of a name, v4 and v6: the proxy refuses the name if any of them is closed. */
async function resolveAll(host: string): Promise<string[]> {
  return (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);
}

async function main(): Promise<void> {
  const logger = createLogger();
  const config = loadConfigOrExit(
    PROGRAM,
    logger,
    () =>
      loadEgressProxyConfig(
        readConfigFile(process.argv.slice(2), process.env, 'CHAMVI_EGRESS_CONFIG', (message) => new EgressProxyConfigError(message)),
        process.env,
      ),
    (error) => error instanceof EgressProxyConfigError,
  );
  const kubeConfig = loadKubeConfig();
  // Before anything else starts: a proxy that cannot refuse the API server must not serve.
  const apiServerFound = await resolveApiServerEndpoints(
    apiServerSources(kubeConfig.getCurrentCluster()?.server, process.env, config.apiServerAddresses),
    resolveAll,
  ).catch((error: unknown) => {
    if (!(error instanceof ApiServerAddressError)) throw error;
    logger.fatal({}, error.message);
    console.error(`${PROGRAM}: ${error.message}`);
    process.exit(2);
  });
  const kube = createKubeGateway(kubeConfig);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const watch = new Watch(kubeConfig);
  // And the addresses behind the API server's Service, as it publishes them (api-server-slice.ts).
  const apiServer = new ApiServerEndpoints(apiServerFound);
  const directory = new RunDirectory();
  const metrics = new EgressMetrics({ liveRuns: () => directory.size });
  const audit = new EgressAudit({
    logger,
    metrics,
    addToStatus: createEgressStatusWriter(kube),
    recordEvent: egressRunEvents(kube, config.identity, logger),
    flushIntervalMs: config.statusFlushSeconds * 1000,
  });
  // A few runs a page (EGRESS_RUN_PAGE_LIMIT): a page is held whole before the cache slims it.
  const informers = egressRunInformers(watch, custom, config.watchNamespaces, egressRunWatch(directory, audit), logger);
  const aliases = new Map(Object.entries(config.hostAliases));
  // Lookups run on libuv's thread pool, whose size the chart sets (UV_THREADPOOL_SIZE).
  const lookupLimits = { perRun: LOOKUPS_PER_RUN, perNamespace: lookupsPerNamespace(libuvThreadPoolSize(process.env)) };
  const proxy = createEgressProxyServer({
    egressKey: config.egressKey,
    policy: {
      allowEgress: parseHostPatterns(config.allowEgress),
      allowPrivateDestinations: parseHostPatterns(config.allowPrivateDestinations),
      get apiServer() {
        return apiServer.all;
      },
    },
    lookupRun: (uid) => directory.lookup(uid),
    resolve: destinationResolver(aliases, resolveAll),
    record: (connection) => audit.record(connection),
    openLimits: { perRun: OPEN_PER_RUN, perNamespace: config.limits.openPerNamespace, total: config.limits.open },
    connectionLimits: { perSource: config.limits.connectionsPerSource, total: config.limits.connections },
    lookupLimits,
    connectionRefused: (limit) => metrics.refusedConnections.inc({ limit }),
  });
  let synced = false;
  const notReady = config.readApiServerEndpoints
    ? "the CodingRun cache or the API server's EndpointSlice is not read yet"
    : 'the CodingRun cache is not read yet';
  const health = await startHealthServer(
    config.httpPort,
    { runs: () => Promise.resolve(synced ? undefined : notReady) },
    { contentType: metrics.registry.contentType, metrics: () => metrics.registry.metrics() },
  );
  // Nobody is served before the API server's own addresses are known.
  const slice = readApiServerSlice(
    config.readApiServerEndpoints,
    () =>
      new Informer<V1EndpointSlice>(
        watch,
        apiServerSliceSource(kubeConfig.makeApiClient(DiscoveryV1Api)),
        apiServerSliceWatch(apiServer),
        logger,
      ),
    apiServerFound,
    logger,
  );
  await Promise.all([slice.started, ...informers.map((informer) => informer.start())]);
  synced = true;
  audit.start();
  await new Promise<void>((resolve, reject) => {
    proxy.once('error', reject);
    proxy.listen(config.port, '0.0.0.0', () => resolve());
  });
  logger.info(
    {
      port: (proxy.address() as AddressInfo).port,
      httpPort: (health.address() as AddressInfo).port,
      allowEgress: config.allowEgress,
      allowPrivateDestinations: config.allowPrivateDestinations,
      lookupLimits,
    },
    'egress proxy listening',
  );

  stopOnSignals(logger, async () => {
    proxy.close();
    for (const informer of informers) informer.stop();
    slice.stop();
    await audit.stop();
    health.close();
  });
}

runMain(PROGRAM, main);
