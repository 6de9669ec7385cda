// The model answered, and the ai SDK then failed on the answer (one built to break it, past
// the bounds the operator checks first: providers/answer-bounds.ts). Treated as a transport
// error, the step's ten tries asked the model ten times for the same failure, spending its
// tokens each time, and ended AgentFailed quoting a stack overflow. The run fails
// ModelResponseInvalid at once instead. Only a RangeError's message is shown, the engine's own
// words ("Maximum call stack size exceeded"); any other error's may quote the answer, and an
// answer is never quoted in status (Security #11.3).
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelAnswerUnusableError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelAnswerUnusableError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly provider: string;

  constructor(options: { provider: string; step: number; cause: unknown }) {
    super(
      REASONS.ModelResponseInvalid,
      `The ${options.provider} model answered at step ${options.step}, but its answer could not be worked on (${describe(options.cause)}); ` +
        'the run stopped rather than ask again, and the tokens of the answer are counted. ' +
        'A model may answer so when something it read told it to: look at what the run read before this step.',
      { cause: options.cause },
    );
    this.provider = options.provider;
  }

  static override isInstance(error: unknown): error is ModelAnswerUnusableError {
    return RunFailure.hasMarker(error, symbol);
  }
}

function describe(error: unknown): string {
  if (error instanceof RangeError) return `RangeError: ${error.message.replace(/\s+/g, ' ').slice(0, 200)}`;
  return error instanceof Error ? error.name : typeof error;
}
