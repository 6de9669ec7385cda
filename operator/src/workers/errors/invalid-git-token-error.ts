// The key a run names as its git token (spec.repository.credentialsSecretRef or
// spec.publish.credentialsSecretRef) does not hold one (token-shape.ts): a keystore, a PEM key,
// a credentials file. Any key of a Secret offered to runs may be named; a value with a NUL made
// the spawn of git throw with the value in its message, which became the run's status. The
// message names the Secret, the key and the field, never the value. InvalidSpec: retrying
// cannot help, the run author names another key (or the Secret's owner fixes the value).
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';
import { TOKEN_SHAPE } from '../token-shape.ts';

const name = 'InvalidGitTokenError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class InvalidGitTokenError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  /** The field that names the Secret, e.g. spec.publish.credentialsSecretRef. */
  readonly field: string;

  constructor(options: { namespace: string; secret: string; key: string; field: string }) {
    super(
      REASONS.InvalidSpec,
      `Secret ${options.namespace}/${options.secret} key "${options.key}" named in ${options.field} does not hold a git token: ` +
        `it must be ${TOKEN_SHAPE}; put only the token in that key, or name a key that holds one`,
    );
    this.field = options.field;
  }

  static override isInstance(error: unknown): error is InvalidGitTokenError {
    return RunFailure.hasMarker(error, symbol);
  }
}
