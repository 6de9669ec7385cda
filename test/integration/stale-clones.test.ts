// A real operator process, started over a temp dir holding the clones of a process that was
// killed and of one still running, removes the first as it starts and leaves the
// second (workers/stale-clones.ts; the chart's /tmp is an emptyDir that outlives the container).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { clonePrefix } from '../../operator/src/workers/stale-clones.ts';
import { kubeconfigPath, redisUrl } from '../support/cluster.ts';
import { OperatorProcess } from '../support/operator-process.ts';

const temp = mkdtempSync(join(tmpdir(), 'chamvi-stale-clones-'));
const running = spawn('sleep', ['120']);
let operator: OperatorProcess | undefined;

afterAll(async () => {
  await operator?.kill();
  running.kill();
  rmSync(temp, { recursive: true, force: true, maxRetries: 5 });
});

function plantClone(pid: number): string {
  const base = join(temp, `${clonePrefix(pid)}Ab12Cd`);
  mkdirSync(join(base, 'repo', '.git'), { recursive: true });
  writeFileSync(join(base, 'repo', 'README.md'), 'a private repository, half cloned\n');
  writeFileSync(join(base, 'askpass.sh'), '#!/bin/sh\n');
  return base;
}

describe('a starting operator and the clones in its temp dir', () => {
  it("removes a killed process's clone as it starts and keeps a running process's", async () => {
    const killed = spawnSync('true').pid!;
    const left = plantClone(killed);
    const inFlight = plantClone(running.pid!);

    operator = new OperatorProcess({
      kubeconfig: kubeconfigPath(),
      env: {
        TMPDIR: temp,
        REDIS_URL: redisUrl(),
        CHAMVI_REDIS_PREFIX: `staleclones${Date.now()}`,
        CHAMVI_LEADER_ELECTION: 'false',
        CHAMVI_WATCH_NAMESPACES: 'chamvi-stale-clones-none',
        CHAMVI_IDENTITY: 'stale-clones',
      },
    });
    const removed = await operator.waitForLog('removed clones left by processes that are gone');
    expect(removed.removed).toBe(1);
    expect(existsSync(left)).toBe(false);
    expect(existsSync(inFlight)).toBe(true);
    // At start: before the controller has even synced its caches.
    await operator.waitForLog('caches synced; reconciling');
    const messages = operator.lines.map((line) => line.msg);
    expect(messages.indexOf('removed clones left by processes that are gone')).toBeLessThan(messages.indexOf('caches synced; reconciling'));
  }, 120_000);
});
