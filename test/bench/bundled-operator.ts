// The operator as the image runs it (operator/Dockerfile): operator/src/main.ts bundled by
// operator/tools/bundle.ts (the image's bundling script) into one ESM file on plain node,
// npm packages external. A benchmark measures this
// process, not tsx compiling TypeScript on the fly (which costs memory and CPU of its own).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { operatorNodeFlags, operatorNodeOptions } from '../support/operator-node-flags.ts';
import type { LogLine } from '../support/operator-process.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Bundles the operator into `dir/main.mjs`, its process launcher beside it as the image has
 * them, with `dir/node_modules` pointing at the repository's.
 */
export function bundleOperator(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const outfile = path.join(dir, 'main.mjs');
  for (const [name, file] of [
    ['operator', outfile],
    ['process-launcher', path.join(dir, 'process-launcher-main.mjs')],
  ])
    execFileSync(path.join(repoRoot, 'node_modules/.bin/tsx'), ['operator/tools/bundle.ts', name!, file!], {
      cwd: repoRoot,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  // Bare imports resolve from the bundle's directory upwards.
  symlinkSync(path.join(repoRoot, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  return outfile;
}

/**
 * The environment of a bundled operator that watches one namespace of a bench's own control
 * plane, leads through a lease in `${namespace}-lease`, and needs no sandbox isolation.
 */
export function oneNamespaceOperatorEnv(plane: { kubeconfig: string; redisUrl: string }, namespace: string): Record<string, string> {
  return {
    KUBECONFIG: plane.kubeconfig,
    REDIS_URL: plane.redisUrl,
    CHAMVI_HTTP_PORT: '0',
    CHAMVI_STATE_KEY: 'chamvi-bench-state-key-0123456789abcdef0123456789abcdef',
    CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'true',
    CHAMVI_WATCH_NAMESPACES: namespace,
    CHAMVI_LEADER_ELECTION_NAMESPACE: `${namespace}-lease`,
    LOG_LEVEL: 'info',
  };
}

/** A process's peak RSS so far (VmHWM), in MiB. */
export const peakRssMiB = (pid: number) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** One pino line of the operator (the same shape the test operators read). */
export type OperatorLogLine = LogLine;

export class BundledOperator {
  /** Warnings and errors (pino level >= 40), newest last; info lines are counted, not kept. */
  readonly problems: OperatorLogLine[] = [];
  readonly counts = new Map<string, number>();
  /** The port of its health and metrics server, from its "operator starting" line. */
  httpPort: number | undefined;
  private readonly child: ChildProcess;
  private readonly stderr: string[] = [];
  readonly exited: Promise<number | null>;

  constructor(bundle: string, env: Record<string, string>, nodeArgs: string[] = []) {
    this.child = spawn(process.execPath, [...operatorNodeFlags(), ...nodeArgs, bundle], {
      cwd: path.dirname(bundle),
      // The image's environment (operator/Dockerfile).
      env: { ...process.env, NODE_ENV: 'production', NODE_OPTIONS: operatorNodeOptions(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buffered = '';
    this.child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const part of parts) this.onLine(part);
    });
    this.child.stderr!.on('data', (chunk: Buffer) => this.stderr.push(chunk.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  private onLine(text: string): void {
    let line: OperatorLogLine;
    try {
      line = JSON.parse(text) as OperatorLogLine;
    } catch {
      line = { msg: text, level: 40 };
    }
    const message = line.msg ?? '';
    if (message === 'operator starting' && typeof line.port === 'number') this.httpPort = line.port;
    this.counts.set(message, (this.counts.get(message) ?? 0) + 1);
    if ((line.level ?? 0) >= 40) {
      this.problems.push(line);
      if (this.problems.length > 200) this.problems.shift();
    }
  }

  get pid(): number {
    return this.child.pid!;
  }

  async waitForLog(message: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.counts.has(message)) {
      // A signal (V8's abort at its heap limit) leaves exitCode null.
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        throw new Error(
          `the operator exited (${this.child.exitCode ?? this.child.signalCode}) before logging "${message}": ${this.stderr.join('').slice(-2000)}`,
        );
      if (Date.now() > deadline) throw new Error(`the operator did not log "${message}" within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Sum of a counter (or a histogram's _count) on its /metrics. */
  async metric(name: string): Promise<number> {
    return (await this.metrics([name]))[name] ?? Number.NaN;
  }

  /** Several metrics from one scrape (some, such as the event loop's delay, are reset by each), each summed over its labels. */
  async metrics(names: readonly string[]): Promise<Record<string, number>> {
    if (this.httpPort === undefined) return {};
    const text = await (await fetch(`http://127.0.0.1:${this.httpPort}/metrics`)).text();
    const sums: Record<string, number> = Object.fromEntries(names.map((name) => [name, 0]));
    for (const line of text.split('\n')) {
      const name = names.find((each) => line.startsWith(`${each} `) || line.startsWith(`${each}{`));
      if (name) sums[name]! += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return sums;
  }

  kill(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}
