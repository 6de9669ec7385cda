// Polling helpers that decide when a started program is usable. A program that exits while
// we wait fails the wait at once, with the end of its log, instead of timing out later.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { logTail, type ManagedProcess } from './managed-process.ts';

export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  options: { timeoutMs: number; watch?: readonly ManagedProcess[]; intervalMs?: number },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown;
  for (;;) {
    for (const proc of options.watch ?? []) {
      const exit = proc.exited();
      if (exit) {
        throw new Error(
          `${proc.name} exited (code ${exit.code}, signal ${exit.signal}) while waiting for ${what}; ` +
            `log ${proc.logPath}:\n${logTail(proc.logPath)}`,
        );
      }
    }
    try {
      if (await check()) return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const watched = (options.watch ?? []).map((p) => `--- ${p.logPath}\n${logTail(p.logPath, 15)}`).join('\n');
      throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${what}; last error: ${String(lastError)}\n${watched}`);
    }
    await sleep(options.intervalMs ?? 200);
  }
}

export interface TlsClient {
  ca: string;
  cert?: string;
  key?: string;
}

/** GET an https URL; resolves with the status code and body. */
export function httpsGet(url: string, tls: TlsClient | 'insecure'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const options =
      tls === 'insecure'
        ? { rejectUnauthorized: false }
        : {
            ca: readFileSync(tls.ca),
            ...(tls.cert ? { cert: readFileSync(tls.cert) } : {}),
            ...(tls.key ? { key: readFileSync(tls.key) } : {}),
          };
    const req = request(url, { method: 'GET', timeout: 5_000, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** Sends a Redis PING (after AUTH when a password is given) and resolves true on +PONG. */
export function redisPing(port: number, password?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    const command = (...parts: string[]) =>
      `*${parts.length}\r\n${parts.map((part) => `$${Buffer.byteLength(part)}\r\n${part}\r\n`).join('')}`;
    const replies = password === undefined ? 1 : 2;
    socket.setTimeout(2_000, () => socket.destroy());
    socket.on('connect', () => socket.write((password === undefined ? '' : command('AUTH', password)) + command('PING')));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      const lines = reply.split('\r\n');
      if (lines.length > replies) {
        socket.end();
        resolve(lines[replies - 1]!.startsWith('+PONG'));
      }
    });
    socket.on('error', () => resolve(false));
    socket.on('close', () => resolve(false));
  });
}
