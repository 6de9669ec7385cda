// Issue #12: the egress proxy as a real process on real ports, fed by a real API server's
// CodingRuns, in front of real listeners on loopback that stand in for a registry, an internal
// service, the metadata address and the API server. What a sandbox's tools would send, it sends.
import { createServer, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { createNamespace, kubeconfigPath, kubectl, kubectlOk } from '../support/cluster.ts';
import { EgressProxyProcess, connectThrough, getThrough, proxyAuthorization } from '../support/egress-proxy-process.ts';
import { eventually } from '../support/operator-process.ts';

const NAMESPACE = 'egress-proxy-test';
let registry: Server;
let registryPort: number;
let registryConnections = 0;
let internal: TcpServer;
let internalPort: number;
let internalConnections = 0;
let apiServerPort: number;
let proxy: EgressProxyProcess;
const uids: Record<string, string> = {};

const listen = async <T extends Server | TcpServer>(server: T): Promise<number> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
};

function runManifest(name: string, allow: string[]) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      task: 'Install the dependencies',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
      sandbox: { egress: { allow } },
    },
  };
}

async function createRun(name: string, allow: string[]): Promise<void> {
  await kubectlOk(['apply', '-f', '-'], { input: stringify(runManifest(name, allow)) });
  uids[name] = (await kubectlOk(['get', 'codingrun', name, '-n', NAMESPACE, '-o', 'jsonpath={.metadata.uid}'])).trim();
}

const egressStatus = async (name: string) =>
  JSON.parse((await kubectlOk(['get', 'codingrun', name, '-n', NAMESPACE, '-o', 'jsonpath={.status.egress}'])) || 'null') as {
    connections: number;
    allowed: number;
    denied: number;
    bytesReceived: number;
    hosts: Array<{ host: string; port: number; allowed: number; denied: number; rule?: string }>;
  } | null;

beforeAll(async () => {
  registry = createServer((req, res) => res.end(`registry ok ${req.url}`));
  registry.on('connection', () => registryConnections++);
  registryPort = await listen(registry);
  internal = createTcpServer((socket) => {
    internalConnections++;
    socket.end('internal secret\n');
  });
  internalPort = await listen(internal);
  const kubeconfig = parse(readFileSync(kubeconfigPath(), 'utf8')) as { clusters: Array<{ cluster: { server: string } }> };
  apiServerPort = Number(new URL(kubeconfig.clusters[0]!.cluster.server).port);
  await createNamespace(NAMESPACE);
  await createRun('npm', [`registry.test:${registryPort}`]);
  await createRun('other', ['pypi.test']);
  await createRun('wild', ['*', `*:${registryPort}`, `*:${internalPort}`, `*:${apiServerPort}`]);
  proxy = await EgressProxyProcess.start(kubeconfigPath(), {
    allowEgress: ['*', `*:${registryPort}`, `*:${internalPort}`, `*:${apiServerPort}`],
    // The admin opens the registry's name to its (loopback) address, and kube.test too, to
    // show that naming a destination never opens the API server.
    allowPrivateDestinations: [`registry.test:${registryPort}`, `kube.test:${apiServerPort}`],
    hostAliases: {
      'registry.test': '127.0.0.1',
      'internal.test': '127.0.0.1',
      'kube.test': '127.0.0.1',
      'metadata.test': '169.254.169.254',
      'private.test': '10.255.255.1',
      'mapped.test': '::ffff:127.0.0.1',
    },
    watchNamespaces: [NAMESPACE],
    statusFlushSeconds: 1,
  });
}, 120_000);

afterAll(async () => {
  await proxy?.kill();
  registry?.close();
  internal?.close();
  await kubectl(['delete', 'namespace', NAMESPACE, '--wait=false']);
});

describe('egress proxy', () => {
  it("tunnels a run's allowed host (CONNECT) and forwards plain HTTP to it, which no tunnel carries", async () => {
    const through = async (bytes: string, run = uids.npm!) => {
      const tunnel = await connectThrough(proxy.port, `registry.test:${registryPort}`, proxyAuthorization(run));
      expect(tunnel.status).toBe(200);
      return new Promise<string>((resolve) => {
        let text = '';
        tunnel.socket!.on('data', (chunk: Buffer) => (text += chunk.toString()));
        tunnel.socket!.on('close', () => resolve(text));
        tunnel.socket!.write(bytes);
      });
    };
    // Bytes that are not HTTP reach the registry, whose HTTP server answers them 400: the tunnel carries both ways.
    const before = registryConnections;
    expect(await through('PING\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(registryConnections).toBe(before + 1);
    // An HTTP request through a tunnel, on a port other than 80, is closed unanswered (plain-http-tunnel;
    // run wild's, which may reach the registry too, so that npm's tallies below hold its allowed ones only).
    expect(await through(`GET /left-pad HTTP/1.1\r\nHost: registry.test\r\nConnection: close\r\n\r\n`, uids.wild!)).toBe('');
    await eventually(
      async () => proxy.audit.find((entry) => entry.runUid === uids.wild && entry.rule === 'plain-http-tunnel'),
      10_000,
      'the audit line of the refused tunnel',
    );
    const plain = await getThrough(proxy.port, `http://registry.test:${registryPort}/is-odd`, proxyAuthorization(uids.npm!));
    expect(plain).toMatchObject({ status: 200, body: 'registry ok /is-odd' });
  });

  it('asks for credentials (407) when a request carries none, and refuses a forged one', async () => {
    const none = await connectThrough(proxy.port, `registry.test:${registryPort}`);
    expect(none.status).toBe(407);
    expect(none.headers['proxy-authenticate']).toContain('Basic');
    expect(none.body).toContain('rule credential-missing');
    const forged = await connectThrough(proxy.port, `registry.test:${registryPort}`, proxyAuthorization(uids.npm!, 'f'.repeat(48)));
    expect(forged.status).toBe(407);
    expect(forged.body).toContain('rule credential-invalid');
  });

  it("refuses one run's credential for another run's host, naming the host, and the registry sees nothing", async () => {
    const before = registryConnections;
    const answer = await connectThrough(proxy.port, `registry.test:${registryPort}`, proxyAuthorization(uids.other!));
    expect(answer.status).toBe(403);
    expect(answer.headers['x-chamvi-egress-rule']).toBe('not-on-run-list');
    expect(answer.body).toContain(`registry.test:${registryPort} is not in spec.sandbox.egress.allow of run ${NAMESPACE}/other`);
    const plain = await getThrough(proxy.port, `http://registry.test:${registryPort}/`, proxyAuthorization(uids.other!));
    expect(plain.status).toBe(403);
    expect(registryConnections).toBe(before);
  });

  it.each([
    ['an internal listener on loopback that no admin named', () => `internal.test:${internalPort}`, 'private-address'],
    ['loopback as an IPv4-mapped IPv6 address', () => `mapped.test:${internalPort}`, 'private-address'],
    ['a private address', () => `private.test:${registryPort}`, 'private-address'],
    ['the metadata address', () => 'metadata.test:80', 'forbidden-address'],
    ['the API server, even under a name the admin opened', () => `kube.test:${apiServerPort}`, 'api-server'],
    ['an IP literal', () => `127.0.0.1:${internalPort}`, 'not-a-host-name'],
  ])('refuses a run allowed * %s', async (_what, authority, rule) => {
    const before = internalConnections;
    const answer = await connectThrough(proxy.port, authority(), proxyAuthorization(uids.wild!));
    expect(answer.status).toBe(403);
    expect(answer.body).toContain(`rule ${rule}`);
    expect(internalConnections).toBe(before);
  });

  it('records each connection: a JSON log line, metrics by namespace, counts and hosts in status.egress, an Event on the first denial', async () => {
    const line = proxy.audit.find((entry) => entry.runUid === uids.npm && entry.decision === 'allowed');
    expect(line).toMatchObject({ namespace: NAMESPACE, run: 'npm', host: 'registry.test', port: registryPort, kind: 'connect' });
    expect(line!.bytesReceived).toBeGreaterThan(0);
    expect(typeof line!.durationMs).toBe('number');

    const metrics = await (await fetch(`http://127.0.0.1:${proxy.httpPort}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(`chamvi_egress_connections_total\\{namespace="${NAMESPACE}",decision="denied",rule="api-server"\\} 1`),
    );
    expect(metrics).toMatch(new RegExp(`chamvi_egress_bytes_total\\{namespace="${NAMESPACE}",direction="received"\\} [1-9]`));

    const npm = await eventually(
      async () => (((await egressStatus('npm'))?.allowed ?? 0) >= 2 ? egressStatus('npm') : undefined),
      30_000,
      'status.egress of npm',
    );
    expect(npm).toMatchObject({ denied: 0, hosts: [{ host: 'registry.test', port: registryPort, allowed: 2, denied: 0 }] });
    expect(npm!.bytesReceived).toBeGreaterThan(0);
    const wild = await eventually(
      async () => (((await egressStatus('wild'))?.denied ?? 0) >= 6 ? egressStatus('wild') : undefined),
      30_000,
      'status.egress of wild',
    );
    expect(wild!.hosts.find((host) => host.host === 'kube.test')).toMatchObject({ denied: 1, rule: 'api-server' });

    const events = await eventually(
      async () => {
        const list = JSON.parse(
          await kubectlOk([
            'get',
            'events',
            '-n',
            NAMESPACE,
            '--field-selector',
            `involvedObject.name=wild,reason=EgressDenied`,
            '-o',
            'json',
          ]),
        ) as { items: Array<{ message: string }> };
        return list.items.length >= 6 ? list.items : undefined;
      },
      30_000,
      'EgressDenied events',
    );
    expect(events.map((event) => event.message).join('\n')).toContain('metadata.test:80');
  });

  it('tells the first denial of a host once, not once per connection', async () => {
    for (let i = 0; i < 3; i++) await connectThrough(proxy.port, 'metadata.test:80', proxyAuthorization(uids.other!));
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const list = JSON.parse(
      await kubectlOk([
        'get',
        'events',
        '-n',
        NAMESPACE,
        '--field-selector',
        'involvedObject.name=other,reason=EgressDenied',
        '-o',
        'json',
      ]),
    ) as { items: Array<{ message: string }> };
    expect(list.items.filter((event) => event.message.includes('metadata.test:80'))).toHaveLength(1);
  });

  it("refuses a run's credential once the run has ended, and once it is deleted", async () => {
    const auth = proxyAuthorization(uids.npm!);
    await kubectlOk([
      'patch',
      'codingrun',
      'npm',
      '-n',
      NAMESPACE,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { phase: 'Succeeded', reason: 'Completed', message: 'done' } }),
    ]);
    const ended = await eventually(
      async () => {
        const answer = await connectThrough(proxy.port, `registry.test:${registryPort}`, auth);
        answer.socket?.destroy();
        return answer.status === 403 ? answer : undefined;
      },
      15_000,
      'the ended run refused',
    );
    expect(ended.body).toContain('rule run-not-live');

    await createRun('deleted', [`registry.test:${registryPort}`]);
    const deletedAuth = proxyAuthorization(uids.deleted!);
    await eventually(
      async () => {
        const answer = await connectThrough(proxy.port, `registry.test:${registryPort}`, deletedAuth);
        answer.socket?.destroy();
        return answer.status === 200 ? true : undefined;
      },
      15_000,
      'the new run served',
    );
    await kubectlOk(['delete', 'codingrun', 'deleted', '-n', NAMESPACE]);
    await eventually(
      async () => {
        const answer = await connectThrough(proxy.port, `registry.test:${registryPort}`, deletedAuth);
        answer.socket?.destroy();
        return answer.status === 403 && answer.body.includes('rule run-not-live') ? true : undefined;
      },
      15_000,
      'the deleted run refused',
    );
  });
});

describe('egress proxy process bounds and start', () => {
  it('refuses to start when a name in apiServerAddresses does not resolve, saying which', async () => {
    const outcome = await EgressProxyProcess.start(kubeconfigPath(), {
      apiServerAddresses: ['api.invalid:443'],
      watchNamespaces: [NAMESPACE],
    }).then(
      async (started) => {
        await started.kill();
        return 'started';
      },
      (error: Error) => error.message,
    );
    expect(outcome).toMatch(/exited \(2\)[\s\S]*apiServerAddresses\[0\]: api\.invalid did not resolve/);
  });

  it('takes its connection bounds from its config: beyond them a connection is answered 429 too-many-connections, and counted', async () => {
    const bounded = await EgressProxyProcess.start(kubeconfigPath(), { limits: { connectionsPerSource: 3 }, watchNamespaces: [NAMESPACE] });
    const held: Socket[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const socket = connect(bounded.port, '127.0.0.1');
        socket.on('error', () => undefined);
        held.push(socket);
        // Connected, so ahead of the fourth in the listener's queue, which the proxy accepts in order.
        await new Promise((resolve) => socket.once('connect', resolve));
      }
      const beyond = await new Promise<string>((resolve) => {
        const socket = connect(bounded.port, '127.0.0.1');
        let text = '';
        socket.on('data', (data: Buffer) => (text += data.toString()));
        socket.on('error', () => undefined);
        socket.on('close', () => resolve(text));
      });
      expect(beyond).toMatch(/^HTTP\/1\.1 429 [\s\S]*x-chamvi-egress-rule: too-many-connections/);
      const metrics = await (await fetch(`http://127.0.0.1:${bounded.httpPort}/metrics`)).text();
      expect(metrics).toMatch(/chamvi_egress_refused_connections_total\{limit="per-source"\} 1/);
    } finally {
      for (const socket of held) socket.destroy();
      await bounded.kill();
    }
  });
});

describe('spec.sandbox.egress.allow at kubectl apply', () => {
  it.each([
    ['an IP address', '169.254.169.254'],
    ['a URL', 'https://registry.npmjs.org'],
    ['a wildcard inside a label', 'reg*.npmjs.org'],
    ['an upper-case name', 'Registry.npmjs.org'],
  ])('refuses %s, naming the field', async (_what, pattern) => {
    const result = await kubectl(['apply', '-f', '-'], { input: stringify(runManifest('bad-egress', [pattern])) });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('spec.sandbox.egress.allow[0]');
  });
});
