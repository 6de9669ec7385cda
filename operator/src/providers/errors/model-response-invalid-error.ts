// The provider answered (HTTP 2xx), but with something that is not a model response: not
// JSON, JSON of another shape, an HTML page, an answer past the size bound, or tool calls the
// model keeps getting wrong. The endpoint is up, so this is neither an outage to wait out
// nor a request it refused: most often baseURL points at something that is not the API the
// provider declares, or the model cannot do tool calling. The run fails with
// ModelResponseInvalid at once; retrying the same request would get the same answer.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelResponseInvalidError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelResponseInvalidError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly provider: string;
  readonly statusCode: number;

  constructor(options: { provider: string; statusCode: number; detail: string; cause?: unknown }) {
    super(
      REASONS.ModelResponseInvalid,
      `The ${options.provider} provider answered HTTP ${options.statusCode} with a response that is not a valid model response: ${options.detail}. ` +
        "Check that spec.model.baseURL is the API root of an endpoint speaking this provider's protocol (such as https://llm.example/v1) and that spec.model.name exists there.",
      { cause: options.cause },
    );
    this.provider = options.provider;
    this.statusCode = options.statusCode;
  }

  static override isInstance(error: unknown): error is ModelResponseInvalidError {
    return RunFailure.hasMarker(error, symbol);
  }
}
