// A kept toolbox session that died is started again once, whatever number of calls find it dead
// at the same time: each used to start its own, and all but the last were never closed.
import { describe, expect, it } from 'vitest';
import { ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import { honest, scriptedToolbox, transportOf, until } from '../support/scripted-toolbox.ts';

describe('a dead toolbox session met by calls made together', () => {
  it('is started again once, and every call is answered by that one session', async () => {
    const first = scriptedToolbox(honest);
    const second = scriptedToolbox(honest);
    const third = scriptedToolbox(honest);
    const { transport, starts } = transportOf([first, second, third]);
    const sandbox = new ToolboxSandbox(transport, { mode: 'serve' });
    await sandbox.open();
    first.process.kill();
    await until(() => first.killed);
    const answers = await Promise.all([
      sandbox.call({ tool: 'git_diff', input: {} }),
      sandbox.call({ tool: 'list_files', input: {} }),
      sandbox.call({ tool: 'read_file', input: {} }),
    ]);
    expect(answers.map((answer) => (answer.ok ? answer.result : undefined))).toEqual([
      { tool: 'git_diff' },
      { tool: 'list_files' },
      { tool: 'read_file' },
    ]);
    expect(starts).toEqual(['serve', 'serve']);
    await sandbox.close();
  });
});
