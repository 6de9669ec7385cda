// How a pods/exec stream reports the end of the command: one Status object on channel 3.
// `Success` means exit 0; a non-zero exit is `Failure` with reason `NonZeroExitCode` and the
// code as the message of a cause with reason `ExitCode`; anything else (the command could not
// start, was killed by a signal, the container is gone) is a `Failure` with only a message.
import type { V1Status } from '@kubernetes/client-node';

export interface ExecOutcome {
  /** The command's exit code, or null when the status names none. */
  code: number | null;
  /** For an outcome without an exit code: the status message, to explain it. */
  failure: string | null;
}

export function execOutcome(status: V1Status): ExecOutcome {
  if (status.status === 'Success') return { code: 0, failure: null };
  const exitCause = status.details?.causes?.find((cause) => cause.reason === 'ExitCode');
  const code = exitCause?.message === undefined ? Number.NaN : Number(exitCause.message);
  if (Number.isSafeInteger(code)) return { code, failure: null };
  return { code: null, failure: `${status.reason ?? 'Failure'}: ${status.message ?? 'the exec failed without a message'}` };
}
