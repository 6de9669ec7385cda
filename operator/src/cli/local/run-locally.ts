// `kubectl codingrun run -f FILE --local`: one CodingRun on this machine, through the same
// parts the operator runs — decide() and the RunReconciler for the run's life, BullMQ
// workers on Redis for prepare, steps and finalize, the bundled toolbox for the tools —
// with local adapters where the operator talks to Kubernetes: an in-memory API server
// holding the run and the file's ConfigMaps and Secrets, a sandbox in a temporary
// directory, Events and the transcript printed as progress, and the diff written to stdout at the end.
import { KubeConfig } from '@kubernetes/client-node';
import type { Command } from '../parse-arguments.ts';
import type { CodingRun } from '../../api/index.ts';
import { EventRecorder } from '../../kube/event-recorder.ts';
import { RunReconciler } from '../../controller/run-reconciler.ts';
import { OperatorMetrics } from '../../observability/operator-metrics.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../providers/calling-policy.ts';
import { startAgentRuntime, type AgentRuntime } from '../../workers/agent-runtime.ts';
import { chooseDiff } from '../diff-source.ts';
import type { CliOutput } from '../execute-command.ts';
import { InterruptedError } from '../errors/interrupted-error.ts';
import { RunFailedError } from '../errors/run-failed-error.ts';
import { acceptLocalRun, apiKeySourceNote } from './accept-local-run.ts';
import { ApprovalDesk } from './approval-desk.ts';
import { localModelEndpoints, localOperatorConfig, localRedisPrefix } from './local-operator-config.ts';
import { provideRedis, type LocalRedis } from './local-redis.ts';
import { configuredRedis } from './redis-url.ts';
import { reconcileUntilFinished } from './local-run-loop.ts';
import { LocalSandboxFactory, type GatedCommand, findToolbox } from './local-sandbox-factory.ts';
import { readManifest } from './manifest-file.ts';
import { MemoryKubeGateway } from './memory-kube-gateway.ts';
import { memoryRunResources } from './memory-run-resources.ts';
import { memoryTranscriptWriter } from './memory-transcript-writer.ts';
import { ProgressPrinter } from './progress-printer.ts';
import { readerColumns } from '../print-logs.ts';
import { StderrLogger } from './stderr-logger.ts';
import { denyWithoutTerminal, terminalApprover, type Approver } from './terminal-approver.ts';

export type RunCommand = Extract<Command, { command: 'run' }>;

export interface LocalRunIo extends CliOutput {
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Where approval questions are asked (stderr: stdout carries only the diff). */
  prompt: NodeJS.WritableStream;
  /** Ctrl-C at an approval question, which readline catches on a TTY. */
  interrupt?: () => void;
  /** How wide stderr's terminal is (tests); else read from process.stderr, Infinity when it is no terminal. */
  errColumns?: number;
}

/** How long stopping may wait for a job in flight (a model call) before leaving it behind. */
const STOP_GRACE_MS = 5_000;

function chooseApprover(io: LocalRunIo, file: string): Approver {
  // With -f -, stdin held the manifest and cannot also answer questions.
  if (io.stdin.isTTY && file !== '-') {
    return terminalApprover({ input: io.stdin, output: io.prompt, terminal: true, ...(io.interrupt ? { onInterrupt: io.interrupt } : {}) });
  }
  return denyWithoutTerminal;
}

const withTimeout = (work: Promise<unknown>, ms: number) =>
  Promise.race([work.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, ms).unref())]);

function printDiff(run: CodingRun, gateway: MemoryKubeGateway, io: LocalRunIo): void {
  const result = run.status?.result;
  if (!result) return;
  const configMap = result.diffConfigMap ? gateway.configMap(run.metadata.namespace, result.diffConfigMap) : undefined;
  const diff = chooseDiff(run, configMap);
  if (diff.warning) io.err(diff.warning);
  if (diff.text === '') io.err(`codingrun/${run.metadata.name} changed nothing: its diff is empty`);
  else io.out(diff.text.endsWith('\n') ? diff.text.slice(0, -1) : diff.text);
}

export async function runLocally(command: RunCommand, io: LocalRunIo): Promise<number> {
  const startedAt = Date.now();
  // Progress goes to stderr: its terminal, when it is one, is the one the rows must fit.
  const printer = new ProgressPrinter(io.err, startedAt, Date.now, { columns: io.errColumns ?? readerColumns({}, process.stderr) });
  const manifest = await readManifest(command.file, io.stdin, command.namespace);
  const modelEndpoints = localModelEndpoints(manifest.run);
  const accepted = acceptLocalRun(manifest, io.env, localOperatorConfig(undefined, undefined, modelEndpoints), io.now());
  const toolboxPath = findToolbox(io.env);
  const redisConfigured = configuredRedis(command, io.env);
  const { run } = accepted;
  const key = `${run.metadata.namespace}/${run.metadata.name}`;
  for (const ignored of manifest.ignored)
    printer.note(`ignoring ${ignored}: local mode uses the CodingRun and the ConfigMaps and Secrets of its namespace`);
  const keyNote = apiKeySourceNote(accepted);
  if (keyNote) printer.note(keyNote);

  const signal = io.signal ?? new AbortController().signal;
  const redisPrefix = localRedisPrefix();
  const redis: LocalRedis = await provideRedis(redisConfigured, redisPrefix, io.env);
  // A process.exit() before the cleanup below (a second Ctrl-C) must not leave redis-server behind.
  const killRedis = () => redis.killNow();
  process.once('exit', killRedis);
  const approver = chooseApprover(io, command.file);
  // Security #11.13: setup runs on this machine, so it is asked like a bash call (withdrawn on Ctrl-C).
  const approveSetup = (current: CodingRun, command: string, subject: GatedCommand = 'spec.sandbox.setup', note?: string) =>
    approver(
      {
        runName: current.metadata.name,
        id: subject === 'spec.sandbox.setup' ? 'setup' : 'verify',
        toolName: 'bash',
        input: command,
        subject,
        ...(note ? { note } : {}),
      },
      signal,
    );
  const sandboxes = new LocalSandboxFactory(toolboxPath, io.env, approveSetup);
  let runtime: AgentRuntime | undefined;
  let desk: ApprovalDesk | undefined;
  const forceStop = () => {
    io.err('stopping now');
    redis.killNow();
    process.exit(1);
  };
  const logger = new StderrLogger(io.err);
  const onAbort = () => {
    logger.silence();
    io.err(`interrupted: stopping codingrun/${run.metadata.name} (Ctrl-C again to stop at once)`);
    process.once('SIGINT', forceStop);
    process.once('SIGTERM', forceStop);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    printer.note(`Redis: ${redis.description}`);
    const config = localOperatorConfig(redis.url, redisPrefix, modelEndpoints);
    const gateway = new MemoryKubeGateway(run, accepted, (event) => printer.event(event));
    const events = new EventRecorder(gateway, config.identity, logger);
    runtime = startAgentRuntime({
      config,
      // Unused: resources below replace the cluster's Secrets and ConfigMaps.
      kubeConfig: new KubeConfig(),
      kube: gateway,
      events,
      metrics: new OperatorMetrics({ defaultMetrics: false }),
      logger,
      sandboxFor: sandboxes.create,
      callingPolicy: DEFAULT_CALLING_POLICY,
      callingPolicyDependencies: createSystemCallingPolicyDependencies(),
      resources: memoryRunResources(gateway),
      // Each step as `kubectl codingrun logs -f` prints it, kept as the same chunks.
      transcript: memoryTranscriptWriter(gateway, (entry) => printer.entry(entry)),
    });
    const agent = runtime.runAgent;
    const reconciler = new RunReconciler({ caches: gateway.caches(), kube: gateway, agent, events, config, logger });
    desk = new ApprovalDesk(
      approver,
      (current, answer) => agent.resume(current, answer),
      (message) => printer.note(message),
    );
    const finished = await reconcileUntilFinished({
      gateway,
      reconciler,
      key,
      signal,
      onRun: (current) => desk!.observe(current),
      onError: (error) => io.err(`warning: reconcile failed, retrying: ${error instanceof Error ? error.message : String(error)}`),
    });
    desk.close();
    if (!finished) throw new InterruptedError(run.metadata.name);
    // Let the last job end (it records the final Event and releases the sandbox) before the summary.
    await withTimeout(runtime.close(), STOP_GRACE_MS * 6);
    runtime = undefined;
    const final = gateway.current() ?? finished;
    printer.finished(final);
    printDiff(final, gateway, io);
    // Terminal here: Succeeded, or Failed/Cancelled with a reason.
    const phase = final.status?.phase ?? 'Failed';
    if (phase !== 'Succeeded') throw new RunFailedError(run.metadata.name, phase, final.status?.reason, final.status?.message);
    return 0;
  } finally {
    signal.removeEventListener('abort', onAbort);
    desk?.close();
    // Sandboxes first: a tool call in flight then fails at once instead of holding the worker.
    await sandboxes.closeAll();
    if (runtime) await withTimeout(runtime.close(), STOP_GRACE_MS);
    await redis.release();
    process.off('exit', killRedis);
  }
}
