// What a stored transcript entry must look like to be read: the shape of TranscriptEntry
// (transcript-entry.ts), checked field by field. A chunk is a ConfigMap anyone who may write
// ConfigMaps in the namespace can change, and every reader walks the fields its kind implies:
// an approval entry without its approval once made `logs` throw and print nothing after it,
// and an entry with `calls: {}` made an eval's grading throw before it wrote any status.
// Fields the reader does not know are dropped. Pure.
import { z } from 'zod';
import type { TranscriptEntry } from './transcript-entry.ts';

const text = z.object({ text: z.string(), cutFrom: z.number().optional() });
const count = z.number().int().nonnegative();

// The figures `logs` prints are required; the others were added over time and are not.
const usage = z.object({
  inputTokens: count,
  outputTokens: count,
  cacheReadTokens: count.optional(),
  reasoningTokens: count.optional(),
  totalTokens: count,
  complete: z.boolean().optional(),
});

const call = z.object({
  id: z.string(),
  tool: z.string(),
  input: text,
  result: z.object({ ok: z.boolean(), output: text }).optional(),
  waiting: z.object({ approvalId: z.string(), inputBytes: count, inputSha256: z.string(), requestedAt: z.string() }).optional(),
});

const approval = z.object({
  id: z.string(),
  tool: z.string(),
  decision: z.enum(['approve', 'deny']),
  reason: z.string().optional(),
  sha256: z.string().optional(),
  requestedAt: z.string(),
  answeredAt: z.string(),
  user: z.string().optional(),
  timedOut: z.boolean().optional(),
});

const verification = z.object({
  attempt: count,
  passed: z.boolean(),
  exitCode: z.number().int().optional(),
  timedOut: z.boolean().optional(),
  durationMs: z.number().nonnegative(),
  output: text,
  verdict: z.enum(['passed', 'retry', 'failed', 'recorded']),
});

const common = {
  key: z.string(),
  step: count,
  at: z.string(),
  startedAt: z.string().optional(),
  durationMs: z.number().nonnegative().optional(),
  text: text.optional(),
  calls: z.array(call).optional(),
  unusableCalls: count.optional(),
  usage: usage.optional(),
  compaction: z.object({ summary: text, summarisedMessages: count, usage }).optional(),
  message: z.string().optional(),
};

/** Each kind with the fields a reader of that kind relies on made required. */
export const transcriptEntrySchema = z.discriminatedUnion('kind', [
  z.object({ ...common, kind: z.literal('step') }),
  z.object({ ...common, kind: z.literal('approval'), approval }),
  z.object({ ...common, kind: z.literal('verify'), verification }),
  z.object({ ...common, kind: z.literal('end'), outcome: z.object({ phase: z.string(), reason: z.string(), message: z.string() }) }),
  z.object({ ...common, kind: z.literal('cut') }),
]);

/** The entry, or the first field that is not as written by the operator. */
export function parseTranscriptEntry(value: unknown): { entry: TranscriptEntry } | { problem: string } {
  const parsed = transcriptEntrySchema.safeParse(value);
  if (parsed.success) return { entry: parsed.data as TranscriptEntry };
  const issue = parsed.error.issues[0]!;
  return { problem: `${issue.path.join('.') || 'the entry'}: ${issue.message}` };
}
