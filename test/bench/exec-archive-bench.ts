// The archive part of `make bench-exec` (#17.3): a repository of some size sent into a pod. The
// operator's way is a session import over pods/exec, the archive read as prepare-job reads it
// (archive-stream.ts). Beside it, in the same run and on the same pod: `kubectl exec -i` of the
// same archive into the same toolbox's `import` (the peer: what a user would script), and the
// toolbox alone (a local session import, no exec). Each is timed, and the client's CPU is
// counted: the operator's CPU per MiB sent is paid once per run by a replica that imports
// many runs' repositories, on top of the pod's own work.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { archiveReadStream } from '../../operator/src/workers/archive-stream.ts';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { latencyFigure, type LatencyFigure } from './latency-figures.ts';

const run = promisify(execFile);

export interface ArchivePathFigures {
  wallMs: LatencyFigure;
  /** CPU of the sending side only (this process, or kubectl), user + system. */
  clientCpuMs: LatencyFigure;
}

export interface ArchiveFigures {
  archiveBytes: number;
  files: number;
  sessionImportOverExec: ArchivePathFigures;
  kubectlExecImport: ArchivePathFigures;
  /** Where the toolbox runs on this machine (kwok); not on the real node, whose pod has its own root. */
  localSessionImport?: { wallMs: LatencyFigure };
}

export interface ArchiveBenchOptions {
  files: number;
  fileBytes: number;
  runs: number;
  /** A new serve session over pods/exec into the pod (the operator's path). */
  execSandbox: () => Sandbox;
  /** A new serve session of the same toolbox on this machine, into the same workspace (kwok only). */
  localSandbox?: () => Sandbox;
  /** kubectl's argv (after the binary) for `kubectl exec -i ... -- toolbox import`. */
  kubectl: { binary: string; args: readonly string[] };
}

/** A repository of `files` files of `fileBytes` random bytes each, archived as prepare-job archives a clone. */
async function makeArchive(files: number, fileBytes: number): Promise<{ archive: string; cleanup: () => void }> {
  const root = mkdtempSync(path.join(tmpdir(), 'chamvi-exec-archive-'));
  const tree = path.join(root, 'tree');
  mkdirSync(path.join(tree, 'src'), { recursive: true });
  for (let index = 0; index < files; index += 1) writeFileSync(path.join(tree, 'src', `file-${index}.bin`), randomBytes(fileBytes));
  const archive = path.join(root, 'workspace.tar');
  await run('tar', ['-C', tree, '-cf', archive, '.']);
  return { archive, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** Runs `sandbox`'s import of the archive in a session it opened first (the session start is not the figure). */
async function sessionImport(sandbox: Sandbox, archive: string): Promise<{ wallMs: number; cpuMs: number }> {
  try {
    await sandbox.open?.();
    const cpu = process.cpuUsage();
    const started = performance.now();
    await sandbox.importTree(archiveReadStream(archive));
    const wallMs = performance.now() - started;
    const used = process.cpuUsage(cpu);
    return { wallMs, cpuMs: (used.user + used.system) / 1000 };
  } finally {
    await sandbox.close();
  }
}

/** kubectl exec -i with the archive on stdin; bash's `times` gives the CPU kubectl used. */
async function kubectlImport(kubectl: ArchiveBenchOptions['kubectl'], archive: string): Promise<{ wallMs: number; cpuMs: number }> {
  const started = performance.now();
  const { stdout } = await run(
    'bash',
    ['-c', '"$@" < "$ARCHIVE" > /dev/null && times', 'kubectl-import', kubectl.binary, ...kubectl.args],
    {
      env: { ...process.env, ARCHIVE: archive },
    },
  );
  const wallMs = performance.now() - started;
  // `times` prints the shell's own user/system times, then its children's: "0m0.061s 0m0.030s".
  const children = stdout.trim().split('\n').at(-1)!.split(/\s+/).map(secondsOf);
  return { wallMs, cpuMs: (children[0]! + children[1]!) * 1000 };
}

function secondsOf(time: string): number {
  const match = /^(\d+)m([\d.]+)s$/.exec(time);
  if (!match) throw new Error(`not a bash time: ${time}`);
  return Number(match[1]) * 60 + Number(match[2]);
}

export async function benchArchiveImport(options: ArchiveBenchOptions): Promise<ArchiveFigures> {
  const { archive, cleanup } = await makeArchive(options.files, options.fileBytes);
  try {
    const ours = { wall: [] as number[], cpu: [] as number[] };
    const peer = { wall: [] as number[], cpu: [] as number[] };
    const local: number[] = [];
    // Alternating, after one unmeasured round, so a noisy moment of the machine hits all three.
    for (let round = -1; round < options.runs; round += 1) {
      const exec = await sessionImport(options.execSandbox(), archive);
      const kubectl = await kubectlImport(options.kubectl, archive);
      const alone = options.localSandbox ? await sessionImport(options.localSandbox(), archive) : undefined;
      if (round < 0) continue;
      ours.wall.push(exec.wallMs);
      ours.cpu.push(exec.cpuMs);
      peer.wall.push(kubectl.wallMs);
      peer.cpu.push(kubectl.cpuMs);
      if (alone) local.push(alone.wallMs);
    }
    const figure = (samples: readonly number[]) => latencyFigure(samples, 1);
    return {
      archiveBytes: statSync(archive).size,
      files: options.files,
      sessionImportOverExec: { wallMs: figure(ours.wall), clientCpuMs: figure(ours.cpu) },
      kubectlExecImport: { wallMs: figure(peer.wall), clientCpuMs: figure(peer.cpu) },
      ...(local.length > 0 ? { localSessionImport: { wallMs: figure(local) } } : {}),
    };
  } finally {
    cleanup();
  }
}

export function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows) console.log(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  '));
}

export function printArchiveTable(archive: ArchiveFigures): void {
  const megabytes = (archive.archiveBytes / 1_048_576).toFixed(1);
  const runs = archive.sessionImportOverExec.wallMs.n;
  console.log(`\nA ${megabytes} MiB workspace archive (${archive.files} files) into the pod, ${runs} runs each:`);
  const row = (path: string, figures: ArchivePathFigures) => [
    path,
    figures.wallMs.p50.toFixed(0),
    figures.wallMs.max.toFixed(0),
    figures.clientCpuMs.p50.toFixed(0),
  ];
  const local = archive.localSessionImport?.wallMs;
  printTable([
    ['path', 'wall p50 ms', 'wall max ms', 'client CPU p50 ms'],
    row("session import over pods/exec (the operator's path)", archive.sessionImportOverExec),
    row('kubectl exec -i of the archive into `toolbox import`', archive.kubectlExecImport),
    ...(local ? [['toolbox alone: a local session import', local.p50.toFixed(0), local.max.toFixed(0), '-']] : []),
  ]);
}
