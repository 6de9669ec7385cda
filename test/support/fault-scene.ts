// The world one faults-tier test file sets up and tears down: a temp root holding a bare
// repository served over file://, a PodSecurity-restricted namespace (and its lease
// namespace), optionally a census watching from the start, the kwok exec registrar running
// the real toolbox, and the operator process(es) with their own Redis prefix. Setup is one
// call, so each test file shows only what its fault needs.
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleOperator } from '../bench/bundled-operator.ts';
import { deleteNamespace, kubeconfigPath, redisUrl } from './cluster.ts';
import { ObjectCensus, RunNamespace, createBareRepo, operatorStory, startOperator, type RunStatus } from './fault-fixture.ts';
import type { OperatorProcess } from './operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from './sandbox-exec-registrar.ts';

export interface FaultSceneOptions {
  /** Namespace of the runs; `<namespace>-lease` holds the operator's Lease. Also the operator's identity. */
  readonly namespace: string;
  /** Redis of the operator; the test control plane's by default. */
  readonly redisUrl?: string;
  /** Key prefix in Redis; unique per scene by default. */
  readonly prefix?: string;
  /** Extra operator environment (CHAMVI_WORKER_CONCURRENCY, ...), for every operator of the scene. */
  readonly env?: Readonly<Record<string, string>>;
  /** Watch the operator's objects from before the operator starts (see ObjectCensus). */
  readonly census?: boolean;
  /** Start one operator and wait for its caches (default true); false for tests that start their own. */
  readonly operator?: boolean;
  /**
   * Run the operator as the image does, bundled by esbuild and started with plain node,
   * rather than main.ts through tsx (whose compiler adds ~100 MiB): for memory figures.
   */
  readonly bundled?: boolean;
}

export class FaultScene {
  readonly root: string;
  readonly prefix: string;
  /** file:// URL of the `hello` repository (README.md only). */
  readonly repoUrl: string;
  readonly operators: OperatorProcess[] = [];
  ns!: RunNamespace;
  registrar!: SandboxExecRegistrar;
  private censusOf: ObjectCensus | undefined;
  private entry: string | undefined;

  private constructor(private readonly options: FaultSceneOptions) {
    this.root = mkdtempSync(join(tmpdir(), `chamvi-${options.namespace}-`));
    this.prefix = options.prefix ?? `${options.namespace.replace(/[^A-Za-z0-9]/g, '')}${Date.now()}`;
    this.repoUrl = createBareRepo(this.root);
  }

  static async start(options: FaultSceneOptions): Promise<FaultScene> {
    const scene = new FaultScene(options);
    try {
      scene.ns = await RunNamespace.create(options.namespace);
      if (options.census) scene.censusOf = await ObjectCensus.start(scene.ns.name);
      scene.registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(scene.root, 'workspaces') });
      if (options.bundled) scene.entry = bundleOperator(join(scene.root, 'operator'));
      if (options.operator ?? true) await scene.startOperator(options.namespace).waitForLog('caches synced; reconciling', 60_000);
      return scene;
    } catch (error) {
      // Half a scene: nothing would stop it otherwise.
      await scene.stop();
      throw error;
    }
  }

  get census(): ObjectCensus {
    if (!this.censusOf) throw new Error('this scene was started without a census');
    return this.censusOf;
  }

  /** The scene's first operator. */
  get operator(): OperatorProcess {
    if (!this.operators[0]) throw new Error('this scene has started no operator');
    return this.operators[0];
  }

  /** Starts another operator process on the scene's namespace and Redis prefix. */
  startOperator(identity: string, env: Record<string, string> = {}): OperatorProcess {
    const operator = startOperator({
      namespace: this.ns,
      repoRoot: this.root,
      redisUrl: this.options.redisUrl ?? redisUrl(),
      redisPrefix: this.prefix,
      identity,
      entry: this.entry,
      env: { ...this.options.env, ...env },
    });
    this.operators.push(operator);
    return operator;
  }

  /** file:// URL of another bare repository `git/<name>.git` made from `files` (path → content). */
  createRepository(name: string, files: Readonly<Record<string, string | Buffer>>): string {
    return createBareRepo(this.root, name, files);
  }

  /** The first operator's /healthz etc. port. */
  async httpPort(): Promise<number> {
    return (await this.operator.waitForLog('operator starting')).port as number;
  }

  /** Waits for a terminal phase; on timeout prints where the run stood and the operator's complaints. */
  finished(name: string, timeoutMs = 90_000): Promise<RunStatus> {
    return this.ns.finished(name, timeoutMs).catch(async (error: unknown) => {
      console.error(`${name}: ${JSON.stringify(await this.ns.status(name).catch(() => ({})))}\n${operatorStory(this.operator)}`);
      throw error;
    });
  }

  async stop(): Promise<void> {
    for (const operator of this.operators) await operator.kill();
    this.censusOf?.stop();
    await this.registrar?.stop();
    if (this.ns) {
      await deleteNamespace(this.ns.name);
      await deleteNamespace(this.ns.leaseNamespace);
    }
    // Repositories (oversized.test.ts makes a 50 MiB one), clones and the bundle.
    await rm(this.root, { recursive: true, force: true });
  }
}
