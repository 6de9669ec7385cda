// What the faults-tier tests share: a bare git repository to clone over file://, a
// namespace with its runs (apply, read status, wait for a phase, approve), the operator's
// environment, and a census that watches what the operator creates from the start of a
// test, so a pod deleted and made again still counts as two.
import { CoreV1Api, KubeConfig, NetworkingV1Api, Watch, type V1ConfigMap, type V1NetworkPolicy, type V1Pod } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { Informer, type CachedObject } from '../../operator/src/controller/informer.ts';
import { APPROVAL_ANNOTATION, approvalInputSha256, encodeApprovalAnnotation } from '../../operator/src/reconcile/approval-answer.ts';
import { decodeDiff, type DiffData } from '../../operator/src/reconcile/diff-config-map.ts';
import { diffConfigMapName, sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { createNamespace, kubeconfigPath, kubectl } from './cluster.ts';
import { OperatorProcess, eventually, type LogLine } from './operator-process.ts';
import type { FakeReply } from './fake-openai-server.ts';

export const toolboxPath = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  reasoningTokens: number;
  totalTokens: number;
  complete: boolean;
}

export interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  steps?: number;
  toolCalls?: number;
  usage?: Usage;
  startTime?: string;
  completionTime?: string;
  pendingApproval?: { id: string; toolName: string; input: string };
  conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
  result?: {
    summary: string;
    diff: string;
    diffConfigMap?: string;
    filesChanged: number;
    insertions: number;
    deletions: number;
    diffTruncated: boolean;
  };
}

export interface RunObject {
  metadata: { name: string; uid: string; resourceVersion: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  status?: RunStatus;
}

export const TERMINAL = new Set(['Succeeded', 'Failed', 'Cancelled']);

/** What a repository holds unless a test says otherwise. */
export const HELLO_FILES: Readonly<Record<string, string>> = { 'README.md': 'Hello\n\nA small example repository.\n' };

/** A bare repository `<root>/git/<name>.git` made from `files` (path → content); returns its file:// URL. */
export function createBareRepo(root: string, name = 'hello', files: Readonly<Record<string, string | Buffer>> = HELLO_FILES): string {
  const source = join(root, 'source', name);
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.email=faults@chamvi.dev', '-c', 'user.name=faults', ...args], { cwd: source, stdio: 'pipe' });
  execFileSync('git', ['init', '-q', '-b', 'main', source]);
  for (const [path, content] of Object.entries(files)) writeFileSync(join(source, path), content);
  git('add', '.');
  git('commit', '-qm', 'initial');
  execFileSync('git', ['clone', '-q', '--bare', source, join(root, 'git', `${name}.git`)]);
  return `file://${join(root, 'git', `${name}.git`)}`;
}

/** Scripted-model turns; usage sums and counts are what a finished run must report. */
export interface ScriptTurn {
  text?: string;
  toolCalls?: Array<{ toolName: string; input: Record<string, unknown> }>;
  usage?: { inputTokens: number; outputTokens: number; cacheReadTokens?: number; reasoningTokens?: number };
}

/** A turn's usage as the scripted model reports it. */
export const usage = (inputTokens: number, outputTokens: number) => ({ inputTokens, outputTokens });

export const scriptConfigMap = (name: string, turns: ScriptTurn[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});

/** What a run that plays `turns` to the end must report. */
export function expectedTotals(turns: ScriptTurn[]): { steps: number; toolCalls: number; usage: Usage } {
  const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 0, complete: true };
  for (const turn of turns) {
    usage.inputTokens += turn.usage?.inputTokens ?? 0;
    usage.outputTokens += turn.usage?.outputTokens ?? 0;
    usage.cacheReadTokens += turn.usage?.cacheReadTokens ?? 0;
    usage.reasoningTokens += turn.usage?.reasoningTokens ?? 0;
    if (!turn.usage) usage.complete = false;
  }
  usage.totalTokens = usage.inputTokens + usage.outputTokens;
  return { steps: turns.length, toolCalls: turns.reduce((sum, turn) => sum + (turn.toolCalls?.length ?? 0), 0), usage };
}

export const READ_README = { toolName: 'read_file', input: { path: 'README.md' } };
export const GREET_WORLD = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };
export const DIFF_STAT = { toolName: 'bash', input: { command: 'git diff --stat' } };
export const bashCall = (command: string) => ({ toolName: 'bash', input: { command } });

/**
 * Greets the world, then runs `git diff --stat` (the bash call a run with
 * `approval: { tools: ['bash'] }` waits on), then says so; `input` varies the usage per test.
 */
export const approvalTurns = (input: number): ScriptTurn[] => [
  { toolCalls: [GREET_WORLD], usage: usage(input, 1) },
  { toolCalls: [DIFF_STAT], usage: usage(input + 10, 2) },
  { text: 'Greeted the world.', usage: usage(input + 20, 3) },
];

/**
 * What a request of these runs might really count: they are played over HTTP too (fakeReplyOf),
 * and the operator does not believe an endpoint's figure under a tenth of its own estimate of
 * the request or the answer (agent/usage-accounting.ts); a request here is a few thousand tokens.
 */
export const PROMPT_TOKENS = 5_000;

/** Reads the README, greets the world, then says so; `input` varies the usage per run. */
export const greetTurns = (input: number): ScriptTurn[] => [
  { toolCalls: [READ_README], usage: usage(PROMPT_TOKENS + input, 10) },
  { toolCalls: [GREET_WORLD], usage: usage(PROMPT_TOKENS + input + 10, 20) },
  { text: 'Greeted the world.', usage: usage(PROMPT_TOKENS + input + 20, 30) },
];

/** A script turn as the fake OpenAI server's reply (test/support/fake-openai-server.ts), optionally delayed. */
export const fakeReplyOf = (turn: ScriptTurn, delayMs?: number): FakeReply => ({
  ...(turn.toolCalls
    ? { type: 'tool-calls' as const, toolCalls: turn.toolCalls.map((call) => ({ name: call.toolName, arguments: call.input })) }
    : { type: 'text' as const, text: turn.text! }),
  usage: { promptTokens: turn.usage!.inputTokens, completionTokens: turn.usage!.outputTokens },
  ...(delayMs !== undefined ? { delayMs } : {}),
});

/** The README change GREET_WORLD makes, as it shows in a diff. */
export const GREETED = '-Hello\n+Hello, world\n';

export function codingRun(name: string, repoUrl: string, model: object, spec: object = {}) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: { task: 'Make the README greet the whole world.', repository: { url: repoUrl }, model, ...spec },
  };
}

export const scriptedModel = (scriptName: string) => ({ provider: 'scripted', scriptRef: { name: scriptName } });

/** A namespace for a test's runs (PodSecurity restricted) and one for its leader Lease. */
export class RunNamespace {
  constructor(readonly name: string) {}

  get leaseNamespace(): string {
    return `${this.name}-lease`;
  }

  static async create(name: string): Promise<RunNamespace> {
    await createNamespace(name, { restricted: true });
    await createNamespace(`${name}-lease`);
    return new RunNamespace(name);
  }

  async apply(...objects: object[]): Promise<void> {
    const result = await kubectl(['apply', '-n', this.name, '-f', '-'], {
      input: objects.map((object) => stringify(object)).join('---\n'),
    });
    if (result.code !== 0) throw new Error(result.stderr);
  }

  async run(name: string): Promise<RunObject> {
    const result = await kubectl(['get', 'crun', name, '-n', this.name, '-o', 'json']);
    if (result.code !== 0) throw new Error(result.stderr);
    return JSON.parse(result.stdout) as RunObject;
  }

  async status(name: string): Promise<RunStatus> {
    return (await this.run(name)).status ?? {};
  }

  waitFor(name: string, what: string, test: (status: RunStatus) => boolean, timeoutMs = 60_000): Promise<RunStatus> {
    return eventually(
      async () => {
        const status = await this.status(name);
        return test(status) ? status : undefined;
      },
      timeoutMs,
      `${this.name}/${name} ${what}`,
    );
  }

  finished(name: string, timeoutMs = 120_000): Promise<RunStatus> {
    return this.waitFor(name, 'to finish', (status) => TERMINAL.has(status.phase ?? ''), timeoutMs);
  }

  /** Answers the pending approval as `kubectl codingrun approve` does (the annotation). */
  async answer(name: string, id: string, decision: 'approve' | 'deny'): Promise<void> {
    // Security #11.5: an approve names the sha256 of the pending input, as the plugin sends it.
    const input = decision === 'approve' ? (await this.status(name)).pendingApproval?.input : undefined;
    const answer = encodeApprovalAnnotation({ id, decision, ...(input !== undefined ? { sha256: approvalInputSha256(input) } : {}) });
    const result = await kubectl(['annotate', 'crun', name, '-n', this.name, `${APPROVAL_ANNOTATION}=${answer}`, '--overwrite']);
    if (result.code !== 0) throw new Error(result.stderr);
  }

  /** The names the operator derives for the run `name` (from its uid: security #11.6). */
  async derivedNames(name: string): Promise<{ pod: string; diff: string }> {
    const run = { metadata: { name, uid: (await this.run(name)).metadata.uid } };
    return { pod: sandboxPodName(run), diff: diffConfigMapName(run) };
  }

  /** The diff in the run's diff ConfigMap under its derived name, undefined when there is none. */
  async diffConfigMap(name: string): Promise<string | undefined> {
    const result = await kubectl(['get', 'configmap', (await this.derivedNames(name)).diff, '-n', this.name, '-o', 'json']);
    return result.code === 0 ? (decodeDiff(JSON.parse(result.stdout) as DiffData) ?? '') : undefined;
  }
}

export interface OperatorSetup {
  namespace: RunNamespace;
  repoRoot: string;
  redisUrl: string;
  redisPrefix: string;
  identity: string;
  /** A bundled operator (see test/bench/bundled-operator.ts) instead of main.ts through tsx. */
  entry?: string;
  env?: Record<string, string>;
}

/** The operator as a process, watching one namespace, wired to run the local toolbox. */
export function startOperator(setup: OperatorSetup): OperatorProcess {
  return new OperatorProcess({
    kubeconfig: kubeconfigPath(),
    ...(setup.entry ? { entry: setup.entry } : {}),
    env: {
      REDIS_URL: setup.redisUrl,
      CHAMVI_REDIS_PREFIX: setup.redisPrefix,
      CHAMVI_ALLOW_REPO: `file://${join(setup.repoRoot, 'git')}/*`,
      CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolboxPath}`,
      CHAMVI_WATCH_NAMESPACES: setup.namespace.name,
      CHAMVI_LEADER_ELECTION_NAMESPACE: setup.namespace.leaseNamespace,
      CHAMVI_IDENTITY: setup.identity,
      ...setup.env,
    },
  });
}

/** What an operator said at warn level or above, and its reconciler's actions, for a failure message. */
export function operatorStory(operator: OperatorProcess, last = 40): string {
  const interesting = (line: LogLine) =>
    (line.level ?? 0) >= 40 || line.msg === 'applied actions' || line.msg === 'status written' || line.msg === 'became leader';
  return operator.lines
    .filter(interesting)
    .slice(-last)
    .map((line) => JSON.stringify(line))
    .join('\n');
}

type Kind = 'pods' | 'networkpolicies' | 'configmaps';

/**
 * Every object of the operator's (managed-by label) in a namespace, seen through a watch
 * that started before the runs: the distinct UIDs each name ever had, so a pod that was
 * deleted and made again under the same name counts twice.
 */
export class ObjectCensus {
  private readonly uids = new Map<string, Set<string>>();
  private readonly live = new Set<string>();
  private readonly firstSight: Array<{ kind: Kind; match: (name: string) => boolean; callback: () => void }> = [];
  private readonly informers: Informer<CachedObject>[] = [];

  private constructor() {}

  static async start(namespace: string, kinds: Kind[] = ['pods', 'networkpolicies', 'configmaps']): Promise<ObjectCensus> {
    const census = new ObjectCensus();
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath());
    const watch = new Watch(kubeConfig);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const networking = kubeConfig.makeApiClient(NetworkingV1Api);
    const labelSelector = 'app.kubernetes.io/managed-by=chamvi-operator';
    const lists: Record<Kind, { path: string; list: () => Promise<{ items: CachedObject[]; metadata?: { resourceVersion?: string } }> }> = {
      pods: {
        path: `/api/v1/namespaces/${namespace}/pods`,
        list: () => core.listNamespacedPod({ namespace, labelSelector }) as Promise<{ items: V1Pod[] }>,
      },
      networkpolicies: {
        path: `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`,
        list: () => networking.listNamespacedNetworkPolicy({ namespace, labelSelector }) as Promise<{ items: V1NetworkPolicy[] }>,
      },
      configmaps: {
        path: `/api/v1/namespaces/${namespace}/configmaps`,
        list: () => core.listNamespacedConfigMap({ namespace, labelSelector }) as Promise<{ items: V1ConfigMap[] }>,
      },
    };
    const quiet = { warn: () => undefined };
    for (const kind of kinds) {
      const record = (object: CachedObject, exists: boolean) => {
        const metadata = object.metadata as { name?: string; uid?: string } | undefined;
        if (!metadata?.name || !metadata.uid) return;
        const key = `${kind}/${metadata.name}`;
        if (!census.uids.has(key)) census.uids.set(key, new Set());
        census.uids.get(key)!.add(metadata.uid);
        if (exists) census.live.add(key);
        else census.live.delete(key);
        const waiting = census.firstSight.findIndex((entry) => entry.kind === kind && entry.match(metadata.name!));
        if (waiting >= 0) census.firstSight.splice(waiting, 1)[0]!.callback();
      };
      census.informers.push(
        new Informer<CachedObject>(
          watch,
          { ...lists[kind], labelSelector },
          { onChange: (object) => record(object, true), onDelete: (object) => record(object, false) },
          quiet,
        ),
      );
    }
    await Promise.all(census.informers.map((informer) => informer.start()));
    return census;
  }

  /** Distinct UIDs the object `kind/name` has had since the census started. */
  count(kind: Kind, name: string): number {
    return this.uids.get(`${kind}/${name}`)?.size ?? 0;
  }

  /**
   * Calls `callback` synchronously in the watch event that first shows a `kind` object named
   * `name` (or matching it: a derived name is known only once the run has its uid).
   */
  onFirstSight(kind: Kind, name: string | RegExp, callback: () => void): void {
    const match = typeof name === 'string' ? (seen: string) => seen === name : (seen: string) => name.test(seen);
    if ([...this.uids.keys()].some((key) => key.startsWith(`${kind}/`) && match(key.slice(kind.length + 1)))) callback();
    else this.firstSight.push({ kind, match, callback });
  }

  /** True while `kind/name` exists (as far as the watch has told). */
  exists(kind: Kind, name: string): boolean {
    return this.live.has(`${kind}/${name}`);
  }

  stop(): void {
    for (const informer of this.informers) informer.stop();
  }
}
