// ToolboxTransport for the local machine: the bundled toolbox run with plain node as a child
// process, on a workspace and home directory of this host.
import { spawn } from 'node:child_process';
import type { ToolboxProcess, ToolboxTransport } from './toolbox-transport.ts';

export interface LocalProcessTransportOptions {
  toolboxPath: string;
  workspaceDir: string;
  homeDir: string;
  nodePath?: string;
  env?: NodeJS.ProcessEnv;
}

export class LocalProcessTransport implements ToolboxTransport {
  constructor(private readonly options: LocalProcessTransportOptions) {}

  start(args: string[]): Promise<ToolboxProcess> {
    const { toolboxPath, workspaceDir, homeDir } = this.options;
    const child = spawn(this.options.nodePath ?? process.execPath, [toolboxPath, '--root', workspaceDir, '--home', homeDir, ...args], {
      cwd: workspaceDir,
      env: this.options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('spawn', () =>
        resolve({
          stdin: child.stdin,
          stdout: child.stdout,
          stderr: child.stderr,
          exited,
          kill: () => {
            // SIGTERM first: the toolbox then kills the commands it is running, which are in
            // their own process groups and would otherwise outlive it.
            if (child.exitCode !== null || child.signalCode !== null) return;
            child.kill('SIGTERM');
            setTimeout(() => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'), 1_000).unref();
          },
        }),
      );
    });
  }
}
