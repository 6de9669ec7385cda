// Clones left by a killed operator process (workers/stale-clones.ts): which a starting
// process removes (a table), and the removal itself in a real directory, with a real pid
// whose process has exited and one that is running.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { clonePrefix, processAlive, removeStaleClones, staleCloneDirectories } from '../../operator/src/workers/stale-clones.ts';
import { testTempDir } from '../support/test-temp-dir.ts';

const OWN = 1;
const LIVE = 4242;
const DEAD = 999_999;
const alive = (pid: number) => pid === OWN || pid === LIVE;

describe('staleCloneDirectories', () => {
  const cases: Array<[name: string, stale: boolean, why: string]> = [
    [`chamvi-clone-${DEAD}-aB3xYz`, true, 'its process is gone'],
    [
      `chamvi-clone-${OWN}-aB3xYz`,
      true,
      'this process has no clone yet: one under its pid is a predecessor’s (pid 1 again in a container)',
    ],
    [`chamvi-clone-${LIVE}-aB3xYz`, false, 'another live process is cloning into it'],
    ['chamvi-clone-aB3xYz', false, 'no pid in the name (an older version made it): not ours to judge'],
    [`chamvi-clone-${DEAD}-aB3xYz-extra`, false, 'not the shape mkdtemp makes'],
    [`chamvi-clone-${DEAD}-`, false, 'no random part'],
    [`other-${DEAD}-aB3xYz`, false, 'not a clone'],
    ['chamvi-e2e-aB3xYz', false, 'another chamvi directory'],
  ];
  it.each(cases)('%s: stale %s (%s)', (name, stale) => {
    expect(staleCloneDirectories([name], OWN, alive)).toEqual(stale ? [name] : []);
  });

  it('makes names the pattern reads back', () => {
    expect(staleCloneDirectories([`${clonePrefix(DEAD)}Q1w2E3`], OWN, alive)).toEqual([`${clonePrefix(DEAD)}Q1w2E3`]);
  });
});

describe('removeStaleClones', () => {
  it('removes the clones of a process that exited and keeps those of a running one', async () => {
    const dir = testTempDir('chamvi-stale-clones-');
    const exited = spawnSync('true').pid!;
    const running = spawn('sleep', ['30']);
    onTestFinished(() => void running.kill());
    expect(processAlive(exited)).toBe(false);
    expect(processAlive(running.pid!)).toBe(true);

    const clone = (pid: number) => {
      const base = join(dir, `${clonePrefix(pid)}Ab12Cd`);
      mkdirSync(join(base, 'repo', '.git'), { recursive: true });
      writeFileSync(join(base, 'workspace.tar'), 'tar');
      return base;
    };
    const left = clone(exited);
    const inFlight = clone(running.pid!);
    const unrelated = join(dir, 'chamvi-clone-Ab12Cd');
    mkdirSync(unrelated);

    const removed = await removeStaleClones(dir, process.pid);
    expect(removed).toEqual([`${clonePrefix(exited)}Ab12Cd`]);
    expect(existsSync(left)).toBe(false);
    expect(existsSync(inFlight)).toBe(true);
    expect(existsSync(unrelated)).toBe(true);
  });
});
