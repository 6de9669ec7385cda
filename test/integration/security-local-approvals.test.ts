// Security #11.5, #11.11 and #11.13 in `kubectl codingrun run --local`, where approved calls
// run on the user's own machine: the approval question shows the whole input (escaped), the
// diff cannot drive the terminal but stays exact when redirected, and spec.sandbox.setup is
// asked like a bash call. The plugin as a process on real Redis, real git and the real
// toolbox; a terminal is a pseudo-terminal from script(1), what the test writes is typed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../support/cluster.ts';
import { git } from '../support/git-fixture.ts';
import { createLocalWorkspace, writeLocalManifest } from '../support/local-workspace.ts';
import { TYPE_AHEAD_MS } from '../../operator/src/cli/local/terminal-approver.ts';
import { pluginPath, runLocalPlugin } from '../support/plugin.ts';
import type { ProcessResult } from '../support/run-process.ts';

const hasScript = spawnSync('script', ['--version']).status === 0;

let work: string;
let repo: string;
let pluginTmp: string;

type Turn = { toolCalls?: Array<{ toolName: string; input: unknown }>; text?: string };

/** A manifest file: the script ConfigMap, then the CodingRun on the test repository. */
const manifest = (name: string, turns: Turn[], spec: Record<string, unknown> = {}) =>
  writeLocalManifest({ work, repo }, { name, task: 'Tidy up.', turns, spec });

const environment = () => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? work, TMPDIR: pluginTmp, REDIS_URL: redisUrl() });

/** run --local with pipes (no terminal): stdin ignored, stdout and stderr apart. */
function runPiped(file: string): Promise<ProcessResult> {
  return runLocalPlugin(['run', '-f', file, '--local'], { cwd: work, env: environment() });
}

/** run --local on a pseudo-terminal; `answers` are typed at each question ("Approve? [y/N]", then a denial's reason) in turn. */
async function runOnTerminal(file: string, answers: string[]): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, pluginPath, 'run', '-f', file, '--local'].map((word) => `'${word}'`).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: work,
    env: { ...environment(), TERM: 'dumb' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  let asked = 0;
  const deadline = Date.now() + 90_000;
  while (asked < answers.length && Date.now() < deadline) {
    const questions = output.split('Approve? [y/N]').length - 1 + output.split('Reason, for the model').length - 1;
    // Typed after the question has been on screen for a while, as a person would: an answer within
    // TYPE_AHEAD_MS of it is taken for one typed before it and ignored (terminal-approver.ts).
    if (questions > asked) {
      await new Promise((resolve) => setTimeout(resolve, TYPE_AHEAD_MS + 200));
      child.stdin.write(`${answers[asked++]}\n`);
    } else await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const code = await closed;
  child.stdin.end();
  return { code, output };
}

beforeAll(() => {
  ({ work, pluginTmp, repo } = createLocalWorkspace('chamvi-security-local-'));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('security #11.5 run --local asks about the whole input', () => {
  it.skipIf(!hasScript)('shows a 10 KiB input to its very end before asking, and runs the approved call', async () => {
    const command = `echo head > head.txt; : '${'#'.repeat(10 * 1024)}'; echo TAIL-SHOWN > tail.txt`;
    const file = manifest('long-local', [{ toolCalls: [{ toolName: 'bash', input: { command } }] }, { text: 'done' }], {
      approval: { tools: ['bash'] },
    });
    const { code, output } = await runOnTerminal(file, ['y']);
    const question = output.slice(0, output.indexOf('Approve? [y/N]'));
    expect(question).toContain(JSON.stringify({ command }));
    expect(question).toMatch(/wants to run bash \(approval s1-c1\), input \d+ bytes, shown whole:/);
    expect(output).toMatch(/Approved\s+bash call s1-c1 approved/);
    expect(output).toContain('+TAIL-SHOWN');
    expect(code).toBe(0);
  });

  it.skipIf(!hasScript)('shows an escape- and bidi-laden input escaped, so it cannot hide part of itself', async () => {
    const command = 'rm -rf "$HOME/x"\x1b[2K\r\x1b[1Aecho harmless \u202Etxt.exe';
    const file = manifest('hostile-local', [{ toolCalls: [{ toolName: 'bash', input: { command } }] }, { text: 'done' }], {
      approval: { tools: ['bash'] },
    });
    const { output } = await runOnTerminal(file, ['n', 'no']);
    const question = output.slice(0, output.indexOf('Approve? [y/N]'));
    // JSON already spells ESC as \u001b; the bidi override is escaped by the display.
    expect(question).toContain('\\u001b[2K\\r\\u001b[1Aecho harmless <U+202E>txt.exe');
    expect(question).toContain('shown escaped');
    expect(output).not.toContain('\u202E');
    expect(output).toMatch(/Denied\s+bash call s1-c1 denied \(approver not recorded\): no/);
  });
});

describe('security #11.11 run --local prints the diff safely', () => {
  const hostile = 'rm -rf ~\x1b[2K\x1b]0;pwned\x07 ok \u202Eexe.txt\n';
  const turns: Turn[] = [
    { toolCalls: [{ toolName: 'write_file', input: { path: 'note.txt', content: hostile } }] },
    { text: 'Wrote note.txt.' },
  ];

  it.skipIf(!hasScript)('on a terminal shows control characters escaped and warns', async () => {
    const { code, output } = await runOnTerminal(manifest('diff-tty', turns), []);
    expect(code).toBe(0);
    expect(output).toContain('+rm -rf ~^[[2K^[]0;pwned^G ok <U+202E>exe.txt');
    expect(output).not.toContain('\x1b[2K');
    expect(output).not.toContain('\x1b]0;');
    expect(output).toContain('warning: the output holds control or bidirectional characters');
  });

  it('redirected keeps the exact bytes, and the diff applies', async () => {
    const result = await runPiped(manifest('diff-pipe', turns));
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`+${hostile}`);
    const copy = path.join(work, 'apply-check');
    git(['clone', '-q', repo, copy], work);
    writeFileSync(path.join(work, 'change.diff'), `${result.stdout}\n`);
    git(['apply', path.join(work, 'change.diff')], copy);
    expect(spawnSync('cat', [path.join(copy, 'note.txt')], { encoding: 'utf8' }).stdout).toBe(hostile);
  });
});

describe('security #11.13 run --local asks before running spec.sandbox.setup on this machine', () => {
  it('without a terminal, a setup under a bash approval policy is denied: SetupFailed, and it never ran', async () => {
    const marker = path.join(work, 'setup-ran-piped');
    const file = manifest('setup-piped', [{ text: 'done' }], { approval: { tools: ['bash'] }, sandbox: { setup: `touch '${marker}'` } });
    const result = await runPiped(file);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/SetupFailed/);
    expect(result.stderr).toContain('setup needed approval');
    expect(result.stderr).toContain('no terminal to approve on');
    expect(existsSync(marker)).toBe(false);
  });

  it.skipIf(!hasScript)('on a terminal, shows the whole setup command escaped, and runs it once approved', async () => {
    const marker = path.join(work, 'setup-ran-tty');
    const setup = `touch '${marker}' # \u202Eharmless`;
    const file = manifest('setup-tty', [{ text: 'done' }], { approval: { tools: ['bash'] }, sandbox: { setup } });
    const { code, output } = await runOnTerminal(file, ['y']);
    const question = output.slice(0, output.indexOf('Approve? [y/N]'));
    expect(question).toContain('wants to run spec.sandbox.setup with bash');
    expect(question).toContain(`touch '${marker}' # <U+202E>harmless`);
    expect(code).toBe(0);
    expect(existsSync(marker)).toBe(true);
  });

  it.skipIf(!hasScript)(
    'asks before each spec.verify check, showing what the model changed that the check will run',
    async () => {
      const marker = path.join(work, 'verify-ran-tty');
      const writes = (content: string) => ({ toolCalls: [{ toolName: 'write_file', input: { path: 'check.sh', content } }] });
      const file = manifest('verify-tty', [writes('exit 1\n'), { text: 'done' }, writes(`touch '${marker}'\n`), { text: 'done again' }], {
        approval: { tools: ['bash'] },
        verify: { command: 'sh check.sh', retries: 1 },
      });
      const { code, output } = await runOnTerminal(file, ['y', 'y']);
      const questions = output.split('Approve? [y/N]').slice(0, -1);
      // The command alone says nothing of check.sh, which the model wrote: the question names it.
      expect(questions).toHaveLength(2);
      for (const question of questions) {
        expect(question).toContain('wants to run spec.verify.command with bash');
        expect(question).toContain('what the model changed runs too');
        // The diff snapshots run on a private index: the model's own shows the new file untracked.
        expect(question).toMatch(/git status there:\r?\n\?\? check\.sh\r?\n/);
      }
      expect(code).toBe(0);
      expect(existsSync(marker)).toBe(true);
    },
    120_000,
  );

  it('runs setup without asking when bash is not gated', async () => {
    const marker = path.join(work, 'setup-ran-ungated');
    const result = await runPiped(manifest('setup-ungated', [{ text: 'done' }], { sandbox: { setup: `touch '${marker}'` } }));
    expect(result.code).toBe(0);
    expect(existsSync(marker)).toBe(true);
  });
});
