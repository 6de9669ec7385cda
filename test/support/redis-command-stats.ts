// What a real redis-server has run so far, from its own counters (INFO commandstats): tests
// read it before and after an operation to see which commands the operation sent. A script's
// own commands are counted too, as Redis counts them.
import type { Redis } from 'ioredis';

/** Commands Redis has run so far, by name, INFO itself left out. */
export async function commandsByName(redis: Redis): Promise<Map<string, number>> {
  const stats = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const match of stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) if (match[1] !== 'info') calls.set(match[1]!, Number(match[2]));
  return calls;
}
