// Where sandboxes reach the egress proxy. A sandbox with egress has no DNS (its NetworkPolicy
// allows the proxy alone), so its environment carries the proxy's IP address. The proxy
// Service's ClusterIP is not forever: deleting and creating the Service again (a reinstall of
// the chart, a GitOps prune and re-sync) gives it a new one. So the address is read when a
// sandbox is created, cached for a few seconds (a burst of runs costs one read, not one each):
// a new sandbox gets the address the Service has now. Sandboxes already running keep the
// address they were given; their policy follows the proxy pods by label, not by address.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { OperatorConfig } from '../config/operator-config.ts';

/** How long an address read is used before it is read again. */
export const PROXY_ADDRESS_TTL_MS = 5_000;

export class EgressProxyAddressError extends Error {
  override readonly name = 'EgressProxyAddressError';
}

export interface AddressLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * An address read by `read`, at most once per `ttlMs` (concurrent callers share one read).
 * When a read fails, the last address read is used (and the failure logged) until a read
 * succeeds; with none yet, the failure is thrown.
 */
export class CachedAddress {
  private value: string | undefined;
  private readAt = -Infinity;
  private pending: Promise<string> | undefined;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly what: string,
    private readonly read: () => Promise<string>,
    private readonly logger: AddressLogger,
    options: { ttlMs?: number; now?: () => number } = {},
  ) {
    this.ttlMs = options.ttlMs ?? PROXY_ADDRESS_TTL_MS;
    this.now = options.now ?? (() => performance.now());
  }

  get(): Promise<string> {
    if (this.value !== undefined && this.now() - this.readAt < this.ttlMs) return Promise.resolve(this.value);
    this.pending ??= this.refresh().finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async refresh(): Promise<string> {
    try {
      const address = await this.read();
      if (address !== this.value) this.logger.info({ proxy: this.what, address, previous: this.value }, 'egress proxy address');
      this.value = address;
      return address;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (this.value === undefined) throw new EgressProxyAddressError(`egress proxy ${this.what}: ${message}`);
      this.logger.warn({ proxy: this.what, address: this.value, err: message }, 'egress proxy address not read; using the last one');
      return this.value;
    } finally {
      // A failed read is not repeated for every sandbox either.
      this.readAt = this.now();
    }
  }
}

/** The ClusterIP of the Service `namespace/name`; an error for a headless Service or one not yet allocated. */
export function serviceClusterIp(kubeConfig: KubeConfig, namespace: string, name: string): () => Promise<string> {
  let core: CoreV1Api | undefined;
  return async () => {
    core ??= kubeConfig.makeApiClient(CoreV1Api);
    const service = await core.readNamespacedService({ namespace, name });
    const ip = service.spec?.clusterIP;
    if (!ip || isIP(ip) === 0) throw new Error(`Service ${namespace}/${name} has no ClusterIP (${ip ?? 'none'}); it must not be headless`);
    return ip;
  };
}

/** The first address `host` resolves to (the operator's own DNS). */
export function resolvedHost(host: string): () => Promise<string> {
  return async () => (await lookup(host)).address;
}

/**
 * Where this operator reads the proxy's address from, by precedence: a fixed `address` (or a
 * `host` that is an address) needs no reading (undefined); a `service` is read from the API
 * server; a `host` name is resolved. Undefined too when no proxy is configured.
 */
export function egressProxyAddressSource(
  config: Pick<OperatorConfig, 'egressProxy'>,
  kubeConfig: KubeConfig,
  logger: AddressLogger,
): CachedAddress | undefined {
  const { address, service, namespace, host } = config.egressProxy;
  if (address || (host && isIP(host))) return undefined;
  if (service) return new CachedAddress(`Service ${namespace}/${service}`, serviceClusterIp(kubeConfig, namespace, service), logger);
  if (host) return new CachedAddress(`host ${host}`, resolvedHost(host), logger);
  return undefined;
}
