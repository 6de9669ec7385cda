// The sandbox of a local run: the bundled toolbox as a child process (a kept serve session)
// on a workspace and home in a fresh temporary directory, removed when the run's sandbox
// is released. Its environment is built like the pod's: PATH and locale from this shell,
// HOME in the temporary directory, spec.sandbox.env, and nothing else, so API keys in the
// user's environment do not reach the commands the model runs. The toolbox process itself
// (node, and its git) runs with it too, so spec.sandbox.env may not name a variable they read
// (local-env-names.ts). It is NOT the pod's
// isolation: the tools run as the user, on this machine, with its network. So (Security
// #11.13) spec.sandbox.setup, a bash command, runs here only as a bash call of the model
// would: when bash is in spec.approval.tools, a human approves it first. So does
// spec.verify.command, which the operator runs after the model finishes.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ParsedCodingRun } from '../../api/index.ts';
import type { ApprovalAnswer } from '../../reconcile/run-agent.ts';
import { DEFAULT_TOOLBOX_PATH, createLocalSandbox, type LocalSandbox } from '../../sandbox/local-sandbox.ts';
import type { Sandbox, ToolRequest, ToolResponse } from '../../sandbox/sandbox.ts';
import type { SandboxFactory } from '../../workers/sandbox-pool.ts';
import { ToolboxMissingError } from '../errors/toolbox-missing-error.ts';
import { absolutePath } from '../../workers/absolute-path.ts';
import { localEnvNameProblem } from './local-env-names.ts';

/** Overrides where the toolbox bundle is (default: sandbox-image/dist/toolbox.mjs of this checkout). */
export const TOOLBOX_PATH_ENV = 'CHAMVI_TOOLBOX_PATH';

const INHERITED = ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TMPDIR'];

/**
 * Where the toolbox bundle is: $CHAMVI_TOOLBOX_PATH if set; else toolbox.mjs beside the
 * plugin bundle (the npm package and the krew archive ship it there; first, so that an
 * installed plugin never runs a sandbox-image/ directory it finds above itself, such as a
 * package of that name in node_modules); else the checkout's, found from the source
 * (operator/src/sandbox/) or from the plugin bundle (operator/dist/, make cli).
 */
export function findToolbox(env: NodeJS.ProcessEnv): string {
  const given = env[TOOLBOX_PATH_ENV];
  if (given) {
    if (!existsSync(given)) throw new ToolboxMissingError(given);
    return given;
  }
  const fromBundle = fileURLToPath(new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url));
  const besideBundle = fileURLToPath(new URL('./toolbox.mjs', import.meta.url));
  const found = [besideBundle, DEFAULT_TOOLBOX_PATH, fromBundle].find((candidate) => existsSync(candidate));
  if (!found) throw new ToolboxMissingError(DEFAULT_TOOLBOX_PATH);
  return found;
}

export function sandboxEnvironment(run: ParsedCodingRun, home: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const sandboxEnv: NodeJS.ProcessEnv = { HOME: home };
  for (const name of INHERITED) if (env[name]) sandboxEnv[name] = env[name];
  // acceptLocalRun refused these names: the toolbox's own node and git would read them. Skipped
  // here too, for a run that reached the factory another way.
  for (const { name, value } of run.spec.sandbox.env ?? []) if (!localEnvNameProblem(name)) sandboxEnv[name] = value;
  // The tools run in the clone: a relative PATH entry would find the repository's own `git`.
  // After the run's variables, so that nothing they hold brings one back.
  if (sandboxEnv.PATH !== undefined) sandboxEnv.PATH = absolutePath(sandboxEnv.PATH);
  return sandboxEnv;
}

async function createRunSandbox(
  run: ParsedCodingRun,
  toolboxPath: string,
  env: NodeJS.ProcessEnv,
): Promise<{ sandbox: LocalSandbox; base: string }> {
  const base = await mkdtemp(path.join(tmpdir(), `chamvi-local-${run.metadata.name.slice(0, 40)}-`));
  const home = path.join(base, 'home');
  // The toolbox keeps its logs and background jobs under CHAMVI_HOME, as in the pod.
  const toolboxHome = path.join(home, '.chamvi');
  const workspaceDir = path.join(base, 'workspace');
  await mkdir(toolboxHome, { recursive: true });
  await mkdir(workspaceDir);
  const sandbox = await createLocalSandbox({
    mode: 'serve',
    toolboxPath,
    workspaceDir,
    homeDir: toolboxHome,
    env: sandboxEnvironment(run, home, env),
  });
  return { sandbox, base };
}

/**
 * Asks whether spec.sandbox.setup (or spec.verify.command) may run on this machine; the command
 * is shown whole, and `note` under it.
 */
export type SetupApprover = (run: ParsedCodingRun, command: string, subject?: GatedCommand, note?: string) => Promise<ApprovalAnswer>;

/** Most lines of git status the verify question shows. */
const CHANGED_LINES_SHOWN = 40;

/**
 * What the verify question says under the command: the check runs the workspace as the model
 * left it, so `npm test` runs a package.json script the model rewrote. git status, from the
 * toolbox's git_diff (the model cannot have written .git: the file tools refuse it, and bash
 * is gated), bounded.
 */
export async function verifyNote(sandbox: Sandbox): Promise<string> {
  const response = await sandbox.call({ tool: 'git_diff', input: {} }).catch((error: unknown) => ({ ok: false as const, error }));
  const status = response.ok ? (response.result as { status?: unknown }).status : undefined;
  const lines = typeof status === 'string' ? status.split('\n').filter((line) => line !== '') : undefined;
  const head = 'It runs in the workspace as the model left it, so what the model changed runs too (a script, a Makefile, a test).';
  if (!lines) return `${head} What changed could not be read.`;
  if (lines.length === 0) return `${head} The model changed nothing.`;
  const shown = lines.slice(0, CHANGED_LINES_SHOWN).join('\n');
  const more = lines.length > CHANGED_LINES_SHOWN ? `\n... and ${lines.length - CHANGED_LINES_SHOWN} more` : '';
  return `${head} git status there:\n${shown}${more}`;
}

export type GatedCommand = 'spec.sandbox.setup' | 'spec.verify.command';

/** True for the prepare job's run of spec.sandbox.setup when the run's policy gates bash. */
export function isGatedSetup(run: ParsedCodingRun, request: ToolRequest): boolean {
  const setup = run.spec.sandbox.setup;
  if (!setup || request.tool !== 'bash' || !run.spec.approval.tools.includes('bash')) return false;
  return (request.input as { command?: unknown } | undefined)?.command === setup;
}

/** True for the operator's run of spec.verify.command (a clean bash) when the run's policy gates bash. */
export function isGatedVerify(run: ParsedCodingRun, request: ToolRequest): boolean {
  const verify = run.spec.verify?.command;
  if (!verify || request.tool !== 'bash' || request.clean !== true || !run.spec.approval.tools.includes('bash')) return false;
  return (request.input as { command?: unknown } | undefined)?.command === verify;
}

/** The refusal the verification reports (it fails, saying so): nothing ran. */
export function verifyDenied(answer: ApprovalAnswer): ToolResponse {
  const message =
    `spec.verify.command needed approval (bash is in spec.approval.tools, so the check is asked like a bash call) and was denied: ` +
    `${answer.reason ?? 'no reason given'}; nothing ran. Run it on a terminal to approve it, or take bash out of spec.approval.tools`;
  return { ok: false, error: { code: 'INVALID_INPUT', message } };
}

/** The refusal the prepare job reports as SetupFailed: nothing ran. */
export function setupDenied(answer: ApprovalAnswer): ToolResponse {
  const message =
    `setup needed approval (bash is in spec.approval.tools, so spec.sandbox.setup is asked like a bash call) and was denied: ` +
    `${answer.reason ?? 'no reason given'}; nothing ran. Run it on a terminal to approve it, or take bash out of spec.approval.tools`;
  return { ok: false, error: { code: 'INVALID_INPUT', message } };
}

/** A SandboxFactory (synchronous, as the pool wants) whose sandboxes come up on first use. */
export class LocalSandboxFactory {
  private readonly open = new Set<Sandbox>();

  constructor(
    private readonly toolboxPath: string,
    private readonly env: NodeJS.ProcessEnv,
    /** Without one, a gated setup is denied. */
    private readonly approveSetup?: SetupApprover,
  ) {}

  readonly create: SandboxFactory = (run) => {
    const creating = createRunSandbox(run, this.toolboxPath, this.env);
    // Awaited by the first call; a failure reaches that call, never an unhandled rejection.
    creating.catch(() => undefined);
    let closed: Promise<void> | undefined;
    // Asked once per run: a retried prepare job must not ask again, nor run a denied setup.
    let setupAnswer: Promise<ApprovalAnswer> | undefined;
    const sandbox: Sandbox = {
      call: async (request, options) => {
        if (isGatedSetup(run, request)) {
          setupAnswer ??= this.approveSetup
            ? this.approveSetup(run, run.spec.sandbox.setup!)
            : Promise.resolve({ id: 'setup', decision: 'deny', reason: 'no way to ask' });
          const answer = await setupAnswer;
          if (answer.decision !== 'approve') return setupDenied(answer);
        }
        // Asked at every check, not once: a check after a retry runs what the model changed since.
        if (isGatedVerify(run, request)) {
          const answer = this.approveSetup
            ? await this.approveSetup(run, run.spec.verify!.command, 'spec.verify.command', await verifyNote((await creating).sandbox))
            : { id: 'verify', decision: 'deny' as const, reason: 'no way to ask' };
          if (answer.decision !== 'approve') return verifyDenied(answer);
        }
        return (await creating).sandbox.call(request, options);
      },
      importTree: async (tar, options) => (await creating).sandbox.importTree(tar, options),
      close: () =>
        (closed ??= (async () => {
          this.open.delete(sandbox);
          const created = await creating.catch(() => undefined);
          if (!created) return;
          await created.sandbox.close();
          await rm(created.base, { recursive: true, force: true });
        })()),
    };
    this.open.add(sandbox);
    return sandbox;
  };

  /** Ends every sandbox still open: their tool calls fail at once, their directories go. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.open].map((sandbox) => sandbox.close().catch(() => undefined)));
  }
}
