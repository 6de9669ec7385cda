// Runs the real egress proxy (operator/src/egress-proxy-main.ts) as a child process on real
// ports, with its JSON log lines collected, plus a client that speaks to it as a sandbox's
// tools would: CONNECT for a tunnel, an absolute-form request for plain HTTP.
import { writeFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';
import { LoggedProcess, type LogLine } from './logged-process.ts';

const mainPath = fileURLToPath(new URL('../../operator/src/egress-proxy-main.ts', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export const TEST_EGRESS_KEY = 'chamvi-test-egress-key-0123456789abcdef0123456789abcdef';

export class EgressProxyProcess extends LoggedProcess {
  port = 0;
  httpPort = 0;
  private readonly configFile: string;

  private constructor(kubeconfig: string, config: Record<string, unknown>) {
    const file = path.join(tmpdir(), `chamvi-egress-${process.pid}-${Date.now()}.yaml`);
    writeFileSync(file, stringify({ port: 0, httpPort: 0, egressKey: TEST_EGRESS_KEY, ...config }));
    super('egress proxy', ['--import', 'tsx', mainPath, '--config', file], {
      cwd: repoRoot,
      env: { ...process.env, KUBECONFIG: kubeconfig, LOG_LEVEL: 'info' },
    });
    this.configFile = file;
  }

  static async start(kubeconfig: string, config: Record<string, unknown>, timeoutMs = 60_000): Promise<EgressProxyProcess> {
    const proxy = new EgressProxyProcess(kubeconfig, config);
    try {
      const listening = await proxy.waitForLog('egress proxy listening', timeoutMs);
      proxy.port = listening.port as number;
      proxy.httpPort = listening.httpPort as number;
      return proxy;
    } finally {
      // The proxy reads its config once, at start: nothing needs the file after.
      rmSync(proxy.configFile, { force: true });
    }
  }

  /** The audit lines (one per connection). */
  get audit(): LogLine[] {
    return this.lines.filter((line) => line.event === 'egress');
  }
}

/** The Proxy-Authorization a sandbox of the run with this uid sends. */
export function proxyAuthorization(runUid: string, key = TEST_EGRESS_KEY): string {
  return `Basic ${Buffer.from(`${runUid}:${proxyToken(key, runUid)}`).toString('base64')}`;
}

export interface TunnelAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The open tunnel, when the proxy answered 200. */
  socket?: Socket;
}

/** CONNECT host:port through the proxy; resolves with the proxy's answer (and the tunnel on 200). */
export function connectThrough(proxyPort: number, authority: string, authorization?: string): Promise<TunnelAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxyPort, '127.0.0.1');
    let received = Buffer.alloc(0);
    socket.on('error', reject);
    socket.write(
      `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${authorization ? `Proxy-Authorization: ${authorization}\r\n` : ''}\r\n`,
    );
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...headerLines] = received.subarray(0, end).toString().split('\r\n');
      const status = Number(statusLine!.split(' ')[1]);
      const headers = Object.fromEntries(
        headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      if (status === 200) {
        socket.off('data', onData);
        resolve({ status, headers, body: '', socket });
        return;
      }
      const length = Number(headers['content-length'] ?? 0);
      if (received.length - end - 4 < length) return;
      socket.off('data', onData);
      socket.destroy();
      resolve({ status, headers, body: received.subarray(end + 4, end + 4 + length).toString() });
    };
    socket.on('data', onData);
  });
}

/** A plain-HTTP GET of an absolute URL through the proxy. */
export function getThrough(
  proxyPort: number,
  url: string,
  authorization?: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: proxyPort,
        path: url,
        method: 'GET',
        headers: authorization ? { 'proxy-authorization': authorization } : {},
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}
