// The git config the sandbox is given in its environment (GIT_CONFIG_COUNT/KEY_n/VALUE_n: the
// operator's egress proxy, sandbox-egress.ts) reaches the model's git in bash sessions and jobs,
// beside the toolbox's own safe.directory entry (child-process.ts) rather than replaced by it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { callTool, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The proxy git sees, each safe.directory it sees, then the workspace (what safe.directory should name). */
const SHOW_CONFIG =
  'echo "proxy=$(git config --get http.proxy)"; echo "safe=$(git config --get-all safe.directory)"; echo "workspace=$CHAMVI_WORKSPACE"';

/** The toolbox's environment: the test's own, without any git config of the machine running it. */
function sandboxEnvironment(gitConfig: Record<string, string>): NodeJS.ProcessEnv {
  const environment: NodeJS.ProcessEnv = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };
  for (const name of Object.keys(environment)) if (name.startsWith('GIT_CONFIG_') && /COUNT|KEY|VALUE/.test(name)) delete environment[name];
  return { ...environment, ...gitConfig };
}

/** proxy, safe and workspace as SHOW_CONFIG prints them. */
function parseShown(stdout: string): Record<string, string> {
  return Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((line) => line.split(/=(.*)/s).slice(0, 2) as [string, string]),
  );
}

async function bashSession(env: NodeJS.ProcessEnv): Promise<Record<string, string>> {
  const result = resultOf<{ exitCode: number; stdout: string }>(await callTool(workspace, 'bash', { command: SHOW_CONFIG }, { env }));
  expect(result.exitCode).toBe(0);
  return parseShown(result.stdout);
}

async function bashJob(env: NodeJS.ProcessEnv): Promise<Record<string, string>> {
  const { job } = resultOf<{ job: string }>(
    await callTool(workspace, 'bash', { command: `${SHOW_CONFIG}; echo done`, background: true }, { env }),
  );
  let output = '';
  for (let attempt = 0; attempt < 100 && !output.includes('done\n'); attempt += 1) {
    await sleep(50);
    output = resultOf<{ output: string }>(await callTool(workspace, 'bash_output', { job }, { env })).output;
  }
  return parseShown(output.replace(/done\n$/, ''));
}

describe.each([
  ['a bash session', bashSession],
  ['a background job', bashJob],
])('git config from the sandbox environment in %s', (_, run) => {
  it('keeps the inherited entries and adds safe.directory after them', async () => {
    const shown = await run(sandboxEnvironment({ GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.proxy', GIT_CONFIG_VALUE_0: 'x' }));
    expect(shown.proxy).toBe('x');
    expect(shown.safe).toBe(shown.workspace);
    expect(shown.workspace).not.toBe('');
  });

  it('sets safe.directory alone when nothing is inherited', async () => {
    const shown = await run(sandboxEnvironment({}));
    expect(shown).toEqual({ proxy: '', safe: shown.workspace, workspace: expect.stringMatching(/./) });
  });

  it.each([
    ['not a number', { GIT_CONFIG_COUNT: 'one', GIT_CONFIG_KEY_0: 'http.proxy', GIT_CONFIG_VALUE_0: 'stale' }],
    ['missing, with entries left behind', { GIT_CONFIG_KEY_0: 'http.proxy', GIT_CONFIG_VALUE_0: 'stale' }],
    ['naming an entry that is not set', { GIT_CONFIG_COUNT: '2', GIT_CONFIG_KEY_0: 'http.proxy', GIT_CONFIG_VALUE_0: 'stale' }],
    ['huge', { GIT_CONFIG_COUNT: '99999999999', GIT_CONFIG_KEY_0: 'http.proxy', GIT_CONFIG_VALUE_0: 'stale' }],
  ])('counts an inherited count that is %s as none, and reads no entry beyond it', async (__, gitConfig) => {
    const shown = await run(sandboxEnvironment(gitConfig));
    expect(shown).toEqual({ proxy: '', safe: shown.workspace, workspace: expect.stringMatching(/./) });
  });
});
