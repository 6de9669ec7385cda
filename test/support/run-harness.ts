// What a faults-tier test file needs to drive whole runs, in the shape of test/e2e/agent.test.ts:
// its own namespace (PodSecurity-restricted), a bare git repository served over file:// and
// allowed by CHAMVI_ALLOW_REPO, the kwok exec registrar running the real toolbox, and the
// operator as a process with its own Redis prefix. Plus the small verbs the tests use: apply
// manifests, read a run's status, wait for it to end, measure the operator's memory.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { bundleOperator } from '../bench/bundled-operator.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, redisUrl } from './cluster.ts';
import { OperatorProcess, eventually } from './operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from './sandbox-exec-registrar.ts';

const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

export interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  steps?: number;
  toolCalls?: number;
  startTime?: string;
  completionTime?: string;
  usage?: Record<string, number | boolean>;
  result?: { summary: string; diff: string; diffConfigMap?: string; filesChanged: number; insertions: number; deletions: number; diffTruncated: boolean };
}

export interface RunHarnessOptions {
  /** Namespace of the runs; `<namespace>-lease` holds the operator's Lease. */
  readonly namespace: string;
  /** Extra operator environment (CHAMVI_WORKER_CONCURRENCY, ...). */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Run the operator as the image does, bundled by esbuild and started with plain node,
   * rather than main.ts through tsx (whose compiler adds ~100 MiB): for memory figures.
   */
  readonly bundled?: boolean;
}

function git(cwd: string, ...args: string[]): void {
  execFileSync('git', ['-c', 'user.email=faults@chamvi.dev', '-c', 'user.name=faults', ...args], { cwd, stdio: 'pipe' });
}

export class RunHarness {
  readonly namespace: string;
  readonly root: string;
  readonly prefix: string;
  operator!: OperatorProcess;
  private registrar!: SandboxExecRegistrar;

  constructor(private readonly options: RunHarnessOptions) {
    this.namespace = options.namespace;
    this.root = mkdtempSync(join(tmpdir(), `chamvi-${options.namespace}-`));
    this.prefix = `${options.namespace.replace(/[^A-Za-z0-9]/g, '')}${Date.now()}`;
  }

  /** file:// URL of a bare repository `git/<name>.git` made from `files` (path → content). */
  createRepository(name: string, files: Readonly<Record<string, string | Buffer>>): string {
    const source = join(this.root, 'source', name);
    execFileSync('git', ['init', '-q', '-b', 'main', source]);
    for (const [path, content] of Object.entries(files)) writeFileSync(join(source, path), content);
    git(source, 'add', '.');
    git(source, 'commit', '-qm', 'initial');
    execFileSync('git', ['clone', '-q', '--bare', source, join(this.root, 'git', `${name}.git`)]);
    return `file://${join(this.root, 'git', `${name}.git`)}`;
  }

  async start(): Promise<void> {
    await createNamespace(this.namespace, { restricted: true });
    await createNamespace(`${this.namespace}-lease`);
    this.registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(this.root, 'workspaces') });
    this.operator = new OperatorProcess({
      kubeconfig: kubeconfigPath(),
      ...(this.options.bundled ? { entry: bundleOperator(join(this.root, 'operator')) } : {}),
      env: {
        REDIS_URL: redisUrl(),
        CHAMVI_REDIS_PREFIX: this.prefix,
        CHAMVI_ALLOW_REPO: `file://${join(this.root, 'git')}/*`,
        CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
        CHAMVI_WATCH_NAMESPACES: this.namespace,
        CHAMVI_LEADER_ELECTION_NAMESPACE: `${this.namespace}-lease`,
        CHAMVI_IDENTITY: this.namespace,
        ...this.options.env,
      },
    });
    await this.operator.waitForLog('caches synced; reconciling', 60_000);
  }

  async stop(): Promise<void> {
    await this.operator?.kill();
    await this.registrar?.stop();
    await deleteNamespace(this.namespace);
    await deleteNamespace(`${this.namespace}-lease`);
    // Repositories (oversized.test.ts makes a 50 MiB one), clones and the bundle.
    await rm(this.root, { recursive: true, force: true });
  }

  /** The operator's /healthz etc. port. */
  async httpPort(): Promise<number> {
    return (await this.operator.waitForLog('operator starting')).port as number;
  }

  async apply(...objects: object[]): Promise<void> {
    const result = await kubectl(['apply', '-n', this.namespace, '-f', '-'], { input: objects.map((object) => stringify(object)).join('---\n') });
    if (result.code !== 0) throw new Error(result.stderr);
  }

  async statusOf(name: string): Promise<RunStatus> {
    const result = await kubectl(['get', 'crun', name, '-n', this.namespace, '-o', 'jsonpath={.status}']);
    return result.stdout ? (JSON.parse(result.stdout) as RunStatus) : {};
  }

  /** Waits for a terminal phase; on timeout prints where the run stood and the operator's complaints. */
  finished(name: string, timeoutMs = 90_000): Promise<RunStatus> {
    return eventually(async () => {
      const status = await this.statusOf(name);
      return status.phase === 'Succeeded' || status.phase === 'Failed' ? status : undefined;
    }, timeoutMs, `${name} to finish`).catch(async (error: unknown) => {
      const problems = this.operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-10);
      console.error(`${name}: ${JSON.stringify(await this.statusOf(name))}\n${problems.map((line) => JSON.stringify(line)).join('\n')}`);
      throw error;
    });
  }
}

export function scriptConfigMap(name: string, turns: object[]): object {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { 'script.json': JSON.stringify({ turns }) } };
}

export function codingRun(name: string, repoUrl: string, model: object, spec: object = {}): object {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: { task: 'Make the README greet the whole world.', repository: { url: repoUrl }, model, ...spec },
  };
}

/** Resident memory of a process in bytes (VmRSS), and its peak so far (VmHWM). */
export function residentMemory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

export interface MemorySampler {
  /** The largest VmRSS sample since the last lap (or the start), and starts a new lap. */
  lap(): number;
  /** Stops sampling: the largest sample overall, the kernel's VmHWM, and how many samples were taken. */
  stop(): { sampledPeak: number; highWaterMark: number; samples: number };
}

/** Samples a process's VmRSS every `intervalMs` until stopped. */
export function sampleMemory(pid: number, intervalMs = 100): MemorySampler {
  let sampledPeak = 0;
  let lapPeak = 0;
  let highWaterMark = 0;
  let samples = 0;
  const take = () => {
    try {
      const { rss, peak } = residentMemory(pid);
      sampledPeak = Math.max(sampledPeak, rss);
      lapPeak = Math.max(lapPeak, rss);
      highWaterMark = Math.max(highWaterMark, peak);
      samples += 1;
    } catch {
      // the process is gone
    }
  };
  take();
  const timer = setInterval(take, intervalMs);
  return {
    lap() {
      take();
      const peak = lapPeak;
      lapPeak = 0;
      return peak;
    },
    stop() {
      clearInterval(timer);
      take();
      return { sampledPeak, highWaterMark, samples };
    },
  };
}

export const MiB = 1024 * 1024;
