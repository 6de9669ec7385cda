// status.result.verification: what the operator's run of spec.verify.command found. Written
// once per verification; with retries, the last one (attempts says how many ran).
import { z } from 'zod';

/** The tail of the command's output kept in status (the transcript keeps the same tail per attempt). */
export const VERIFICATION_OUTPUT_TAIL_MAX = 4096;

export const verificationStatus = z
  .object({
    passed: z.boolean().describe('True when the command exited 0 within its timeout.'),
    exitCode: z
      .number()
      .int()
      .optional()
      .describe('Exit status of the command. Absent when it did not exit on its own (timed out, or killed by a signal).'),
    timedOut: z.boolean().optional().describe('True when the command was killed at spec.verify.timeout.'),
    outputTail: z
      .string()
      .max(VERIFICATION_OUTPUT_TAIL_MAX)
      .describe("The last 4 KiB of the command's output (stdout, then stderr), for reading why it failed."),
    durationMs: z.number().int().min(0).describe('How long the command ran, in milliseconds.'),
    attempts: z
      .number()
      .int()
      .min(1)
      .describe('Verifications run: 1, plus one for each time a failure was handed back to the model (spec.verify.retries).'),
  })
  .describe('The result of spec.verify: the last verification the operator ran.');

export type Verification = z.output<typeof verificationStatus>;
