// `kubectl codingrun run -f FILE --local` as a process: a real git repository in a temporary
// directory (a local path and a file:// URL), a scripted model in a ConfigMap of the same
// file, the real workers on real Redis (the test setup's through REDIS_URL, or a
// redis-server the plugin starts itself) and the real toolbox. Asserts the exit code, the
// progress on stderr, the exact diff on stdout, clear errors for bad files, approvals
// without and with a terminal, and that nothing (redis-server, sandbox directories, Redis
// keys, a running tool) is left behind, Ctrl-C included.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../support/cluster.ts';
import { git } from '../support/git-fixture.ts';
import { createLocalWorkspace, writeLocalManifest } from '../support/local-workspace.ts';
import { TYPE_AHEAD_MS } from '../../operator/src/cli/local/terminal-approver.ts';
import { pluginPath } from '../support/plugin.ts';
import { startProcess } from '../support/run-process.ts';

let work: string;
let repo: string;
/** The plugin's TMPDIR: sandboxes and a started redis-server put their directories here. */
let pluginTmp: string;

interface Result {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  ms: number;
}

interface Started {
  result: Promise<Result>;
  stderr(): string;
  pid: number;
}

/** Starts the plugin with a clean environment: PATH, HOME, TMPDIR and only what `env` adds (no REDIS_URL unless given). */
function start(args: string[], env: Record<string, string> = {}, stdin: 'ignore' | 'pipe' = 'ignore'): Started {
  const started = Date.now();
  const { child, result, errorOutput } = startProcess(process.execPath, [pluginPath, ...args], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? work, TMPDIR: pluginTmp, ...env },
    stdin,
  });
  return { result: result.then((ended) => ({ ...ended, ms: Date.now() - started })), stderr: errorOutput, pid: child.pid! };
}

const codingrun = (args: string[], env: Record<string, string> = {}) => start(args, env).result;
const withRedis = () => ({ REDIS_URL: redisUrl() });

const hashOf = (text: string) => spawnSync('git', ['hash-object', '--stdin'], { input: text, encoding: 'utf8' }).stdout.trim().slice(0, 7);

type Turn = {
  toolCalls?: Array<{ toolName: string; input: unknown }>;
  text?: string;
  usage?: { inputTokens: number; outputTokens: number };
};

/** A manifest file: the script ConfigMap, then the CodingRun (JSON documents are YAML too). */
const manifest = (name: string, turns: Turn[], spec: Record<string, unknown> = {}, extra: object[] = []) =>
  writeLocalManifest({ work, repo }, { name, task: 'Greet the world.', turns, spec, extra });

const GREET_TURNS: Turn[] = [
  { toolCalls: [{ toolName: 'read_file', input: { path: 'README.md' } }], usage: { inputTokens: 1200, outputTokens: 40 } },
  {
    toolCalls: [
      { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } },
      { toolName: 'write_file', input: { path: 'NOTES.md', content: 'Greeted.\n' } },
    ],
    usage: { inputTokens: 1500, outputTokens: 60 },
  },
  { text: 'README.md now greets the world.', usage: { inputTokens: 1700, outputTokens: 12 } },
];

const EXPECTED_DIFF = [
  'diff --git a/NOTES.md b/NOTES.md',
  'new file mode 100644',
  `index 0000000..${hashOf('Greeted.\n')}`,
  '--- /dev/null',
  '+++ b/NOTES.md',
  '@@ -0,0 +1 @@',
  '+Greeted.',
  'diff --git a/README.md b/README.md',
  `index ${hashOf('Hello\n')}..${hashOf('Hello, world\n')} 100644`,
  '--- a/README.md',
  '+++ b/README.md',
  '@@ -1 +1 @@',
  '-Hello',
  '+Hello, world',
  '',
].join('\n');

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
};

/** What the plugin itself makes in TMPDIR: sandbox directories and a started redis-server's. */
const leftovers = () => readdirSync(pluginTmp).filter((entry) => entry.startsWith('chamvi-local-'));

beforeAll(() => {
  ({ work, pluginTmp, repo } = createLocalWorkspace('chamvi-cli-run-local-'));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('kubectl codingrun run --local', () => {
  it('runs a scripted run to Succeeded: exit 0, progress on stderr, exactly the diff on stdout', async () => {
    const file = manifest('greet', GREET_TURNS);
    const result = await codingrun(['run', '-f', file, '--local'], withRedis());
    console.log(`scripted local run (3 steps, REDIS_URL): ${result.ms} ms wall time, plugin start included`);
    expect(result.stderr).not.toMatch(/^(warning|error):/m);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(EXPECTED_DIFF);
    const progress = result.stderr;
    expect(progress).toMatch(/Accepted\s+Accepted: file:\/\/.*\/hello with scripted/);
    expect(progress).toMatch(/Prepared\s+Cloned file:\/\/.*\/hello into the sandbox/);
    // Each step as `kubectl codingrun logs -f` shows it.
    expect(progress).toMatch(
      /^step 1 at \d\d:\d\d:\d\d [\d.]+s, 1240 tokens \(1200 in, 40 out\)\n  → read_file \{"path":"README.md"\}\n    ok /m,
    );
    expect(progress).toMatch(/^step 2 at .*, 1560 tokens \(1500 in, 60 out\)\n  → edit_file .*\n    ok .*\n  → write_file .*\n    ok /m);
    expect(progress).toMatch(/^step 3 at .*\n  \| README.md now greets the world.$/m);
    expect(progress).toMatch(/Completed\s+Finished in 3 step\(s\): 2 file\(s\) changed\./);
    expect(progress).toMatch(/codingrun\/greet Succeeded in [\d.]+s: 3 steps, 3 tool calls, 4512 tokens; 2 files changed, \+2 -1/);
    expect(progress).toContain('summary: README.md now greets the world.');
    // The agent worked on a clone: the user's repository is as it was.
    expect(git(['status', '--porcelain'], repo)).toBe('');
    expect(leftovers()).toEqual([]);
  });

  it('leaves no key of its own in the REDIS_URL Redis', async () => {
    const result = await codingrun(['run', '-f', manifest('tidy', GREET_TURNS.slice(2)), '--local'], withRedis());
    expect(result.code).toBe(0);
    const prefix = /keys under (chamvi-local-[0-9a-f]+):/.exec(result.stderr)?.[1];
    expect(prefix).toBeDefined();
    const redis = new Redis(redisUrl());
    try {
      expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    } finally {
      redis.disconnect();
    }
  });

  it('takes a local path relative to the file, and starts and stops its own redis-server when REDIS_URL is unset', async () => {
    const file = manifest('own-redis', GREET_TURNS, { repository: { url: './hello' } });
    const result = await codingrun(['run', '-f', file, '--local']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(EXPECTED_DIFF);
    expect(result.stderr).toMatch(/Cloned file:\/\/.*\/hello into the sandbox/);
    // Security #11.1: with a password of its own, never printed.
    const pid = Number(
      /redis-server pid (\d+) on redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ \(started for this run, with a password/.exec(result.stderr)?.[1],
    );
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  it('exits 1 when neither redis-server nor REDIS_URL is there, saying what to install or set', async () => {
    const emptyPath = path.join(work, 'empty-bin');
    mkdirSync(emptyPath, { recursive: true });
    const result = await codingrun(['run', '-f', manifest('no-redis', GREET_TURNS), '--local'], { PATH: emptyPath });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('install redis-server');
    expect(result.stderr).toContain('REDIS_URL');
  });

  it('exits 1 with BudgetExceeded when maxSteps is spent, still printing the partial diff', async () => {
    const file = manifest('budget', GREET_TURNS, { budget: { maxSteps: 2, timeout: '2m' } });
    const result = await codingrun(['run', '-f', file, '--local'], withRedis());
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'kubectl-codingrun: codingrun/budget Failed (BudgetExceeded): The run used all 2 steps of spec.budget.maxSteps',
    );
    expect(result.stdout).toBe(EXPECTED_DIFF);
  });

  it('exits 1 with CloneFailed when the repository does not exist, and prints no diff', async () => {
    const file = manifest('missing', GREET_TURNS, { repository: { url: `file://${work}/no-such-repo` } });
    const result = await codingrun(['run', '-f', file, '--local'], withRedis());
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/CloneFailed\s+git clone failed/);
    expect(result.stderr).toContain('kubectl-codingrun: codingrun/missing Failed (CloneFailed): git clone failed');
    expect(result.stdout).toBe('');
    expect(leftovers()).toEqual([]);
  });

  it.each([
    [
      'an invalid field',
      { budget: { maxSteps: 10, timeout: 'soon' } },
      [],
      /greet-bad\.yaml: codingrun\/greet-bad: spec\.budget\.timeout: must be a duration/,
    ],
    [
      'a cross-field rule',
      { model: { provider: 'scripted', scriptRef: { name: 'greet-bad-script' }, baseURL: 'https://llm.example/v1' } },
      [],
      /spec\.model\.baseURL: baseURL may only be set with provider openai-compatible/,
    ],
    [
      'an option-like repository URL',
      { repository: { url: '--upload-pack=touch /tmp/x' } },
      [],
      /spec\.repository\.url: must be a repository URL without spaces that does not start with "-"/,
    ],
    [
      'a remote helper',
      { repository: { url: 'ext::sh' } },
      [],
      /RepoNotAllowed: repository ext::sh is refused because it uses a git remote helper/,
    ],
    [
      'a ConfigMap missing from the file',
      { model: { provider: 'scripted', scriptRef: { name: 'elsewhere' } } },
      [],
      /ConfigMapNotFound: ConfigMap default\/elsewhere named in spec\.model\.scriptRef does not exist; add it to the file/,
    ],
    [
      'an API key in neither the file nor the environment',
      { model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'openai' } } },
      [],
      /spec\.model\.apiKeySecretRef names Secret openai \(key "apiKey"\), which is not in the file; add the Secret to the file or set CHAMVI_API_KEY or OPENAI_API_KEY/,
    ],
  ])('refuses a file with %s: exit 1, naming the field, before starting anything', async (_, spec, extra, message) => {
    const result = await codingrun(['run', '-f', manifest('greet-bad', GREET_TURNS, spec, extra), '--local'], withRedis());
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).not.toContain('Accepted');
    expect(result.stdout).toBe('');
  });

  it('refuses a file without a CodingRun, and a missing file, with exit 1', async () => {
    const empty = path.join(work, 'only-configmap.yaml');
    writeFileSync(empty, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n');
    const noRun = await codingrun(['run', '-f', empty, '--local']);
    expect(noRun.code).toBe(1);
    expect(noRun.stderr).toContain('only-configmap.yaml holds no CodingRun');
    const missing = await codingrun(['run', '-f', path.join(work, 'nope.yaml'), '--local']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('cannot read');
    expect(missing.stderr).toContain('no such file');
  });

  it('exits 2 on a bad command line', async () => {
    const withoutLocal = await codingrun(['run', '-f', 'x.yaml']);
    expect(withoutLocal.code).toBe(2);
    expect(withoutLocal.stderr).toContain('run needs --local');
    const badRedis = await codingrun(['run', '-f', 'x.yaml', '--local', '--redis-url', 'localhost:6379']);
    expect(badRedis.code).toBe(2);
    expect(badRedis.stderr).toContain('--redis-url must be a redis:// or rediss:// URL');
  });

  it('denies a gated call without a terminal, with the reason, and the run goes on', async () => {
    const turns: Turn[] = [{ toolCalls: [{ toolName: 'bash', input: { command: 'echo ran > proof.txt' } }] }, { text: 'Tried.' }];
    const result = await codingrun(['run', '-f', manifest('gated', turns, { approval: { tools: ['bash'] } }), '--local'], withRedis());
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/AwaitingApproval\s+bash call s1-c1 waits for approval: \{"command":"echo ran > proof.txt"\}/);
    expect(result.stderr).toMatch(/Denied\s+bash call s1-c1 denied \(approver not recorded\): no terminal to approve on/);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('codingrun/gated changed nothing: its diff is empty');
  });

  const hasScript = spawnSync('script', ['--version']).status === 0;
  it.skipIf(!hasScript)('asks on a terminal and runs an approved call', async () => {
    const turns: Turn[] = [
      { toolCalls: [{ toolName: 'bash', input: { command: 'echo approved > proof.txt' } }] },
      { text: 'Wrote proof.txt.' },
    ];
    const file = manifest('asked', turns, { approval: { tools: ['bash'] } });
    // script(1) gives the plugin a pseudo-terminal; what the test writes to script's stdin is typed there.
    const command = [process.execPath, pluginPath, 'run', '-f', file, '--local'].map((word) => `'${word}'`).join(' ');
    const child = spawn('script', ['-qec', command, '/dev/null'], {
      cwd: work,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? work, TMPDIR: pluginTmp, REDIS_URL: redisUrl(), TERM: 'dumb' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const deadline = Date.now() + 60_000;
    while (!output.includes('Approve? [y/N]') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(output).toMatch(/codingrun\/asked wants to run bash \(approval s1-c1\), input \d+ bytes, shown whole:/);
    // Not within TYPE_AHEAD_MS of the question: that is taken for type-ahead and ignored.
    await new Promise((resolve) => setTimeout(resolve, TYPE_AHEAD_MS + 200));
    child.stdin.write('y\n');
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    child.stdin.end();
    expect(output).toMatch(/Approved\s+bash call s1-c1 approved/);
    expect(output).toContain('+approved');
    expect(code).toBe(0);
  });

  it('stops on Ctrl-C (SIGINT) mid-run: exit 1, and no redis-server, tool process or sandbox directory is left', async () => {
    const turns: Turn[] = [{ toolCalls: [{ toolName: 'bash', input: { command: 'sleep 297', timeoutMs: 600_000 } }] }, { text: 'Slept.' }];
    const run = start(['run', '-f', manifest('slow', turns), '--local']);
    const deadline = Date.now() + 60_000;
    while (!/step 1|Prepared/.test(run.stderr()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    const sleeping = () => spawnSync('pgrep', ['-f', 'sleep 297'], { encoding: 'utf8' }).stdout.trim();
    while (!sleeping() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(sleeping()).not.toBe('');
    const pid = Number(/redis-server pid (\d+)/.exec(run.stderr())?.[1]);
    // Without this, a line that no longer names the pid gives NaN, and alive(NaN) is false: the check below would pass unseen.
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(true);
    process.kill(run.pid, 'SIGINT');
    const result = await run.result;
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('interrupted: codingrun/slow was stopped before it finished');
    expect(alive(pid)).toBe(false);
    expect(sleeping()).toBe('');
    expect(leftovers()).toEqual([]);
  });
});
