// Benchmark of the toolbox (`make bench-toolbox`): latency of a small read_file through `call`
// (one node process per request) and through a kept `serve` session, grep for a literal in a
// generated 20 000-file git repository against running rg directly on it, and bash's own cost
// when the sandbox holds many processes (`true` and bash_kill of a job with 100 and 2 000 idle
// processes alive, against the same done directly), in the same run. Prints tables and writes
// test/bench/results/toolbox.json. Goals: serve p50 < 2 ms, grep within 1.3x of bare rg.
//
//   npx tsx test/bench/toolbox-bench.ts [--toolbox BUNDLE] [--out FILE]
//
// --toolbox measures another build of the toolbox (an older commit's, bundled elsewhere) and
// --out writes its results elsewhere, so `make bench`'s file keeps this checkout's figures.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { createLocalSandbox, DEFAULT_TOOLBOX_PATH, type LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { processTableNow } from '../../sandbox-image/toolbox/process-table.ts';

const run = promisify(execFile);
const { values: options } = parseArgs({ options: { toolbox: { type: 'string' }, out: { type: 'string' } } });
const toolboxPath = path.resolve(options.toolbox ?? DEFAULT_TOOLBOX_PATH);
const resultsFile = options.out ? path.resolve(options.out) : fileURLToPath(new URL('./results/toolbox.json', import.meta.url));
const FILES = 20_000;
const NEEDLE = 'chamvi_bench_needle_literal';
/** How many idle processes the sandbox holds while bash is timed: a small project, and a busy one (a test suite's workers, a build). */
const IDLE_PROCESS_COUNTS = [100, 2_000] as const;
/** The idle processes end on their own after this, should every other way to stop them fail. */
const IDLE_LIFETIME_S = 1_800;

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}
const round = (value: number) => Math.round(value * 1000) / 1000;

async function time(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function latency(
  sandbox: LocalSandbox,
  warmup: number,
  samples: number,
  request: { tool: string; input: unknown } = { tool: 'read_file', input: { path: 'small.txt' } },
): Promise<{ p50: number; p99: number; n: number }> {
  for (let index = 0; index < warmup; index += 1) await sandbox.call(request);
  const times: number[] = [];
  for (let index = 0; index < samples; index += 1) {
    times.push(
      await time(async () => {
        const response = await sandbox.call(request);
        if (!response.ok) throw new Error(response.error.message);
      }),
    );
  }
  return { p50: round(percentile(times, 50)), p99: round(percentile(times, 99)), n: samples };
}

interface Spread {
  p50: number;
  p95: number;
  n: number;
}

function spread(times: number[]): Spread {
  return { p50: round(percentile(times, 50)), p95: round(percentile(times, 95)), n: times.length };
}

/**
 * `count` idle processes (`sleep`) on this machine, where the local sandbox's toolbox sees every
 * process, as a pod's toolbox sees the pod's. They are children of one shell in its own process
 * group that kills and reaps them when its stdin closes: at stop(), or when this process ends in
 * any way at all (SIGKILL included), since only this process holds the pipe's other end. They are
 * reaped by that shell, not left to PID 1, which in a container may never reap them; and they end
 * on their own after IDLE_LIFETIME_S should the shell itself be killed.
 */
async function startIdleProcesses(count: number): Promise<{ stop: () => Promise<void>; alive: () => number }> {
  const script = `
for ((i = 0; i < $1; i++)); do sleep "$2" </dev/null >/dev/null 2>&1 & done
echo started
read -r _
exec 2>/dev/null # bash would report every killed sleep
kill -KILL $(jobs -p)
wait`;
  const holder = spawn('bash', ['-c', script, 'chamvi-bench-idle', String(count), String(IDLE_LIFETIME_S)], {
    detached: true, // its own group: a Ctrl-C to the bench reaches the bench, whose exit closes the pipe
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => holder.once('exit', () => resolve()));
  const stop = async () => {
    if (holder.pid === undefined) return; // never started: nothing to stop
    holder.stdin?.end();
    await Promise.race([exited, delay(10_000)]);
    if (holder.exitCode === null && holder.signalCode === null) killGroup(holder, 'SIGKILL');
    await exited;
  };
  const alive = () =>
    processTableNow().filter((entry) => entry.pgid === holder.pid && entry.pid !== holder.pid && entry.state !== 'Z').length;
  try {
    await new Promise<void>((resolve, reject) => {
      holder.once('error', reject);
      holder.once('exit', () => reject(new Error('the shell holding the idle processes exited before starting them')));
      holder.stdout?.once('data', () => resolve());
    });
    // `&` returns once forked; wait until every one is sleep, not a shell on its way to exec it.
    const deadline = Date.now() + 30_000;
    while (alive() < count && Date.now() < deadline) await delay(50);
    if (alive() < count) throw new Error(`only ${alive()} of ${count} idle processes started`);
  } catch (error) {
    await stop();
    throw error;
  }
  return { stop, alive };
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-(child.pid as number), signal);
  } catch {
    // Gone already.
  }
}

/** How many processes /proc lists on this machine (the bench's, the toolbox's and anyone else's). */
const processesOnMachine = () => processTableNow().length;

/**
 * bash running `true` through the serve session, alternating with the same `bash -c true` spawned
 * directly (the peer: what the shell itself costs here), and bash_kill of a background job
 * (`sleep`) against SIGTERM to a plain process group (`sleep` spawned directly) until its exit is
 * seen: with `idle` idle processes alive besides.
 */
async function withIdleProcesses(sandbox: LocalSandbox, idle: number) {
  const processes = await startIdleProcesses(idle);
  try {
    const call = async (request: { tool: string; input: unknown }) => {
      const response = await sandbox.call(request);
      if (!response.ok) throw new Error(response.error.message);
      return response.result as Record<string, unknown>;
    };
    const bashTrue = () => call({ tool: 'bash', input: { command: 'true' } });
    const bareTrue = () => run('bash', ['-c', 'true']);
    for (let index = 0; index < 10; index += 1) await Promise.all([bashTrue(), bareTrue()]);
    const toolboxTimes: number[] = [];
    const bareTimes: number[] = [];
    for (let index = 0; index < 100; index += 1) {
      toolboxTimes.push(await time(bashTrue));
      bareTimes.push(await time(bareTrue));
    }
    const killTimes: number[] = [];
    const bareKillTimes: number[] = [];
    for (let index = 0; index < 20; index += 1) {
      const { job } = await call({ tool: 'bash', input: { command: 'sleep 600', background: true } });
      const plain = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
      const plainExited = new Promise((resolve) => plain.once('exit', resolve));
      try {
        // Both are running (the job's wrapper has set itself up) before either is stopped.
        await delay(200);
        killTimes.push(
          await time(async () => {
            const result = await call({ tool: 'bash_kill', input: { job } });
            if (result.status !== 'killed') throw new Error(`bash_kill left job ${String(job)} ${String(result.status)}`);
          }),
        );
        bareKillTimes.push(
          await time(async () => {
            killGroup(plain, 'SIGTERM');
            await plainExited;
          }),
        );
      } finally {
        // Only while it was not reaped: after that its pid may be another process's.
        if (plain.exitCode === null && plain.signalCode === null) killGroup(plain, 'SIGKILL');
      }
    }
    const stillAlive = processes.alive();
    if (stillAlive < idle) throw new Error(`${idle - stillAlive} of the ${idle} idle processes ended during the measurement`);
    return {
      idleProcesses: idle,
      processesOnMachine: processesOnMachine(),
      bashTrue: { toolbox: spread(toolboxTimes), bareBash: spread(bareTimes), unit: 'ms' },
      bashKill: { toolbox: spread(killTimes), bareGroupKill: spread(bareKillTimes), unit: 'ms' },
    };
  } finally {
    await processes.stop();
  }
}

function generateRepository(root: string): number {
  let planted = 0;
  for (let index = 0; index < FILES; index += 1) {
    const directory = path.join(root, `pkg-${Math.floor(index / 500)}`, `mod-${Math.floor(index / 50) % 10}`);
    if (index % 50 === 0) mkdirSync(directory, { recursive: true });
    const lines = Array.from(
      { length: 40 },
      (_, line) => `export const value_${index}_${line} = ${line * index}; // filler text for the search`,
    );
    if (index % 97 === 0) {
      lines[17] = `const found = "${NEEDLE}";`;
      planted += 1;
    }
    writeFileSync(path.join(directory, `file-${index}.ts`), `${lines.join('\n')}\n`);
  }
  const env = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b' };
  execFileSync('git', ['init', '-q'], { cwd: root });
  execFileSync('git', ['add', '-A'], { cwd: root, env });
  // 20 000 loose objects make `git commit` start `git gc --auto` in the background, which
  // then competes with the measurements and writes into .git while the tree is removed.
  execFileSync('git', ['-c', 'gc.auto=0', '-c', 'maintenance.auto=false', 'commit', '-q', '-m', 'bench'], { cwd: root, env });
  return planted;
}

function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows) process.stdout.write(`${row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ')}\n`);
}

async function main(): Promise<void> {
  const base = mkdtempSync(path.join(tmpdir(), 'chamvi-bench-'));
  const small = path.join(base, 'small');
  const repo = path.join(base, 'repo');
  mkdirSync(small);
  mkdirSync(repo);
  writeFileSync(path.join(small, 'small.txt'), 'a small file\nof three\nlines\n');
  try {
    const sandbox = (mode: 'call' | 'serve', workspaceDir: string, home: string) =>
      createLocalSandbox({ mode, toolboxPath, workspaceDir, homeDir: path.join(base, home) });
    const callSandbox = await sandbox('call', small, 'home-call');
    const serveSandbox = await sandbox('serve', small, 'home-serve');
    const readCall = await latency(callSandbox, 3, 40);
    const readServe = await latency(serveSandbox, 200, 2_000);
    // bash starts a shell per command (state lives in files): this is that cost.
    const bashServe = await latency(serveSandbox, 20, 200, { tool: 'bash', input: { command: 'true' } });
    await callSandbox.close();
    await serveSandbox.close();

    process.stdout.write(`bash with ${IDLE_PROCESS_COUNTS.join(' and ')} idle processes in the sandbox...\n`);
    const busySandbox = await sandbox('serve', small, 'home-busy');
    const busy = [];
    try {
      for (const idle of IDLE_PROCESS_COUNTS) busy.push(await withIdleProcesses(busySandbox, idle));
    } finally {
      await busySandbox.close();
    }

    process.stdout.write(`generating a ${FILES}-file git repository...\n`);
    const planted = generateRepository(repo);
    const grepSandbox = await sandbox('serve', repo, 'home-grep');
    const rgArgs = [
      '--no-config',
      '--no-heading',
      '--with-filename',
      '--line-number',
      '--null',
      '--color=never',
      '--hidden',
      '--glob=!.git',
      '--regexp',
      NEEDLE,
      '--',
      '.',
    ];
    const toolboxTimes: number[] = [];
    const rgTimes: number[] = [];
    let matches = 0;
    let engine = '';
    // Warm the page cache and both paths, then alternate so neither gets a systematic edge.
    await grepSandbox.call({ tool: 'grep', input: { pattern: NEEDLE, limit: 500 } });
    await run('rg', rgArgs, { cwd: repo, maxBuffer: 64 * 1024 * 1024 });
    for (let round_ = 0; round_ < 15; round_ += 1) {
      toolboxTimes.push(
        await time(async () => {
          const response = await grepSandbox.call({ tool: 'grep', input: { pattern: NEEDLE, limit: 500 } });
          if (!response.ok) throw new Error(response.error.message);
          const result = response.result as { matches: unknown[]; engine: string; truncated: boolean };
          matches = result.matches.length;
          engine = result.engine;
        }),
      );
      rgTimes.push(await time(() => run('rg', rgArgs, { cwd: repo, maxBuffer: 64 * 1024 * 1024 })));
    }
    await grepSandbox.close();
    const toolboxMs = percentile(toolboxTimes, 50);
    const rgMs = percentile(rgTimes, 50);
    const ratio = toolboxMs / rgMs;

    const results = {
      generatedAt: new Date().toISOString(),
      node: process.version,
      ...(options.toolbox ? { toolbox: toolboxPath } : {}),
      cpus: cpus().length,
      // The machine is shared (other builds run): the 1-minute load average at the end.
      loadAverage1m: round(loadavg()[0] ?? 0),
      readFile: {
        call: { ...readCall, unit: 'ms' },
        serve: { ...readServe, unit: 'ms' },
      },
      bashTrue: { serve: { ...bashServe, unit: 'ms' } },
      // Through a serve session; the peers are the same shell and kill done directly, same run.
      bashWithIdleProcesses: busy,
      grep: {
        files: FILES,
        planted,
        matches,
        engine,
        toolboxP50Ms: round(toolboxMs),
        rgP50Ms: round(rgMs),
        ratio: round(ratio),
        rounds: toolboxTimes.length,
      },
      goals: { serveP50UnderMs: 2, serveP50Met: readServe.p50 < 2, grepRatioAtMost: 1.3, grepRatioMet: ratio <= 1.3 },
    };
    mkdirSync(path.dirname(resultsFile), { recursive: true });
    writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);

    const rows = [
      ['measure', 'p50 ms', 'p99 ms', 'goal'],
      ['read_file via call (process per request)', readCall.p50.toFixed(2), readCall.p99.toFixed(2), ''],
      [
        'read_file via serve session',
        readServe.p50.toFixed(3),
        readServe.p99.toFixed(3),
        `< 2 ms p50: ${results.goals.serveP50Met ? 'met' : 'MISSED'}`,
      ],
      ['bash "true" via serve session', bashServe.p50.toFixed(2), bashServe.p99.toFixed(2), ''],
      [`grep (${engine}) via serve, ${FILES} files`, toolboxMs.toFixed(2), '', ''],
      ['rg directly, same repository', rgMs.toFixed(2), '', ''],
      ['grep / rg', ratio.toFixed(2), '', `<= 1.3x: ${results.goals.grepRatioMet ? 'met' : 'MISSED'}`],
    ];
    printTable(rows);
    process.stdout.write('\n');
    printTable([
      ['with idle processes in the sandbox', 'p50 ms', 'p95 ms', 'peer (same run)', 'p50 ms', 'p95 ms'],
      ...busy.flatMap((level) => [
        [
          `bash "true" via serve, ${level.idleProcesses} idle (${level.processesOnMachine} on the machine), n=${level.bashTrue.toolbox.n}`,
          level.bashTrue.toolbox.p50.toFixed(2),
          level.bashTrue.toolbox.p95.toFixed(2),
          'bash -c true spawned directly',
          level.bashTrue.bareBash.p50.toFixed(2),
          level.bashTrue.bareBash.p95.toFixed(2),
        ],
        [
          `bash_kill of a job (sleep), ${level.idleProcesses} idle, n=${level.bashKill.toolbox.n}`,
          level.bashKill.toolbox.p50.toFixed(1),
          level.bashKill.toolbox.p95.toFixed(1),
          'SIGTERM to a plain group, to its exit',
          level.bashKill.bareGroupKill.p50.toFixed(2),
          level.bashKill.bareGroupKill.p95.toFixed(2),
        ],
      ]),
    ]);
    process.stdout.write(`load average ${results.loadAverage1m} on ${results.cpus} cpus\n`);
    process.stdout.write(`written to ${path.relative(process.cwd(), resultsFile)}\n`);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
