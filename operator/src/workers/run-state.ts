// A run's working memory between jobs, in Redis under one key per run: the conversation,
// the step counter, usage, the files touched and a pending approval. Written before the
// next job is enqueued, so a job that finds the state ahead of it knows its work was done.
// Never holds a secret: keys are read from the cluster for each model call. Its size is
// bounded per run and, with the other states of the run's namespace, per namespace: Redis is
// shared by every namespace's runs and the queue, and refuses every write once full.
//
// Security #11.1: Redis is not trusted (it is reachable by more than the operator on many
// clusters). The state is sealed with an HMAC on save and verified, schema-checked and
// matched to the job's run on load; what to call with which secret is never in it (the
// model comes from the live run's spec).
import type { ModelMessage } from 'ai';
import { Cluster } from 'ioredis';
import type { FilesTouched } from '../agent/files-touched.ts';
import type { StopReason } from '../agent/stop-conditions.ts';
import type { TokenUsage } from '../agent/usage-accounting.ts';
import { FAILURE_MESSAGES } from '../api/failure-messages.ts';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import type { Verification } from '../api/verification-status.ts';
import type { RunTiming } from '../api/coding-run-status.ts';
import type { TranscriptApproval } from '../record/transcript-entry.ts';
import { DEFAULT_NAMESPACE_MAX_STATE_BYTES } from '../config/operator-config.ts';
import { describeRunRef, isSameRun, runRefFrom, type RunRef } from './run-ref.ts';
import { runStateProblem } from './run-state-schema.ts';
import type { RunStateSeal } from './run-state-seal.ts';
import type { RedisClient } from './redis-connection.ts';
import type { TrailingRecord } from './trailing-record.ts';
import { landedMarkKey } from './trailing-marks.ts';
import { RunStateGoneError } from './errors/run-state-gone-error.ts';

/**
 * Security #11.1: the state in Redis is not what the operator wrote (its seal does not verify,
 * it does not fit the schema, or it names another run). A job that meets it acts on nothing in
 * it: the run fails StateLost.
 */
function stateInvalid(detail: string): RunFailure {
  return new RunFailure(REASONS.StateLost, FAILURE_MESSAGES.stateInvalid(detail));
}

export function isStateInvalid(error: unknown): error is RunFailure {
  return RunFailure.isInstance(error) && error.reason === REASONS.StateLost;
}

/**
 * How claiming an approval's answer went (RunStateStore.claimAnswer): 'first', this decision
 * took it now; 'again', it held it already (a retried job: an earlier try, which claimed it,
 * may have run the approved call); false, another decision holds it.
 */
export type AnswerClaim = 'first' | 'again' | false;

export type RunStage = 'preparing' | 'stepping' | 'waiting' | 'finalizing' | 'publishing' | 'done';

export interface PendingToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
}

export interface PendingApprovalState {
  id: string;
  toolCallId: string;
  toolName: string;
  input: unknown;
  requestedAt: string;
  /** Results of the step's calls already run, and the calls after the gated one. */
  results: ToolResultRecord[];
  remaining: PendingToolCall[];
}

/**
 * The step under way, saved before its first tool call runs and after each call that may
 * change something finishes (a read's result goes with the next save, run-tool-calls.ts):
 * the model's answer is already in `messages` (its usage counted, the step numbered). A
 * step redone after a crash runs only the calls not saved; it never asks the model again
 * (it may answer differently) and never repeats a finished call that changes something (an
 * edit applied twice changes the file twice).
 */
export interface InFlightStep {
  calls: PendingToolCall[];
  results: ToolResultRecord[];
  /** Results that come before `calls` in the tool message (a resumed approval's). */
  earlier: ToolResultRecord[];
  /** For the end of the step: what the model asked for, and its text. */
  hadToolCalls: boolean;
  /** The provider ended the answer early (stop-conditions.ts answerCutOff); absent when the model finished it. */
  cutOff?: 'length' | 'content-filter';
  toolNames: string[];
  text: string;
  /** Begun by a resume, whose status write must clear WaitingForApproval. */
  resumed: boolean;
  /** What the transcript keeps of this step beyond the calls (record-step.ts). */
  record?: InFlightRecord;
}

/** For the step's transcript entry: when it began, what the model call cost, and for a resume, the answer. */
export interface InFlightRecord {
  startedAt: string;
  usage?: TokenUsage;
  compaction?: { summary: string; summarisedMessages: number; usage: TokenUsage };
  unusableCalls?: number;
  /** A resume: the answered call and the human's answer. */
  answered?: PendingToolCall;
  approval?: TranscriptApproval;
}

export interface ToolResultRecord {
  toolCallId: string;
  toolName: string;
  ok: boolean;
  /** What the model sees, bounded to 64 KiB. */
  text: string;
  /** An image read_file shows the model (agent/image-result.ts bounds it); `text` describes it. */
  image?: { mediaType: string; data: string };
}

/** A run's state: whose it is (checked on every load), then where the agent is. */
export interface RunState extends RunRef {
  /** 2: sealed, and without `model` (which now always comes from the live run). */
  version: 2;
  stage: RunStage;
  /** Steps (model calls) completed. */
  step: number;
  /**
   * Model calls whose step failed before it was saved and was asked again (spent-on-unsaved-step.ts):
   * not steps, but spec.budget.maxSteps counts them with them. Absent before the first.
   */
  discardedModelCalls?: number;
  toolCalls: number;
  messages: ModelMessage[];
  usage: TokenUsage;
  filesTouched: FilesTouched;
  /** Epoch ms of the run's start (status.startTime), for the deadline. */
  startedAt: number;
  /** The commit the prepare job cloned (full SHA), written to status.result.revision at the end (so a follow-up run clones it). */
  revision?: string;
  /**
   * The ref spec.repository.revision named on the remote when the prepare job cloned it
   * (`refs/heads/release`, `refs/tags/v1`: git takes a tag before a branch). Publishing takes
   * the pull request's base from the ref the revision names then, and fails PublishFailed when
   * that is another ref (a tag of a release branch's name pushed meanwhile would send the pull
   * request into the default branch). Absent for no revision, a commit id, a continuation, and a
   * state saved by an operator from before it: publishing then goes by the ref named at publish.
   */
  revisionRef?: string;
  pendingApproval?: PendingApprovalState;
  inFlight?: InFlightStep;
  /** The answer of the last step without tool calls. */
  finalText?: string;
  /** Why the run stops, when it stops early. */
  stop?: { reason: StopReason | typeof REASONS.VerificationFailed; message: string };
  /** Steps in a row whose tool calls were all unusable, and what was wrong with the last one (stop-conditions.ts). */
  unusableToolCallSteps?: number;
  lastUnusableToolCall?: string;
  /** The diff last stored as the run's snapshot (diff-snapshot.ts): its sha256 (an unchanged diff is not written again) and ConfigMap. */
  diffSnapshot?: { sha256: string; configMap: string };
  /**
   * The sha256 of a diff snapshot being stored (diff-snapshot.ts), saved before its write: an
   * ending that finds that diff in the ConfigMap knows it for the run's own (keep-diff.ts) when
   * the worker died before diffSnapshot recorded it. Beside diffSnapshot, not in it, so that a
   * replica of the release before still reads the state of a run whose first snapshot is pending.
   */
  pendingDiffSha256?: string;
  /** Milliseconds spent waiting for approvals, summed (status.approvalWaitSeconds); startedAt has moved on by as much. */
  approvalWaitMs?: number;
  /**
   * The answer resumed into a step that then waited for another approval: the write showing
   * that wait also records this answer in status.approvals, so a redo of that write (hand-on.ts)
   * needs it too.
   */
  answeredBeforeWait?: TranscriptApproval;
  /** Answers to approvals the transcript holds, and its `cut` past MAX_RECORDED_APPROVALS (record-step.ts); absent before the first. */
  recordedApprovals?: number;
  /**
   * spec.publish (publish-job.ts): the sha256 of the diff to publish, taken at finalize; only that
   * diff is pushed. bodySha256: that of the pull request body planned then (what an approver
   * approved); a body planned otherwise at publish is not posted. Absent in a state saved before it.
   */
  publish?: { diffSha256: string; bodySha256?: string };
  /** The last spec.verify run (verify-work.ts) and the step after which it ran (a redone finalize does not run it again). */
  verification?: Verification & { step: number };
  /** What the last verification means for a run that succeeds (status.message adds it). */
  verificationNote?: string;
  /**
   * Phases the workers timed (Clone, Import, Setup, FirstModelCall, FirstToolCall): kept here
   * until a status write the run makes anyway carries them to status.timings.
   */
  timings?: RunTiming[];
  /** A handed-on step's record, still being written (trailing-record.ts): the next job settles it. */
  trailing?: TrailingRecord;
}

/** The run a state must belong to: the job's, which the job checked against the live run's uid. */
export type RunStateOwner = RunRef;

/** How long the claim on an approval's answer is kept: longer than any approval may wait. */
const ANSWER_CLAIM_TTL_SECONDS = 8 * 24 * 3600;

/**
 * The most a run's saved state may take, in bytes as Redis keeps it (the sealed UTF-8 text: a
 * bound in characters let CJK text, 3 bytes each, take three times what it said). The
 * conversation is in it, and every save stringifies and seals all of it in the operator's heap
 * (160 MiB in the chart) and keeps it in Redis: a run that passes this fails BudgetExceeded
 * rather than end the replica, which a 29 MB state did. A conversation within
 * maxContextWindow (1M tokens by default, about 4M characters as the estimate counts them, a
 * few times that once escaped) stays well under it.
 */
export const MAX_SAVED_STATE_BYTES = 24 * 1024 * 1024;

export interface RunStateLimits {
  /** The most one run's sealed state may take, in bytes. */
  maxStateBytes: number;
  /** The most the sealed states of one namespace's runs may take together, in bytes (config namespaceMaxStateBytes). */
  namespaceMaxStateBytes: number;
}

/**
 * Writes a run's sealed state and its size in its namespace's tally (a hash, uid → bytes),
 * unless that would take the namespace's states past their budget. One script, so that the
 * check uses the value being written and saves of the namespace's runs on other replicas
 * cannot all pass it at once. The total is summed on each write (the tally has a field per
 * run with state: the namespace's active runs), so it cannot drift from the fields. A write
 * that does not grow the run's state is never refused: a namespace over a lowered budget
 * still has its runs end as they would.
 * KEYS: the state, the tally. ARGV: uid, the sealed state, the budget, "nx" to create only, "xx"
 * to overwrite only (a state deleted meanwhile, by the stop of a run that ended, stays deleted).
 * Returns {"saved"}, {"exists"} (create found a state), {"absent"} (overwrite found none), or
 * {"over", bytes the others hold}.
 */
const SAVE_SCRIPT = `
if ARGV[4] == 'nx' and redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
if ARGV[4] == 'xx' and redis.call('EXISTS', KEYS[1]) == 0 then return {'absent'} end
local size = string.len(ARGV[2])
local previous = tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 0
if size > previous then
  local others = -previous
  for _, bytes in ipairs(redis.call('HVALS', KEYS[2])) do others = others + tonumber(bytes) end
  if others + size > tonumber(ARGV[3]) then return {'over', others} end
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], size)
return {'saved'}
`;

/** Removes a run's state and its size from its namespace's tally, together. KEYS: the state, the tally. ARGV: uid. */
const DELETE_SCRIPT = `
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
`;

/**
 * Drops from a namespace's tally the runs whose state is gone without it: deleted by a replica
 * of the release before, which kept no tally, during a rolling upgrade, or by hand. Left, their
 * bytes would hold the namespace's budget for good. KEYS: the tally, then each run's state.
 * ARGV: those runs' uids. Returns how many were dropped.
 */
const PRUNE_SCRIPT = `
local dropped = 0
for index, uid in ipairs(ARGV) do
  if redis.call('EXISTS', KEYS[index + 1]) == 0 then dropped = dropped + redis.call('HDEL', KEYS[1], uid) end
end
return dropped
`;

export class RunStateStore {
  private readonly limits: RunStateLimits;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly seal: RunStateSeal,
    limits: Partial<RunStateLimits> = {},
  ) {
    this.limits = {
      maxStateBytes: limits.maxStateBytes ?? MAX_SAVED_STATE_BYTES,
      namespaceMaxStateBytes: limits.namespaceMaxStateBytes ?? DEFAULT_NAMESPACE_MAX_STATE_BYTES,
    };
  }

  /** The state sealed for Redis and its size, or a RunFailure when it is larger than a replica can carry. */
  private sealed(state: RunState): { value: string; bytes: number } {
    const value = this.seal.seal(JSON.stringify(state));
    const bytes = Buffer.byteLength(value);
    if (bytes > this.limits.maxStateBytes) {
      throw new RunFailure(REASONS.BudgetExceeded, FAILURE_MESSAGES.stateTooLarge(bytes, this.limits.maxStateBytes));
    }
    return { value, bytes };
  }

  private key(uid: string): string {
    return `${this.prefix}:run:${uid}`;
  }

  /** The namespace's tally of saved-state bytes, by run uid. */
  private tallyKey(namespace: string): string {
    return `${this.prefix}:state-bytes:${namespace}`;
  }

  /**
   * The run's state, verified: sealed by this operator, of the expected shape, and the
   * state of `owner` (not of another run copied under its key). Throws
   * a RunFailure (StateLost) otherwise; undefined when there is none.
   */
  async load(owner: RunStateOwner): Promise<RunState | undefined> {
    const text = await this.loadText(owner.uid);
    return text === undefined ? undefined : this.decode(text, owner);
  }

  /**
   * The state as stored, not decoded: the controller reads it twice to see whether a run
   * moved, and comparing the texts spares it decoding and re-encoding the transcript.
   */
  async loadText(uid: string): Promise<string | undefined> {
    return (await this.redis.get(this.key(uid))) ?? undefined;
  }

  /** Decodes a text read with loadText; throws a RunFailure (StateLost) as load does. */
  decode(text: string, owner: RunStateOwner): RunState {
    const state = this.opened(text);
    if (!isSameRun(state, owner)) throw stateInvalid(`it is the state of run ${describeRunRef(state)}, not of ${describeRunRef(owner)}`);
    return state;
  }

  /** A sealed state's content, checked against the schema, whoever's it is; throws a RunFailure (StateLost). */
  private opened(text: string): RunState {
    const opened = this.seal.open(text);
    if ('problem' in opened) throw stateInvalid(opened.problem);
    let value: unknown;
    try {
      value = JSON.parse(opened.json);
    } catch (error) {
      throw stateInvalid(`it is not JSON (${error instanceof Error ? error.message : String(error)})`);
    }
    const problem = runStateProblem(value);
    if (problem) throw stateInvalid(problem);
    return value as RunState;
  }

  /**
   * The uids of the runs that have a state, for the leader's sweep of states whose run is gone
   * (controller/orphaned-state-sweep.ts). By SCAN, `count` keys a call: KEYS would hold Redis
   * for as long as it walks every key it holds. In a Cluster SCAN walks one server only, so it
   * goes to every master (the prefix's hash tag puts the states in one slot, whose master may change).
   */
  async uids(count = 1000): Promise<string[]> {
    const start = `${this.prefix}:run:`;
    // The prefix as a glob: a [ or a ? in redisPrefix matches itself, not a set of characters.
    const match = `${start.replace(/[*?[\]\\]/g, '\\$&')}*`;
    const servers = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    const uids = new Set<string>();
    for (const server of servers) {
      let cursor = '0';
      do {
        const [next, keys] = await server.scan(cursor, 'MATCH', match, 'COUNT', count);
        cursor = next;
        // Only a state's key: one with a further `:` is another prefix's (redisPrefix `p:run` holds `p:run:run:<uid>`).
        for (const key of keys) if (key.length > start.length && !key.includes(':', start.length)) uids.add(key.slice(start.length));
      } while (cursor !== '0');
    }
    return [...uids];
  }

  /**
   * Whose the state under `uid` is, as the state says: `ref` only for a state sealed by this
   * operator, of the expected shape, kept under its own run's uid (for the sweep to know the
   * namespace whose tally holds it); `invalid` (why) otherwise; undefined when there is none.
   */
  async ownerOf(uid: string): Promise<{ ref: RunRef } | { invalid: string } | undefined> {
    const text = await this.loadText(uid);
    if (text === undefined) return undefined;
    try {
      const ref = runRefFrom(this.opened(text));
      if (ref.uid !== uid) return { invalid: `it is the state of run ${describeRunRef(ref)}, kept under uid ${uid}` };
      return { ref };
    } catch (error) {
      if (isStateInvalid(error)) return { invalid: error.message };
      throw error;
    }
  }

  /** decode, or undefined for a state that cannot be trusted (for looks that act on nothing). */
  peek(text: string | undefined, owner: RunStateOwner): RunState | undefined {
    return this.inspect(text, owner).state;
  }

  /** decode, or why the state cannot be trusted (the message a run fails with). */
  inspect(text: string | undefined, owner: RunStateOwner): { state?: RunState; invalid?: string } {
    if (text === undefined) return {};
    try {
      return { state: this.decode(text, owner) };
    } catch (error) {
      if (isStateInvalid(error)) return { invalid: error.message };
      throw error;
    }
  }

  /**
   * Writes the state; a RunFailure (BudgetExceeded) when it is too large, alone or with its
   * namespace's others. `ifPresent`: only over a state still there, in the same script as the
   * write (no window between the look and the write), else a RunStateGoneError and nothing
   * written: the run's stop deleted it, and a plain save would bring it back for a run that ended.
   * An option of save, not a method of its own, so that whatever wraps save (lease-fenced-dependencies.ts) wraps it too.
   */
  async save(state: RunState, options: { ifPresent?: boolean } = {}): Promise<void> {
    const outcome = await this.write(state, options.ifPresent ? 'xx' : '');
    if (outcome === 'absent') throw new RunStateGoneError(state.uid);
  }

  /** Creates the state only if there is none (a redone prepare must not reset a run). */
  async create(state: RunState): Promise<boolean> {
    return (await this.write(state, 'nx')) === 'saved';
  }

  /** Whether the run has a state in Redis (one EXISTS): none once its stop deleted it. */
  async exists(uid: string): Promise<boolean> {
    return (await this.redis.exists(this.key(uid))) === 1;
  }

  /** SAVE_SCRIPT's write: `nx` only where there is no state, `xx` only where there is one. */
  private async write(state: RunState, only: '' | 'nx' | 'xx'): Promise<'saved' | 'exists' | 'absent'> {
    const { value, bytes } = this.sealed(state);
    const budget = this.limits.namespaceMaxStateBytes;
    const keys = [this.key(state.uid), this.tallyKey(state.namespace)];
    const attempt = async () => (await this.redis.eval(SAVE_SCRIPT, 2, ...keys, state.uid, value, budget, only)) as [string, number?];
    let reply = await attempt();
    // Refused: once more if the tally held runs whose state is gone (rare, so looked for only here).
    if (reply[0] === 'over' && (await this.pruneTally(state.namespace)) > 0) reply = await attempt();
    if (reply[0] === 'over') {
      throw new RunFailure(REASONS.BudgetExceeded, FAILURE_MESSAGES.namespaceStateBudget(state.namespace, Number(reply[1]), bytes, budget));
    }
    return reply[0] as 'saved' | 'exists' | 'absent';
  }

  /** Drops the namespace's tally entries whose state is gone (PRUNE_SCRIPT); resolves to how many. */
  private async pruneTally(namespace: string): Promise<number> {
    const tally = this.tallyKey(namespace);
    const uids = await this.redis.hkeys(tally);
    if (uids.length === 0) return 0;
    return Number(await this.redis.eval(PRUNE_SCRIPT, uids.length + 1, tally, ...uids.map((uid) => this.key(uid)), ...uids));
  }

  /**
   * Claims the answer to approval `id` for one decision: truthy when this decision holds it
   * ('first', or 'again' for the same one again: a job retried, whose earlier try may have run
   * the call). An approve whose call still ran when the approval timed out and the timeout's
   * deny each found the state waiting, and both acted: the call ran while the model was told
   * it was denied, and the later save overwrote the earlier. Kept past the longest
   * approval.timeout (168h).
   */
  async claimAnswer(uid: string, id: string, decision: string): Promise<AnswerClaim> {
    const key = `${this.prefix}:answer:${uid}:${id}`;
    if ((await this.redis.set(key, decision, 'EX', ANSWER_CLAIM_TTL_SECONDS, 'NX')) === 'OK') return 'first';
    return (await this.redis.get(key)) === decision ? 'again' : false;
  }

  /**
   * Removes the run's state (and its size from its namespace's tally, which frees that much of
   * the namespace's budget) and its trailing record's mark (two commands: in Redis Cluster they are in different slots).
   */
  async delete(ref: Pick<RunRef, 'uid' | 'namespace'>): Promise<void> {
    await Promise.all([
      this.redis.eval(DELETE_SCRIPT, 2, this.key(ref.uid), this.tallyKey(ref.namespace), ref.uid),
      this.redis.del(landedMarkKey(this.prefix, ref.uid)),
    ]);
  }
}
