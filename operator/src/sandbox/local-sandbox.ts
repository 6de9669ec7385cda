// The local-process Sandbox: a workspace directory on this host and the bundled toolbox as a
// child process, per call or as a kept serve session. Used by tests and by a single-host
// setup; the Kubernetes implementation swaps the transport for pods/exec.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readSmallFile } from '../../../sandbox-image/toolbox/bounded-read.ts';
import { LocalProcessTransport } from './local-process-transport.ts';
import type { Sandbox } from './sandbox.ts';
import { ToolboxSandbox, type ToolboxSandboxMode } from './toolbox-sandbox.ts';

/** The bundle `make toolbox` writes, relative to this source file. */
export const DEFAULT_TOOLBOX_PATH = fileURLToPath(new URL('../../../sandbox-image/dist/toolbox.mjs', import.meta.url));

export interface LocalSandboxOptions {
  mode: ToolboxSandboxMode;
  toolboxPath?: string;
  /** Created in the temp directory when omitted, and removed on close. */
  workspaceDir?: string;
  homeDir?: string;
  nodePath?: string;
  env?: NodeJS.ProcessEnv;
  maxResponseBytes?: number;
  defaultTimeoutMs?: number;
}

export interface LocalSandbox extends Sandbox {
  readonly workspaceDir: string;
  readonly homeDir: string;
}

export async function createLocalSandbox(options: LocalSandboxOptions): Promise<LocalSandbox> {
  const owned: string[] = [];
  const workspaceDir = options.workspaceDir ?? (await mkdtemp(path.join(tmpdir(), 'chamvi-workspace-')));
  if (!options.workspaceDir) owned.push(workspaceDir);
  const homeDir = options.homeDir ?? (await mkdtemp(path.join(tmpdir(), 'chamvi-home-')));
  if (!options.homeDir) owned.push(homeDir);
  const transport = new LocalProcessTransport({
    toolboxPath: options.toolboxPath ?? DEFAULT_TOOLBOX_PATH,
    workspaceDir,
    homeDir,
    ...(options.nodePath ? { nodePath: options.nodePath } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  const inner = new ToolboxSandbox(transport, {
    mode: options.mode,
    ...(options.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}),
    ...(options.defaultTimeoutMs ? { defaultTimeoutMs: options.defaultTimeoutMs } : {}),
  });
  return {
    workspaceDir,
    homeDir,
    call: (request, callOptions) => inner.call(request, callOptions),
    importTree: (tar, importOptions) => inner.importTree(tar, importOptions),
    close: async () => {
      await inner.close();
      await killBackgroundJobs(homeDir);
      await Promise.all(owned.map((directory) => rm(directory, { recursive: true, force: true })));
    },
  };
}

/** A pid is a few digits; anything longer is not one. */
const PID_FILE_MAX_BYTES = 64;

/**
 * Background jobs outlive the toolbox by design; on a pod they end with the pod, here they
 * would outlive the sandbox on the host. Their process groups are recorded under the home.
 * Code in the sandbox can write there too, and this runs in the operator's (or the CLI's)
 * process: a pid file that is a FIFO, a symlink (to /dev/zero) or huge is no pid, never
 * waited on nor read to its end (bounded-read.ts).
 */
export async function killBackgroundJobs(homeDir: string): Promise<void> {
  const jobs = await readdir(path.join(homeDir, 'jobs')).catch(() => [] as string[]);
  await Promise.all(
    jobs.map(async (job) => {
      const text = await readSmallFile(path.join(homeDir, 'jobs', job, 'pid'), PID_FILE_MAX_BYTES);
      const pid = Number(text?.toString('utf8').trim() ?? '');
      if (!Number.isSafeInteger(pid) || pid <= 1) return;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }),
  );
}
