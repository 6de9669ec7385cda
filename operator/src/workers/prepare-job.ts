// prepare: clone the repository in the worker, stream the tree (with .git, for git_diff)
// into the sandbox through the toolbox's import, run spec.sandbox.setup, and start the loop.
import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RepositoryInstructions } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { GUIDANCE_PROMPT_MAX_BYTES, guidanceSection, guidanceTokensFor } from '../agent/repository-guidance.ts';
import { EVENT_REASONS, FAILURE_MESSAGES, REASONS, RunFailure, type ParsedCodingRun, type RunTiming } from '../api/index.ts';
import { timing } from '../reconcile/run-timings.ts';
import type { Sandbox, ToolRequest } from '../sandbox/sandbox.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { cutAtLine } from '../reconcile/cut-at-line.ts';
import { applyDiff, headRevision } from './apply-diff.ts';
import { decideContinuation, diffDoesNotApply } from './continuation.ts';
import { refFreeArchive } from './clone-cache.ts';
import { repositoryAllowedNow } from './repository-allowed-now.ts';
import { cloneMeasured, remoteCommit } from './git-clone.ts';
import { readGitToken } from './git-token.ts';
import { launchHere, launchToEnd } from './process-launcher.ts';
import { liveRun, readAgainWhile, runNow, throwIfPutOff } from './live-run.ts';
import { startingState } from './starting-state.ts';
import { archiveReadStream } from './archive-stream.ts';
import { OPERATOR_COMMAND_PREFIX } from './operator-command-prefix.ts';

const DEFAULT_SETUP_TIMEOUT_MS = 30 * 60_000;
/** The client waits this much past a command's own timeout for the toolbox to answer (as verify-work.ts does). */
const ANSWER_GRACE_MS = 60_000;
/** The check that the workspace holds the clone: its command's own timeout. */
const CHECK_TIMEOUT_MS = 60_000;

/**
 * The check that the import landed: the workspace has a HEAD. Run before any approval, so in the
 * toolbox's own environment (operatorEnvironment): with the run's PATH it ran a git the
 * repository committed (/workspace/.venv/bin/git). The command clears the run's git environment
 * itself too (OPERATOR_COMMAND_PREFIX). The
 * workspace's .git named, not searched for: no GIT_DIR, and no safe.directory needed for a
 * workspace of another owner (git checks the owner of a repository it finds, not one it is given).
 */
export const IMPORT_CHECK: ToolRequest = {
  tool: 'bash',
  input: { command: `${OPERATOR_COMMAND_PREFIX}; git --git-dir=.git rev-parse --verify -q HEAD`, timeoutMs: CHECK_TIMEOUT_MS },
  operatorEnvironment: true,
};

/**
 * The clone's own bounds before its archive exists (git-clone.ts: the remote asked, 60 s; the
 * fetch, the measure of its tree and the checkout, 300 s each), with room for the tar.
 */
const CLONE_BOUND_MS = 60_000 + 3 * 300_000 + 120_000;
/**
 * The slowest link an archive is given time for: a busy node's exec stream moved 4 MiB/s in a
 * review's estimate, so half that. A stopped toolbox is found at this bound rather than at the
 * sandbox's default; a slow but working import must never be cut (each try would start over).
 */
const IMPORT_MIN_BYTES_PER_SECOND = 2 * 1_048_576;

/**
 * The import's client deadline. Without one a stopped toolbox held the prepare for the sandbox's
 * default (31 minutes), and each of the job's tries again. The import starts with the clone
 * (the session asks the toolbox to receive first, then waits for the archive), so the bound
 * covers the clone's, then the archive at a slow link: the checkout and its download, each at
 * most maxCheckoutBytes. Pure.
 */
export function importTimeoutMs(maxCheckoutBytes: number): number {
  return CLONE_BOUND_MS + Math.ceil(((2 * maxCheckoutBytes) / IMPORT_MIN_BYTES_PER_SECOND) * 1000);
}

/** podName: the sandbox pod the controller gave the run (job data); absent in a job queued by an older operator. */
export async function runPrepareJob(deps: AgentDependencies, ref: RunRef, podName?: string): Promise<void> {
  const existing = await deps.states.load(ref);
  if (existing && existing.stage !== 'preparing') {
    // A redone prepare after the loop started: make sure the loop goes on, nothing more. Not
    // for a step in flight: its job owns it (BullMQ runs a stalled one again), and a job for
    // the step after it would find nothing to do and spend the id that step hands on to.
    if (existing.stage === 'stepping' && !existing.inFlight) await deps.queue.step(ref, existing.step);
    return;
  }
  // A run whose spec no longer parses is not prepared: the controller ends it InvalidSpec
  // (refused before its start, else keeping the diff its state allows), which removes the job.
  // Nor is one whose accepting write (a warm pool's run, queued before it) has not landed: the
  // job is put off until it has (errors/awaiting-acceptance-error.ts).
  const found = await runNow(deps, ref);
  throwIfPutOff(found, 'clone the repository or start the run');
  if ('ended' in found) return;
  const { run } = found;
  const { spec } = run;
  // Security #11.2: checked again against allowRepo as it is now, the operator's and the
  // namespace's chamvi.dev/allow-repo (either may have narrowed since the run was accepted), and
  // git gets the checked string, nothing re-spelt.
  const repository = await repositoryAllowedNow(deps, ref.namespace, spec.repository.url);
  if (!repository.allowed) throw new RunFailure(REASONS.RepoNotAllowed, repository.message);
  const token = spec.repository.credentialsSecretRef
    ? await readGitToken(deps.resources, ref.namespace, {
        ...spec.repository.credentialsSecretRef,
        field: 'spec.repository.credentialsSecretRef',
      })
    : undefined;
  // spec.continueFrom: decided before the clone, which then fetches the source run's commit.
  const continuation = spec.continueFrom ? await readContinuation(deps, run, spec.continueFrom.name, spec.repository.url) : undefined;
  // status.timings: Clone (with a continuation's diff applied), Import (with its check), Setup.
  const timings: RunTiming[] = [];
  const cloneStarted = deps.now();
  // The clone (in this worker) and the sandbox's side overlap: the run's kept tool session
  // opens at once, and the import, sent through it (one exec for both), asks the toolbox to
  // receive and then waits for the archive, so neither the exec nor the toolbox's start waits
  // for the clone. The archive stream yields only the clone's own archive: a failed clone
  // sends nothing.
  //
  // The clone's files on the worker's /tmp (an emptyDir whose limit evicts the operator) go as
  // soon as nothing reads them: the tree and its .git once the archive holds them, the archive
  // once the import has it. Kept until after the setup (up to 30 minutes), each prepare held
  // about four times its checkout there for that long.
  let workDir: string | undefined;
  let treeRemoval: Promise<unknown> = Promise.resolve();
  let importStarted: Date | undefined;
  let fromCache = false;
  const archiveReady = (async () => {
    const clone = {
      url: repository.url,
      revision: continuation?.revision ?? spec.repository.revision,
      token,
      maxCheckoutBytes: deps.clonePolicy.maxCheckoutBytes,
      maxCheckoutFiles: deps.clonePolicy.maxCheckoutFiles,
      maxGitMemoryBytes: deps.clonePolicy.maxGitMemoryBytes,
      launch: deps.launch,
    };
    // The clone cache (clone-cache.ts) is asked only for the commit the remote names for this
    // run, and the annotated tag object it names it through, asked with its credential; a
    // continuation's tree has its diff applied, so it clones.
    const cache = continuation ? undefined : deps.cloneCache;
    const named = cache ? await remoteCommit(clone).catch(() => undefined) : undefined;
    const kept = cache && named ? await cache.take(repository.url, named, deps.clonePolicy) : undefined;
    if (kept && named) {
      deps.metrics.cloneCache.inc({ result: 'hit' });
      workDir = kept.dir;
      fromCache = true;
      importStarted = deps.now();
      timings.push(timing('Clone', cloneStarted, importStarted));
      return { revision: named.commit, revisionRef: named.ref, archive: kept.archive };
    }
    if (cache) deps.metrics.cloneCache.inc({ result: 'miss' });
    // A clone that fails throws a RunFailure (CloneFailed) that says what to check.
    const { dir, size, revisionRef } = await cloneMeasured(clone);
    workDir = dirname(dir);
    const revision = await headRevision(dir, deps.launch, clone.maxGitMemoryBytes);
    if (continuation) {
      const applied = await applyDiff(dir, continuation.diff, deps.launch, { maxGitMemoryBytes: clone.maxGitMemoryBytes });
      if (!applied.applied) throw new RunFailure(REASONS.InvalidSpec, diffDoesNotApply(spec.continueFrom!.name, revision, applied.output));
    }
    // The archive goes through a file: piping tar's stdout straight into the exec stream
    // delivered nothing on kwok (an unexplained transport issue, see the issue notes),
    // while a file stream arrives whole.
    const archive = join(workDir, 'workspace.tar');
    // The cache keeps only a clone that holds no ref, and names the tag object it holds
    // (clone-cache.ts); asked of the tree beside the tar, which reads the same tree, and
    // answered before the tree goes.
    const refFree = cache ? refFreeArchive(dir, archive, deps.launch, clone.maxGitMemoryBytes) : undefined;
    await launchToEnd(deps.launch ?? launchHere, 'tar', ['-C', dir, '-cf', archive, '.'], dir);
    const keepable = await refFree;
    // Nothing reads the tree again (the revision is read and the diff applied above, the
    // guidance is read in the sandbox, the cache links the archive): started, not awaited, so
    // the archive's stream does not wait for it.
    treeRemoval = removeQuietly(dir);
    importStarted = deps.now();
    timings.push(timing('Clone', cloneStarted, importStarted));
    // Kept for the next run of this commit; a cache that cannot keep it costs this run nothing.
    if (cache && keepable) await cache.keep(repository.url, revision, keepable, size).catch(() => undefined);
    return { revision, revisionRef, archive };
  })();
  // Settled below; until then a failed clone must not count as unhandled.
  archiveReady.catch(() => undefined);
  async function* archiveStream(): AsyncGenerator<Uint8Array> {
    // No clone, no archive: the archive ends empty, and the import (which only adds) adds nothing.
    const ready = await archiveReady.catch(() => undefined);
    if (!ready) return;
    for await (const chunk of archiveReadStream(ready.archive)) yield chunk as Uint8Array;
  }
  let guidance: string | undefined;
  let revision: string;
  /** The ref spec.repository.revision named as the clone took it (none for a continuation, which clones a commit): publishing's base. */
  let revisionRef: string | undefined;
  /** The clone directory's removal, once started (it is started once). */
  let removal: Promise<unknown> | undefined;
  /** Starts the removal of the clone's directory, once the clone has settled (it sets workDir); not awaited. */
  const removeWorkDir = async () => {
    await archiveReady.catch(() => undefined);
    const dir = workDir;
    if (!dir || removal) return;
    removal = treeRemoval.then(() => removeQuietly(dir));
  };
  try {
    const sandbox = deps.sandboxes.for(podName ? onPod(run, podName) : await withPodName(deps, ref, run));
    const opening = sandbox.open?.().catch(() => undefined);
    const imported = sandbox.importTree(archiveStream(), { timeoutMs: importTimeoutMs(deps.clonePolicy.maxCheckoutBytes) });
    imported.catch(() => undefined); // awaited below, unless the clone failed first
    // The clone's failure is the run's (CloneFailed, InvalidSpec), not the import's. It is
    // thrown only once the import (fed an empty archive) and the session start have settled:
    // the run's end releases its sandbox, and an exec still in flight then would outlive it
    // (a local sandbox's directory came back after its removal).
    const ready = await archiveReady.catch(async (error: unknown) => {
      await Promise.allSettled([imported, opening]);
      throw error;
    });
    revision = ready.revision;
    revisionRef = ready.revisionRef;
    await imported;
    // The sandbox holds the tree now: the archive goes before the check, the guidance and the setup.
    await removeWorkDir();
    await opening;
    // The workspace must now be the clone; an exec that landed elsewhere would otherwise
    // show only later as an agent that finds no files. A failure here is retried.
    const check = await sandbox.call(IMPORT_CHECK, { timeoutMs: CHECK_TIMEOUT_MS + ANSWER_GRACE_MS });
    if (!check.ok || (check.result as { exitCode: number | null }).exitCode !== 0) {
      throw new Error('the sandbox workspace does not hold the cloned repository after the import');
    }
    timings.push(timing('Import', importStarted!, deps.now()));
    // The guidance is read before the setup, and nothing after the setup can fail but the
    // state's creation: a prepare that fails is retried from the clone, and a setup that
    // already ran would run again (a second `git apply` in it fails the run).
    if (spec.repositoryInstructions) guidance = await readGuidance(sandbox, spec.model.contextWindow);
    if (spec.sandbox.setup) {
      const setupStarted = deps.now();
      const setupTimeoutMs = deps.setupTimeoutMs ?? DEFAULT_SETUP_TIMEOUT_MS;
      const response = await sandbox.call(
        { tool: 'bash', input: { command: spec.sandbox.setup, timeoutMs: setupTimeoutMs } },
        { timeoutMs: setupTimeoutMs + ANSWER_GRACE_MS },
      );
      const result = response.ok
        ? (response.result as { exitCode: number | null; stdout: string; stderr: string; timedOut: boolean })
        : undefined;
      if (!result || result.exitCode !== 0) {
        const output = result
          ? cutAtLine(`${result.stdout}\n${result.stderr}`.trim().slice(-2000), 2000).text
          : `${response.ok ? '' : response.error.message}`;
        const why = result?.timedOut ? 'timed out' : `exited with ${result?.exitCode ?? 'an error'}`;
        throw new RunFailure(REASONS.SetupFailed, FAILURE_MESSAGES.setupFailed(why, output));
      }
      timings.push(timing('Setup', setupStarted, deps.now()));
      // Not a fresh read of the run: a failed read here would redo the setup. (An Event is never thrown.)
      await deps.events.record(run, {
        type: 'Normal',
        reason: EVENT_REASONS.SetupDone,
        message: `Setup command finished: ${spec.sandbox.setup.slice(0, 200)}`,
      });
    }
  } finally {
    // A prepare that failed before its import ended. Started, not awaited: the clone's files go
    // while the run starts (awaited below). Measured on the real node, the removal took 5-150 ms
    // of a claimed run's start.
    await removeWorkDir();
  }
  const startedAt = Date.parse(run.status?.startTime ?? deps.now().toISOString());
  await deps.states.create(startingState(ref, startedAt, guidance, { revision, revisionRef, continuation: continuation?.prompt, timings }));
  // The first step is queued at once; the Event (its time is taken before the step can start,
  // so it still reads first) and the clone's removal go alongside it, not before it.
  await Promise.all([
    deps.queue.step(ref, 0),
    deps.events.record(run, {
      type: 'Normal',
      reason: EVENT_REASONS.Prepared,
      message: continuation
        ? `Cloned ${spec.repository.url}@${revision} and applied the diff of run ${spec.continueFrom!.name} into the sandbox`
        : `Cloned ${spec.repository.url}${spec.repository.revision ? `@${spec.repository.revision}` : ''} into the sandbox${fromCache ? ` (commit ${revision} from the clone cache)` : ''}`,
    }),
    removal,
  ]);
}

/** Removes a clone's file or directory; one that cannot be removed is left to the next start (stale-clones.ts). */
function removeQuietly(path: string): Promise<unknown> {
  return rm(path, { recursive: true, force: true }).catch(() => undefined);
}

/** The run as its sandbox is opened: on the pod its job names (the transport still checks the pod is the run's). */
function onPod(run: ParsedCodingRun, podName: string): ParsedCodingRun {
  return { ...run, status: { ...run.status, podName } };
}

/**
 * The run as the sandbox is opened for it, for a job that does not name the pod (queued by an
 * operator from before jobs did). A run given a warm pool pod is handed to the agent
 * in the same reconcile that writes its pod's name to status (the job is enqueued first, so a
 * crash between the two leaves a job, not a Running run without one), so this job can read the
 * run a moment before status.podName is there: read again, briefly, rather than open the
 * sandbox at the derived name, which no pod has. The write that makes it Running names the pod.
 */
function withPodName(deps: AgentDependencies, ref: RunRef, run: ParsedCodingRun): Promise<ParsedCodingRun> {
  return readAgainWhile(
    run,
    // Fresh: what this process remembers of the run (kube/recent-runs.ts) may be the very read that lacked the name.
    async (last) => (await liveRun({ getRun: deps.getRunFresh ?? deps.getRun }, ref)) ?? last,
    (current) => current.status?.phase !== 'Running' && !current.status?.podName,
  );
}

/**
 * spec.continueFrom's source run and its diff, read in this run's namespace only; a refusal fails
 * the run (InvalidSpec, or ContinueFromReplaced for a source that is not the one accepted).
 */
async function readContinuation(deps: AgentDependencies, run: ParsedCodingRun, sourceName: string, repositoryUrl: string) {
  const { namespace } = run.metadata;
  const source = await deps.getRun(namespace, sourceName);
  const acceptedUid = run.status?.continuedFrom?.uid;
  // Not another run's ConfigMap: one re-created under the source's name reads nothing more.
  const readable = source && (acceptedUid === undefined || source.metadata.uid === acceptedUid);
  const configMapName = readable ? source.status?.result?.diffConfigMap : undefined;
  const diffConfigMap = configMapName ? await deps.resources.readDiffConfigMap(namespace, configMapName) : undefined;
  const decision = decideContinuation({ namespace, sourceName, repositoryUrl, source, diffConfigMap, acceptedUid });
  if (!decision.ok) throw decision.failure;
  return decision;
}

/**
 * The repository's root guidance as a prompt section (#13.8); a toolbox error leaves it out
 * rather than failing the run. The toolbox bounds what it reads (sizes, includes, no FIFOs), so
 * the check's deadline serves: a stopped toolbox fails this try in two minutes, not the
 * sandbox's default 31.
 */
async function readGuidance(sandbox: Sandbox, contextWindow: number): Promise<string | undefined> {
  const response = await sandbox.call(
    { tool: 'read_repository_instructions', input: { paths: ['.'] } },
    { timeoutMs: CHECK_TIMEOUT_MS + ANSWER_GRACE_MS },
  );
  const maxTokens = guidanceTokensFor(contextWindow);
  return response.ok ? guidanceSection(response.result as RepositoryInstructions, GUIDANCE_PROMPT_MAX_BYTES, maxTokens) : undefined;
}
