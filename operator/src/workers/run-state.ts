// A run's working memory between jobs, in Redis under one key per run: the conversation,
// the step counter, usage, the files touched and a pending approval. Written before the
// next job is enqueued, so a job that finds the state ahead of it knows its work was done.
// Never holds a secret: keys are read from the cluster for each model call.
import type { ModelMessage } from 'ai';
import type { Redis } from 'ioredis';
import type { CodingRunSpec } from '../api/index.ts';
import type { FilesTouched } from '../agent/files-touched.ts';
import type { StopReason } from '../agent/stop-conditions.ts';
import type { TokenUsage } from '../agent/usage-accounting.ts';

export type RunStage = 'preparing' | 'stepping' | 'waiting' | 'finalizing' | 'done';

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
 * The step under way, saved before its first tool call runs and after each one finishes:
 * the model's answer is already in `messages` (its usage counted, the step numbered). A
 * step redone after a crash runs only the calls not finished; it never asks the model
 * again (it may answer differently) and never repeats a finished call (an edit applied
 * twice changes the file twice).
 */
export interface InFlightStep {
  calls: PendingToolCall[];
  results: ToolResultRecord[];
  /** Results that come before `calls` in the tool message (a resumed approval's). */
  earlier: ToolResultRecord[];
  /** For the end of the step: what the model asked for, and its text. */
  hadToolCalls: boolean;
  toolNames: string[];
  text: string;
  /** Begun by a resume, whose status write must clear WaitingForApproval. */
  resumed: boolean;
}

export interface ToolResultRecord {
  toolCallId: string;
  toolName: string;
  ok: boolean;
  /** What the model sees, bounded to 64 KiB. */
  text: string;
}

export interface RunState {
  version: 1;
  uid: string;
  namespace: string;
  name: string;
  stage: RunStage;
  /** Steps (model calls) completed. */
  step: number;
  toolCalls: number;
  messages: ModelMessage[];
  usage: TokenUsage;
  filesTouched: FilesTouched;
  /** spec.model, which cannot change: lets a step build its model while it reads the run. No secret. */
  model: CodingRunSpec['model'];
  /** Epoch ms of the run's start (status.startTime), for the deadline. */
  startedAt: number;
  pendingApproval?: PendingApprovalState;
  inFlight?: InFlightStep;
  /** The answer of the last step without tool calls. */
  finalText?: string;
  /** Why the run stops, when it stops early. */
  stop?: { reason: StopReason; message: string };
  /** Steps in a row whose tool calls were all unusable, and what was wrong with the last one (stop-conditions.ts). */
  unusableToolCallSteps?: number;
  lastUnusableToolCall?: string;
}

/** Decodes a state read with RunStateStore.loadText. */
export function parseRunState(text: string): RunState {
  return JSON.parse(text) as RunState;
}

export class RunStateStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private key(uid: string): string {
    return `${this.prefix}:run:${uid}`;
  }

  async load(uid: string): Promise<RunState | undefined> {
    const text = await this.loadText(uid);
    return text === undefined ? undefined : parseRunState(text);
  }

  /**
   * The state as stored, not decoded: the controller reads it twice to see whether a run
   * moved, and comparing the texts spares it decoding and re-encoding the transcript.
   */
  async loadText(uid: string): Promise<string | undefined> {
    return (await this.redis.get(this.key(uid))) ?? undefined;
  }

  async save(state: RunState): Promise<void> {
    await this.redis.set(this.key(state.uid), JSON.stringify(state));
  }

  /** Creates the state only if there is none (a redone prepare must not reset a run). */
  async create(state: RunState): Promise<boolean> {
    return (await this.redis.set(this.key(state.uid), JSON.stringify(state), 'NX')) === 'OK';
  }

  async delete(uid: string): Promise<void> {
    await this.redis.del(this.key(uid));
  }
}
