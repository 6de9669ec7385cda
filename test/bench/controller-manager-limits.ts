// The client rate limit of the scale benchmark's peer. kube-controller-manager's clients wait
// on a token bucket (--kube-api-qps, default 20 per second; --kube-api-burst, default 30);
// the operator's client (@kubernetes/client-node) has no client-side limiter and the operator
// sets none. A comparison at the defaults measures that limit as much as the controllers, so
// the benchmark restarts kube-controller-manager with a bucket too large to ever be empty and
// reads its own rate-limiter metric to show how long its requests waited.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import path from 'node:path';
import type { ControlPlane } from '../support/control-plane/control-plane.ts';
import { recordedProcesses, startManagedProcess, stopProcessGroup } from '../support/control-plane/managed-process.ts';

export interface ClientLimits {
  qps: number;
  burst: number;
}

/** kube-controller-manager's own defaults (control-plane.ts passes neither flag). */
export const KCM_DEFAULT_LIMITS: ClientLimits = { qps: 20, burst: 30 };
/**
 * As good as none, like the operator's: a bucket of 100 000 refilled at 100 000 per second
 * is never empty at the few hundred requests per second one API server on two cores serves.
 * (A negative QPS would drop client-go's limiter, but kube-controller-manager's option
 * validation is not documented to accept it; a number it certainly accepts is plainer.)
 */
export const KCM_UNLIMITED: ClientLimits = { qps: 100_000, burst: 100_000 };

const NAME = 'kube-controller-manager';

/** The command line with its client limits replaced by `limits`. */
export function withClientLimits(args: readonly string[], limits: ClientLimits): string[] {
  if (args.some((arg) => arg === '--kube-api-qps' || arg === '--kube-api-burst')) {
    throw new Error('kube-controller-manager was given its limits as separate arguments; expected --flag=value');
  }
  const kept = args.filter((arg) => !/^--kube-api-(qps|burst)=/.test(arg));
  return [...kept, `--kube-api-qps=${limits.qps}`, `--kube-api-burst=${limits.burst}`];
}

function runningControllerManager(plane: ControlPlane): { pid: number; command: string; args: string[] } {
  const entry = recordedProcesses(plane.stateDir).find((process) => process.name === NAME);
  if (!entry) throw new Error(`no recorded ${NAME} in ${plane.stateDir}`);
  const argv = readFileSync(`/proc/${entry.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  return { pid: entry.pid, command: entry.command, args: argv.slice(1) };
}

/** The limits the running kube-controller-manager was started with (its defaults when none). */
export function currentLimits(plane: ControlPlane): ClientLimits {
  const { args } = runningControllerManager(plane);
  const flag = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1];
  return { qps: Number(flag('kube-api-qps') ?? KCM_DEFAULT_LIMITS.qps), burst: Number(flag('kube-api-burst') ?? KCM_DEFAULT_LIMITS.burst) };
}

/**
 * Stops kube-controller-manager and starts it again with the same command line but these
 * client limits, then waits for /healthz. Its pid changes: sample it afresh afterwards.
 */
export async function restartControllerManager(plane: ControlPlane, limits: ClientLimits): Promise<void> {
  const running = runningControllerManager(plane);
  await stopProcessGroup(running.pid, running.command);
  startManagedProcess({ name: NAME, stateDir: plane.stateDir, command: running.command, args: withClientLimits(running.args, limits) });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const healthy = await get(plane, '/healthz').then(
      (response) => response.status === 200,
      () => false,
    );
    if (healthy) return;
    if (Date.now() > deadline) throw new Error(`${NAME} did not become healthy within 60 s after the restart`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Time kube-controller-manager's requests spent waiting for its client rate limiter, and
 * how many requests went through it, from its rest_client_rate_limiter_duration_seconds
 * histogram (all its controllers together, since its start).
 */
export async function rateLimiterWait(plane: ControlPlane): Promise<{ seconds: number; requests: number }> {
  const response = await get(plane, '/metrics');
  if (response.status !== 200) throw new Error(`${NAME} /metrics answered ${response.status}`);
  return parseRateLimiterWait(response.body);
}

export function parseRateLimiterWait(metrics: string): { seconds: number; requests: number } {
  let seconds = 0;
  let requests = 0;
  for (const line of metrics.split('\n')) {
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.startsWith('rest_client_rate_limiter_duration_seconds_sum')) seconds += value;
    else if (line.startsWith('rest_client_rate_limiter_duration_seconds_count')) requests += value;
  }
  return { seconds, requests };
}

// Its serving certificate is self-signed (--cert-dir); the admin client certificate gets past
// its delegated authorization for /metrics.
function get(plane: ControlPlane, urlPath: string): Promise<{ status: number; body: string }> {
  const pki = path.join(plane.stateDir, 'pki');
  return new Promise((resolve, reject) => {
    const req = request(
      `https://127.0.0.1:${plane.ports.controllerManager}${urlPath}`,
      {
        rejectUnauthorized: false,
        cert: readFileSync(path.join(pki, 'admin.crt')),
        key: readFileSync(path.join(pki, 'admin.key')),
        timeout: 5_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${urlPath} timed out`)));
    req.on('error', reject);
    req.end();
  });
}
