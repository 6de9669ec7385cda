// Benchmark of the toolbox (`make bench-toolbox`): latency of a small read_file through `call`
// (one node process per request) and through a kept `serve` session, and grep for a literal in
// a generated 20 000-file git repository against running rg directly on it, in the same run.
// Prints a table and writes test/bench/results/toolbox.json. Goals: serve p50 < 2 ms, grep
// within 1.3x of bare rg.
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createLocalSandbox, type LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';

const run = promisify(execFile);
const resultsFile = fileURLToPath(new URL('./results/toolbox.json', import.meta.url));
const FILES = 20_000;
const NEEDLE = 'chamvi_bench_needle_literal';

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

async function main(): Promise<void> {
  const base = mkdtempSync(path.join(tmpdir(), 'chamvi-bench-'));
  const small = path.join(base, 'small');
  const repo = path.join(base, 'repo');
  mkdirSync(small);
  mkdirSync(repo);
  writeFileSync(path.join(small, 'small.txt'), 'a small file\nof three\nlines\n');
  try {
    const callSandbox = await createLocalSandbox({ mode: 'call', workspaceDir: small, homeDir: path.join(base, 'home-call') });
    const serveSandbox = await createLocalSandbox({ mode: 'serve', workspaceDir: small, homeDir: path.join(base, 'home-serve') });
    const readCall = await latency(callSandbox, 3, 40);
    const readServe = await latency(serveSandbox, 200, 2_000);
    // bash starts a shell per command (state lives in files): this is that cost.
    const bashServe = await latency(serveSandbox, 20, 200, { tool: 'bash', input: { command: 'true' } });
    await callSandbox.close();
    await serveSandbox.close();

    process.stdout.write(`generating a ${FILES}-file git repository...\n`);
    const planted = generateRepository(repo);
    const grepSandbox = await createLocalSandbox({ mode: 'serve', workspaceDir: repo, homeDir: path.join(base, 'home-grep') });
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
      cpus: cpus().length,
      // The machine is shared (other builds run): the 1-minute load average at the end.
      loadAverage1m: round(loadavg()[0] ?? 0),
      readFile: {
        call: { ...readCall, unit: 'ms' },
        serve: { ...readServe, unit: 'ms' },
      },
      bashTrue: { serve: { ...bashServe, unit: 'ms' } },
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
    const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
    for (const row of rows) process.stdout.write(`${row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ')}\n`);
    process.stdout.write(`load average ${results.loadAverage1m} on ${results.cpus} cpus\n`);
    process.stdout.write(`written to ${path.relative(process.cwd(), resultsFile)}\n`);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
