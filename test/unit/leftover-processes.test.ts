// Which processes the toolbox stops before the operator's check (leftover-processes.ts): in
// the sandbox container every one but PID 1, the idle node under tini, the exec sessions' first
// processes and the caller's own line; nowhere else anything beyond the jobs. The sweep itself
// runs in a real container: test/support/sandbox-contract.ts on the real node.
import { describe, expect, it } from 'vitest';
import { IDLE_SCRIPT } from '../../sandbox-image/toolbox/contract/sandbox-init.ts';
import { leftoverPids, sandboxInit } from '../../sandbox-image/toolbox/leftover-processes.ts';
import { isLive, parseStat, type ProcessEntry } from '../../sandbox-image/toolbox/process-table.ts';

const entry = (pid: number, ppid: number, startTicks: number, state = 'S', threads = 1): ProcessEntry => ({
  pid,
  ppid,
  pgid: pid,
  session: pid,
  state,
  startTicks,
  threads,
});

describe('sandboxInit', () => {
  it.each([
    [['/usr/bin/tini', '--', '/usr/local/bin/node', '-e', IDLE_SCRIPT], 'tini'],
    [['/chamvi-tools/node', '-e', IDLE_SCRIPT], 'node'],
    [['/sbin/init'], undefined],
    [['/usr/bin/tini', '--', 'sleep', 'infinity'], undefined],
    [['/usr/local/bin/node', '-e', `${IDLE_SCRIPT};`], undefined],
    [['/usr/bin/sh', 'x', '/usr/local/bin/node', '-e', IDLE_SCRIPT], undefined],
    [[], undefined],
  ])('%j is %s', (argv, init) => {
    expect(sandboxInit(argv)).toBe(init);
  });
});

describe('parseStat', () => {
  it('reads pid, parent, process group, session, state, threads and start time, a name with spaces and parentheses included', () => {
    const line = '4242 (evil) S 1 (x) R 17 4240 4242 0 -1 4194304 124 0 0 0 0 0 0 0 20 0 3 0 2468655 3133440 360 0\n';
    expect(parseStat(line)).toEqual({ pid: 4242, ppid: 17, pgid: 4240, session: 4242, state: 'R', startTicks: 2468655, threads: 3 });
  });

  it('reads a name with a newline in it', () => {
    const line = '77 (srv\nx) S 1 77 77 0 -1 4194304 124 0 0 0 0 0 0 0 20 0 1 0 99 3133440 360 0\n';
    expect(parseStat(line)).toMatchObject({ pid: 77, ppid: 1, pgid: 77, session: 77, state: 'S', threads: 1 });
  });

  it('refuses a line it cannot read', () => {
    expect(parseStat('')).toBeUndefined();
    expect(parseStat('12 (x)')).toBeUndefined();
  });
});

describe('isLive', () => {
  // /proc shows the main thread's state: Z with other threads left is a process whose main
  // thread exited (pthread_exit in main) and that still runs.
  it.each([
    ['S', 1, true],
    ['R', 4, true],
    ['D', 1, true],
    ['Z', 1, false],
    ['Z', 2, true],
    ['X', 1, false],
  ])('state %s with %d thread(s) is live: %s', (state, threads, live) => {
    expect(isLive(entry(9, 1, 1, state, threads))).toBe(live);
  });
});

describe('leftoverPids', () => {
  // tini (1) runs the idle node (7); the operator's serve session (40, exec'd: ppid 0) is the
  // caller; a kubectl exec shell (50) runs a command (51); the model's bash (41) left a loop
  // (42) and an orphan that tini adopted (60), which started long after the idle node.
  const table = [
    entry(1, 0, 100),
    entry(7, 1, 101),
    entry(40, 0, 500),
    entry(41, 40, 600),
    entry(42, 41, 601),
    entry(50, 0, 700),
    entry(51, 50, 701),
    entry(60, 1, 800),
    entry(61, 60, 801, 'Z'),
  ];

  it('stops everything the run started, and no exec session, the idle node or the caller', () => {
    expect(leftoverPids(table, 40, 'tini').sort((a, b) => a - b)).toEqual([41, 42, 51, 60]);
  });

  it('stops a process whose main thread exited while another thread runs (Z with 2 threads), not a true zombie', () => {
    const withThreadLeft = [entry(1, 0, 100), entry(7, 1, 101), entry(40, 0, 500), entry(60, 1, 800, 'Z', 2), entry(61, 1, 801, 'Z', 1)];
    expect(leftoverPids(withThreadLeft, 40, 'tini')).toEqual([60]);
  });

  it("keeps the caller's ancestors: a toolbox started by a shell the exec ran", () => {
    const wrapped = [entry(1, 0, 100), entry(7, 1, 101), entry(40, 0, 500), entry(45, 40, 501), entry(46, 45, 502)];
    expect(leftoverPids(wrapped, 45, 'tini')).toEqual([46]);
  });

  it('keeps no child of PID 1 when PID 1 is the idle node itself (a custom image): an orphan is the run’s', () => {
    expect(leftoverPids([entry(1, 0, 100), entry(40, 0, 500), entry(60, 1, 800)], 40, 'node')).toEqual([60]);
  });

  it('keeps only the first child of tini: an orphan that claims the idle name is still later', () => {
    expect(leftoverPids([entry(1, 0, 100), entry(60, 1, 800), entry(7, 1, 101), entry(40, 0, 500)], 40, 'tini')).toEqual([60]);
  });
});
