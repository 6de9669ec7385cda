// Which processes a new serve session kills (sandbox-image/toolbox/stopped-sessions.ts): only
// stopped toolboxes of earlier exec sessions. The toolbox tier runs it in a real PID namespace
// (test/toolbox/stopped-serve-session.test.ts); this is the decision's table.
import { describe, expect, it } from 'vitest';
import { type ProcessWithCommand, stoppedToolboxPids, toolboxPrefix } from '../../sandbox-image/toolbox/stopped-sessions.ts';

const SERVE = ['node', '/opt/chamvi/toolbox.mjs', 'serve'];
const prefix = toolboxPrefix(SERVE)!;
const SELF = 40;

const proc = (pid: number, ppid: number, state: string, argv: readonly string[] | undefined): ProcessWithCommand => ({
  pid,
  ppid,
  pgid: pid,
  session: pid,
  state,
  startTicks: pid,
  threads: 1,
  argv,
});

describe('toolboxPrefix', () => {
  it('is what comes before serve, and nothing when this is not a serve session', () => {
    expect(toolboxPrefix(SERVE)).toEqual(['node', '/opt/chamvi/toolbox.mjs']);
    expect(toolboxPrefix(['node', '/opt/chamvi/toolbox.mjs', 'call'])).toBeUndefined();
    expect(toolboxPrefix(['serve'])).toBeUndefined();
  });
});

describe('stoppedToolboxPids', () => {
  const cases: [string, ProcessWithCommand, boolean][] = [
    ['a stopped serve session', proc(10, 0, 'T', SERVE), true],
    ['a serve session stopped under a tracer', proc(11, 0, 't', SERVE), true],
    ['a stopped call session', proc(12, 0, 'T', [...prefix, 'call']), true],
    ['a running serve session', proc(13, 0, 'S', SERVE), false],
    ['a stopped toolbox the sandbox started (its parent is inside)', proc(14, 1, 'T', SERVE), false],
    ['a stopped exec session that is not the toolbox', proc(15, 0, 'T', ['sleep', '60']), false],
    ['a stopped exec session of another toolbox path', proc(16, 0, 'T', ['node', '/tmp/toolbox.mjs', 'serve']), false],
    ['a stopped exec session running the toolbox script with no command', proc(17, 0, 'T', prefix), false],
    ['a stopped exec session whose command line cannot be read', proc(18, 0, 'T', undefined), false],
    ['PID 1, stopped', proc(1, 0, 'T', SERVE), false],
    ['this process', proc(SELF, 0, 'T', SERVE), false],
  ];
  for (const [what, entry, killed] of cases) {
    it(`${killed ? 'kills' : 'leaves'} ${what}`, () => {
      const self = proc(SELF, 0, 'R', SERVE);
      const table = entry.pid === SELF ? [entry] : [self, entry];
      expect(stoppedToolboxPids(table, SELF, prefix)).toEqual(killed ? [entry.pid] : []);
    });
  }

  it('leaves the ancestors of this process', () => {
    const table = [proc(30, 0, 'T', SERVE), proc(SELF, 30, 'R', SERVE)];
    expect(stoppedToolboxPids(table, SELF, prefix)).toEqual([]);
  });
});
