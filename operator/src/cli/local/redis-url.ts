// The Redis URL a local run is given (--redis-url or REDIS_URL), as the plugin checks it and
// names it in messages. It usually holds a password, so no message echoes it: a URL that
// parses is shown rebuilt from its parts with the password and the query's values starred
// out (ioredis takes a password from `?password=` too), and one that does not parse is not
// shown at all (a regular expression over the raw text missed a password holding `/` or `@`).
// Pure, and free of ioredis, so parsing the command line stays fast.
import { CliError } from '../errors/cli-error.ts';

/** The Redis a local run was given: --redis-url (parse-arguments.ts checked it), else REDIS_URL. */
export function configuredRedis(
  command: { redisUrl?: string },
  env: NodeJS.ProcessEnv,
): { url: string; origin: '--redis-url' | 'REDIS_URL' } | undefined {
  if (command.redisUrl) return { url: command.redisUrl, origin: '--redis-url' };
  const url = env.REDIS_URL;
  if (!url) return undefined;
  const problem = redisUrlProblem(url);
  if (problem) throw new CliError(`REDIS_URL ${problem}; fix it or unset it to start a redis-server`);
  return { url, origin: 'REDIS_URL' };
}

/**
 * Why the URL is not one ioredis can use, said without a character of it (`must be a redis://
 * or rediss:// URL; this one holds whitespace ...`); undefined when it is.
 */
export function redisUrlProblem(url: string): string | undefined {
  const problem = (what: string) => `must be a redis:// or rediss:// URL; this one ${what} (not shown: it may hold a password)`;
  // Before parsing: new URL() drops a trailing newline (a secret file's) that ioredis would not.
  if (/[\s\p{Cc}]/u.test(url)) return problem('holds whitespace or a control character (a trailing newline from a file?)');
  const parsed = parsedUrl(url);
  if (!parsed) return problem('does not parse (a password holding / ? # @ or % must be percent-encoded)');
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') return problem('has another scheme');
  if (!parsed.hostname) return problem('names no host');
  // ioredis takes the path for the database number; a password with a slash, `redis://u:12/ab@h`,
  // is host "u", port 12, path "/ab@h", and shown redacted would show the password's pieces.
  if (!/^\/?\d*$/.test(parsed.pathname)) return problem('names a database that is not a number after the host');
  return undefined;
}

/** The URL without its password, for messages. */
export function redactRedisUrl(url: string): string {
  const parsed = parsedUrl(url);
  if (!parsed || redisUrlProblem(url)) return '(a Redis URL not shown: it does not parse, and may hold a password)';
  const user = parsed.username || parsed.password ? `${parsed.username}${parsed.password ? ':***' : ''}@` : '';
  const query = [...parsed.searchParams.keys()].map((key) => `${encodeURIComponent(key)}=***`).join('&');
  return `${parsed.protocol}//${user}${parsed.host}${parsed.pathname}${query ? `?${query}` : ''}`;
}

function parsedUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}
