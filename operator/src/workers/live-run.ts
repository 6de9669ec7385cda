// A job acts only on the run as it is now: read from the API server (or as it returned the
// run a moment ago, within kube/recent-runs.ts's bound, which says why that is safe), the same run
// (uid) as the job's, not deleted and not finished, with a spec that still parses. The
// model, budgets and approval tools come from here, never from Redis (Security #11.1).
// A run whose spec no longer parses (runNow `specInvalid`) is not an ended run: the controller
// ends it InvalidSpec keeping its diff against the commit its state names, so a job that finds
// it keeps the state and throws SpecNoLongerValidError to be tried again later. Nor is a run
// not accepted yet (`awaitsAcceptance`: a warm pool's run read before the write that accepts it):
// its job throws AwaitingAcceptanceError and is tried again once that write has landed.
// A job about to call the model or run a tool also asks whether a cancel was requested
// (runToActOn): the controller ends a cancelled run only once its diff is taken, up to 30 s
// later, and until then the run reads as live. Such a job throws CancelRequestedError, so that
// BullMQ tries it again later (errors/cancel-requested-error.ts says why not return).
import { setTimeout as delay } from 'node:timers/promises';
import { isTerminal, type CodingRun, type ParsedCodingRun } from '../api/index.ts';
import { readCancelRequest } from '../reconcile/cancel-request.ts';
import { awaitsAcceptance } from '../reconcile/run-template.ts';
import { parseSpec } from '../reconcile/validate-run.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { AwaitingAcceptanceError } from './errors/awaiting-acceptance-error.ts';
import { CancelRequestedError } from './errors/cancel-requested-error.ts';
import type { JobPutOffError } from './errors/job-put-off-error.ts';
import { SpecNoLongerValidError } from './errors/spec-no-longer-valid-error.ts';

/**
 * How long a job reads its run again for a controller's write it knows is on its way (the
 * write that accepts the run, or names its pod): one request behind the job's start.
 */
const READ_AGAIN_WAIT_MS = 5_000;
/**
 * Reads every READ_AGAIN_FIRST_WAIT_MS for the first READ_AGAIN_STEADY_MS, where a write on its
 * way lands (a warm sandbox's start waits on it, so a write at 180 ms must not be seen at 375),
 * then waits twice as long after each read, up to READ_AGAIN_LONGEST_WAIT_MS: a write later than
 * that (the controller's failed, to be made again at its next look) costs about 40 GETs over
 * the 5 s, not 190 (issue #17), on every try of a job put off for it.
 */
const READ_AGAIN_FIRST_WAIT_MS = 25;
const READ_AGAIN_STEADY_MS = 500;
const READ_AGAIN_LONGEST_WAIT_MS = 250;

/** `first`, or what `read` gives next, every 25 ms for half a second, then after 50, 100, 200 and every 250 ms, for up to 5 s, while `stale` holds for it. */
export async function readAgainWhile<T>(first: T, read: (last: T) => Promise<T>, stale: (value: T) => boolean): Promise<T> {
  const started = Date.now();
  const deadline = started + READ_AGAIN_WAIT_MS;
  let value = first;
  let wait = READ_AGAIN_FIRST_WAIT_MS;
  while (stale(value) && Date.now() < deadline) {
    await delay(Math.min(wait, Math.max(0, deadline - Date.now())));
    if (Date.now() - started >= READ_AGAIN_STEADY_MS) wait = Math.min(wait * 2, READ_AGAIN_LONGEST_WAIT_MS);
    value = await read(value);
  }
  return value;
}

/** Whether a copy of the run says there is no run to act for: another run under the name, being deleted, or finished. */
function endedFor(run: CodingRun, ref: RunRef): boolean {
  return run.metadata.uid !== ref.uid || Boolean(run.metadata.deletionTimestamp) || isTerminal(run.status?.phase);
}

/**
 * What a job finds of its run now: the run, its spec parsed; `ended`: gone, replaced, being
 * deleted or finished, so what the agent holds of it may go; `specInvalid`: the same run,
 * live, whose spec no longer parses by this operator's rules (the refusal's message; an upgrade
 * refused a field an older operator accepted); or `awaitsAcceptance`: the same run, live, read
 * before the controller's write that accepts it (a warm pool's run names a template it holds no
 * copy of yet), so its spec is not known yet. Neither of the last two is `ended`. The controller
 * ends a started run whose spec no longer parses Failed InvalidSpec keeping its diff (decide.ts;
 * run-reconciler.ts keepDiff), taken against the commit the run's state names, so the state
 * must outlive the job; a run not accepted yet is about to be. A job that finds either does
 * nothing more, keeps the state and is put off (throwIfPutOff). Judged by the controller's own
 * parseSpec, so both refuse the same runs.
 */
export type RunNow = { run: ParsedCodingRun } | { ended: true } | { specInvalid: string } | { awaitsAcceptance: true };

/** What one copy of the run says (runNow's judgement, without its reads again). Pure. */
export function runNowOf(copy: CodingRun | undefined, ref: RunRef): RunNow {
  if (!copy || endedFor(copy, ref)) return { ended: true };
  // Told apart from a spec refused: parseSpec finds no template here (TemplateNotFound), which
  // the controller, about to record it, does not end the run for.
  if (awaitsAcceptance(copy)) return { awaitsAcceptance: true };
  // spec.templateRef: the template recorded when the run was accepted, with the run's own fields over it.
  const parsed = parseSpec(copy);
  return parsed.ok ? { run: { ...copy, spec: parsed.spec } } : { specInvalid: parsed.refusal.message };
}

export async function runNow(deps: Pick<AgentDependencies, 'getRun' | 'getRunFresh'>, ref: RunRef): Promise<RunNow> {
  // A copy from before the write that accepted the run (awaitsAcceptance) is read again, fresh:
  // what this process remembers of the run (kube/recent-runs.ts) may be that very copy.
  const run = await readAgainWhile(
    await deps.getRun(ref.namespace, ref.name),
    () => (deps.getRunFresh ?? deps.getRun)(ref.namespace, ref.name),
    (copy) => copy !== undefined && !endedFor(copy, ref) && awaitsAcceptance(copy),
  );
  return runNowOf(run, ref);
}

/**
 * The run as it is now, if it still exists, is the same run, is not finished and its spec
 * parses. For a look that needs no more than that (a wait for the pod's name, publishing's
 * "still wanted"); a job that would let the run go when it finds none asks runNow, which tells
 * a spec that no longer parses apart.
 */
export async function liveRun(deps: Pick<AgentDependencies, 'getRun' | 'getRunFresh'>, ref: RunRef): Promise<ParsedCodingRun | undefined> {
  const found = await runNow(deps, ref);
  return 'run' in found ? found.run : undefined;
}

/**
 * What a job about to act for the run (a model call, a tool call) finds: what runNow finds, or
 * a run with a cancel requested (`cancelled`: it does nothing more, keeps its state, whose
 * commit the controller's ending takes the diff against, and throws CancelRequestedError to be
 * tried again; the ending then stops the agent, which removes the job). A spec that no longer
 * parses is told first, as decide.ts ends such a run InvalidSpec even with a cancel requested.
 */
export type RunToActOn = RunNow | { cancelled: true };

export async function runToActOn(deps: Pick<AgentDependencies, 'getRun' | 'getRunFresh'>, ref: RunRef): Promise<RunToActOn> {
  return toActOn(await runNow(deps, ref));
}

/** What one copy of the run says to a job about to act for it (runToActOn's judgement, without its reads). Pure. */
export function runToActOnOf(copy: CodingRun | undefined, ref: RunRef): RunToActOn {
  return toActOn(runNowOf(copy, ref));
}

function toActOn(found: RunNow): RunToActOn {
  if (!('run' in found)) return found;
  return readCancelRequest(found.run) ? { cancelled: true } : found;
}

/**
 * The JobPutOffError for what a job found, when that puts it off (a cancel requested, a spec
 * that no longer parses, a run not accepted yet), saying what the job did not do (`held`);
 * undefined for a run to act for or an ended one, which the job lets go. One place, so that no
 * job misses a kind.
 */
export function putOffError(found: RunToActOn, held: string): JobPutOffError | undefined {
  if ('cancelled' in found) return new CancelRequestedError(held);
  if ('specInvalid' in found) return new SpecNoLongerValidError(held, found.specInvalid);
  if ('awaitsAcceptance' in found) return new AwaitingAcceptanceError(held);
  return undefined;
}

/** Throws putOffError's error: the assertion leaves its caller only `run` and `ended` to handle. */
export function throwIfPutOff(found: RunToActOn, held: string): asserts found is { run: ParsedCodingRun } | { ended: true } {
  const error = putOffError(found, held);
  if (error) throw error;
}

/**
 * A copy of the run that this process holds without asking the API server (kube/recent-runs.ts
 * readHeld: the leader's cache, or the run as a write returned it a moment ago), or undefined.
 * For a check that is skipped rather than cost a request (issue #17).
 */
export type HeldRunReader = (namespace: string, name: string) => CodingRun | undefined;

/**
 * What a held copy of the run tells a job about to run the model's calls: runToActOn's finding
 * (runToActOnOf: the spec is parsed here too, with no request), or `undefined` with no copy
 * (nothing is known, the look is skipped). A copy of a run finished, being deleted, or of another
 * uid (the job's run was deleted and its name reused) is `ended`. An ended run is not "not
 * cancelled": the controller that ended it Cancelled has stopped the agent (its state deleted)
 * and could not remove a job that was running, so that job must let the run go, never run its
 * calls.
 */
export function heldRunToActOn(copy: CodingRun | undefined, ref: RunRef): RunToActOn | undefined {
  return copy ? runToActOnOf(copy, ref) : undefined;
}
