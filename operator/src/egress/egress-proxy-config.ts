// The egress proxy's configuration: a YAML file and/or environment variables, one zod schema.
// allowEgress is the operator's list (the chart gives both the same values); the proxy checks
// it again per connection, so a run admitted under a wider list is bound by today's.
import { z } from 'zod';
import { isIP } from 'node:net';
import { EGRESS_PATTERN, EGRESS_PATTERN_MESSAGE, HOST_NAME } from '../api/egress-pattern.ts';
import { DEFAULT_CONNECTION_LIMITS, DEFAULT_OPEN_LIMITS } from './decide-connection.ts';

const bound = (fallback: number, description: string) =>
  z.coerce.number().int().min(1).max(1_000_000).default(fallback).describe(description);

const patterns = (description: string) =>
  z.array(z.string().min(1).max(261).regex(EGRESS_PATTERN, EGRESS_PATTERN_MESSAGE)).max(1000).default([]).describe(description);

export const egressProxyConfigSchema = z
  .object({
    port: z.coerce.number().int().min(0).max(65535).default(3128).describe('Port the proxy listens on for sandboxes.'),
    httpPort: z.coerce.number().int().min(0).max(65535).default(9090).describe('Port of /healthz, /readyz and /metrics.'),
    egressKey: z
      .string()
      .min(32, 'must be at least 32 characters (the chart generates 64)')
      .describe("Key of the HMAC behind each run's proxy credential; the operator's egressKey. Give it as env CHAMVI_EGRESS_KEY."),
    allowEgress: patterns('The operator config allowEgress: no connection outside it, whatever a run lists.'),
    allowPrivateDestinations: patterns(
      'Host patterns that may resolve to private or loopback addresses (an internal registry); any other name that does is refused. ' +
        'Metadata, link-local addresses and the API server stay closed.',
    ),
    hostAliases: z
      .record(
        z.string().regex(HOST_NAME, 'must be a lower-case host name'),
        z.string().refine((value) => isIP(value) !== 0, 'must be an IP address'),
      )
      .default({})
      .describe(
        'Names the proxy resolves to fixed addresses instead of asking DNS, like a pod hostAliases (an internal host without DNS).',
      ),
    apiServerAddresses: z
      .array(z.string().regex(/^.+:[0-9]{1,5}$/, 'must be address:port'))
      .default([])
      .describe(
        'API server endpoints to refuse besides the ones the proxy finds itself (its kubeconfig and KUBERNETES_SERVICE_HOST). ' +
          'A name is resolved once, at start, as an absolute name; one that does not resolve stops the proxy from starting.',
      ),
    readApiServerEndpoints: z
      .boolean()
      .default(true)
      .describe(
        "Watch the API server's own EndpointSlice (`kubernetes` in `default`) and refuse every address it publishes there. " +
          "The chart's egressProxy.readApiServerEndpoints: false where it grants no Role in `default`, so the proxy asks for " +
          'nothing it may not read; it then refuses only the addresses above and says so once at start.',
      ),
    limits: z
      .object({
        open: bound(
          DEFAULT_OPEN_LIMITS.total,
          'Tunnels and forwarded requests the proxy holds open at once, all runs together (a run holds at most 128); beyond it 429 too-many-open.',
        ),
        openPerNamespace: bound(
          DEFAULT_OPEN_LIMITS.perNamespace,
          'The same for the runs of one namespace together; beyond it 429 too-many-open.',
        ),
        connections: bound(
          DEFAULT_CONNECTION_LIMITS.total,
          'Client connections the proxy holds at once, with a credential or not; beyond it a new one is answered 429 too-many-connections and closed.',
        ),
        connectionsPerSource: bound(
          DEFAULT_CONNECTION_LIMITS.perSource,
          'The same from one source address (a sandbox pod). Raise it where sandboxes reach the proxy through NAT, sharing an address.',
        ),
      })
      .strict()
      .prefault({})
      .describe('Bounds on what the proxy holds, which bound its memory: about 270 KiB per open tunnel at worst (docs/egress.md).'),
    watchNamespaces: z.array(z.string().min(1).max(63)).default([]).describe('Namespaces whose runs the proxy serves; empty means all.'),
    statusFlushSeconds: z.coerce.number().int().min(1).max(600).default(2).describe('How often egress counts are added to status.egress.'),
    identity: z
      .string()
      .min(1)
      .default(() => `${process.env.HOSTNAME ?? 'egress-proxy'}-${process.pid}`),
  })
  .strict();

export type EgressProxyConfig = z.output<typeof egressProxyConfigSchema>;

export class EgressProxyConfigError extends Error {
  override readonly name = 'EgressProxyConfigError';
}

const list = (raw: string | undefined) =>
  raw === undefined || raw === ''
    ? undefined
    : raw
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean);

export function loadEgressProxyConfig(file: unknown, env: NodeJS.ProcessEnv): EgressProxyConfig {
  if (file !== undefined && file !== null && (typeof file !== 'object' || Array.isArray(file))) {
    throw new EgressProxyConfigError('config file: must be a YAML mapping of keys such as allowEgress, port');
  }
  const fromEnv: Record<string, unknown> = {};
  if (env.CHAMVI_EGRESS_KEY) fromEnv.egressKey = env.CHAMVI_EGRESS_KEY;
  if (env.CHAMVI_EGRESS_PORT) fromEnv.port = env.CHAMVI_EGRESS_PORT;
  if (env.CHAMVI_EGRESS_HTTP_PORT) fromEnv.httpPort = env.CHAMVI_EGRESS_HTTP_PORT;
  const allowEgress = list(env.CHAMVI_ALLOW_EGRESS);
  if (allowEgress) fromEnv.allowEgress = allowEgress;
  const privateDestinations = list(env.CHAMVI_ALLOW_PRIVATE_DESTINATIONS);
  if (privateDestinations) fromEnv.allowPrivateDestinations = privateDestinations;
  const namespaces = list(env.CHAMVI_WATCH_NAMESPACES);
  if (namespaces) fromEnv.watchNamespaces = namespaces;
  const result = egressProxyConfigSchema.safeParse({ ...((file as Record<string, unknown> | null) ?? {}), ...fromEnv });
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new EgressProxyConfigError(`config key ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return result.data;
}
