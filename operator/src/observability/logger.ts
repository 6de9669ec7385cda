// The operator's logger: pino JSON lines, one child per run so every line carries the run's
// namespace, name and uid. Known secret-bearing fields are redacted as a second line of
// defence; the first is never passing a secret to a logger at all.
import { pino, type Logger } from 'pino';

export type { Logger };

export const REDACTED_PATHS = [
  'apiKey',
  '*.apiKey',
  'token',
  '*.token',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
];

export function createLogger(options: { level?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { component: 'chamvi-operator' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? process.stdout,
  );
}
