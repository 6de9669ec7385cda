// run --local needs a Redis for its queue and run state: none was configured and
// redis-server could not be started, or the configured one does not answer.
import { CliError } from './cli-error.ts';

export class RedisUnavailableError extends CliError {
  override readonly name = 'RedisUnavailableError';
}
