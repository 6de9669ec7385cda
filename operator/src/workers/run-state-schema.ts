// Security #11.1: the shape of a run's state as it is read back from Redis. The seal
// (run-state-seal.ts) says the operator wrote it; this says it is a state the jobs can
// act on, so a bug or an old format is refused with a message instead of half-acted on.
// Objects are loose (unknown keys kept): a field added to RunState must still be added here
// to be checked, but is never silently dropped. The transcript is checked for its shape
// only; the ai SDK's full message schema costs ~150 ms per load of a long transcript.
import { z } from 'zod';
import { TIMING_PHASES, TOOL_NAMES } from '../api/index.ts';
import { COMMIT_ID } from '../api/commit-id.ts';

const count = z.number().int().min(0);
const identifier = z.string().min(1).max(512);

const pendingToolCall = z.looseObject({
  toolCallId: identifier,
  toolName: z.enum(TOOL_NAMES),
  input: z.unknown(),
});

/** A human's answer to a tool call's approval (record/transcript-entry.ts's TranscriptApproval). */
const answeredApproval = z.looseObject({ id: identifier, tool: z.string(), decision: z.enum(['approve', 'deny']) });

const toolResultRecord = z.looseObject({
  toolCallId: identifier,
  toolName: z.string().min(1).max(256),
  ok: z.boolean(),
  text: z.string(),
  // Base64 of at most IMAGE_RESULT_LIMIT_BYTES (agent/image-result.ts), with slack for the encoding.
  image: z.object({ mediaType: z.string().regex(/^image\//), data: z.string().max(1_500_000) }).optional(),
});

const modelMessage = z.looseObject({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string().min(1) }))]),
});

const tokenUsage = z.looseObject({
  inputTokens: count,
  outputTokens: count,
  cacheReadTokens: count,
  reasoningTokens: count,
  totalTokens: count,
  complete: z.boolean(),
});

/** Phases timed by the workers (RunState.timings), and the whole of status.timings a trailing record carries. */
const runTimings = z
  .array(z.looseObject({ phase: z.enum(TIMING_PHASES), start: z.iso.datetime(), durationMs: count }))
  .max(TIMING_PHASES.length);

/**
 * How many earlier steps' entries a trailing record may carry (trailing-record.ts): a record
 * holds its own entry and at most these, so the state stays bounded when the API server is
 * slower than the steps.
 */
export const MAX_EARLIER_ENTRIES = 3;

/** A trailing record's transcript entry: what the record's writes need of it (the rest is the entry's own). */
const transcriptEntry = z.looseObject({ key: z.string().min(1).max(253), kind: z.string(), step: count });

export const runStateSchema = z.looseObject({
  version: z.literal(2),
  uid: identifier,
  namespace: identifier,
  name: identifier,
  stage: z.enum(['preparing', 'stepping', 'waiting', 'finalizing', 'publishing', 'done']),
  step: count,
  toolCalls: count,
  messages: z.array(modelMessage),
  usage: tokenUsage,
  filesTouched: z.looseObject({ read: z.array(z.string()), changed: z.array(z.string()) }),
  startedAt: z.number().finite(),
  revision: z.string().regex(COMMIT_ID).optional(),
  // A full ref name spec.repository.revision (a ref name of at most 255 characters) stands for.
  revisionRef: z
    .string()
    .regex(/^refs\//)
    .max(1024)
    .optional(),
  pendingApproval: z
    .looseObject({
      id: identifier,
      toolCallId: identifier,
      // A tool's, or publish (spec.approval.publish).
      toolName: z.union([z.enum(TOOL_NAMES), z.literal('publish')]),
      input: z.unknown(),
      requestedAt: z.string(),
      results: z.array(toolResultRecord),
      remaining: z.array(pendingToolCall),
    })
    .optional(),
  inFlight: z
    .looseObject({
      calls: z.array(pendingToolCall),
      results: z.array(toolResultRecord),
      earlier: z.array(toolResultRecord),
      hadToolCalls: z.boolean(),
      cutOff: z.enum(['length', 'content-filter']).optional(),
      toolNames: z.array(z.string()),
      text: z.string(),
      resumed: z.boolean(),
      record: z
        .looseObject({
          startedAt: z.string(),
          usage: tokenUsage.optional(),
          compaction: z.looseObject({ summary: z.string(), summarisedMessages: count, usage: tokenUsage }).optional(),
          unusableCalls: count.optional(),
          answered: pendingToolCall.optional(),
          approval: answeredApproval.optional(),
        })
        .optional(),
    })
    .optional(),
  finalText: z.string().optional(),
  stop: z.looseObject({ reason: z.string().regex(/^[A-Z][A-Za-z]{1,62}$/), message: z.string() }).optional(),
  unusableToolCallSteps: count.optional(),
  discardedModelCalls: count.optional(),
  lastUnusableToolCall: z.string().optional(),
  diffSnapshot: z.looseObject({ sha256: z.string().regex(/^[0-9a-f]{64}$/), configMap: identifier }).optional(),
  pendingDiffSha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
  approvalWaitMs: count.optional(),
  answeredBeforeWait: answeredApproval.optional(),
  recordedApprovals: count.optional(),
  publish: z
    .looseObject({
      diffSha256: z.string().regex(/^[0-9a-f]{64}$/),
      bodySha256: z
        .string()
        .regex(/^[0-9a-f]{64}$/)
        .optional(),
    })
    .optional(),
  verification: z
    .looseObject({
      passed: z.boolean(),
      exitCode: z.number().int().optional(),
      timedOut: z.boolean().optional(),
      outputTail: z.string(),
      durationMs: count,
      attempts: z.number().int().min(1),
      step: count,
    })
    .optional(),
  verificationNote: z.string().optional(),
  timings: runTimings.optional(),
  trailing: z
    .looseObject({
      step: count,
      progress: z.looseObject({ steps: count, toolCalls: count, usage: tokenUsage, timings: runTimings.optional() }),
      entry: transcriptEntry.optional(),
      earlier: z.array(transcriptEntry).max(MAX_EARLIER_ENTRIES).optional(),
    })
    .optional(),
});

/** The first problem with a decoded state, as `path: message`, or undefined when it fits. */
export function runStateProblem(value: unknown): string | undefined {
  const result = runStateSchema.safeParse(value);
  if (result.success) return undefined;
  const issue = result.error.issues[0]!;
  return `${issue.path.join('.') || '(root)'}: ${issue.message}`;
}
