// Test fixture for the toolbox tier: a fresh workspace and home per test, and ways to talk to
// the BUNDLED toolbox (sandbox-image/dist/toolbox.mjs) as a real process: one `call`, or a
// kept serve session through the local Sandbox.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLocalSandbox, type LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { decodeResponse, encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolResponse } from '../../sandbox-image/toolbox/contract/tool-results.ts';

export const TOOLBOX = fileURLToPath(new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url));

export interface Workspace {
  root: string;
  home: string;
  /** Writes files (creating directories) relative to the root. */
  write(files: Record<string, string | Buffer>): void;
  git(...args: string[]): string;
  cleanup(): void;
}

export function makeWorkspace(): Workspace {
  const base = mkdtempSync(path.join(tmpdir(), 'chamvi-toolbox-test-'));
  const root = path.join(base, 'workspace');
  const home = path.join(base, 'home');
  mkdirSync(root);
  mkdirSync(home);
  return {
    root,
    home,
    write(files) {
      for (const [name, content] of Object.entries(files)) {
        mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
        writeFileSync(path.join(root, name), content);
      }
    },
    git(...args) {
      return execFileSync('git', args, {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' },
      });
    },
    cleanup() {
      rmSync(base, { recursive: true, force: true });
    },
  };
}

/** Running, as opposed to gone or a zombie (killed, waiting for its adoptive parent to reap it). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

export function link(target: string, at: string): void {
  mkdirSync(path.dirname(at), { recursive: true });
  symlinkSync(target, at);
}

export interface ProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node toolbox.mjs <args>` with stdin, as a separate process. */
export function runToolbox(
  args: string[],
  stdin: string | Buffer,
  options: { cwd?: string; env?: NodeJS.ProcessEnv; toolbox?: string; keepStdinOpen?: boolean } = {},
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [options.toolbox ?? TOOLBOX, ...args], {
      cwd: options.cwd ?? tmpdir(),
      env: options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.on('error', () => undefined);
    if (options.keepStdinOpen) child.stdin.write(stdin);
    else child.stdin.end(stdin);
  });
}

/** One `call` process: the request line in, the parsed response out. */
export async function callTool(
  workspace: Workspace,
  tool: string,
  input: unknown,
  options: { env?: NodeJS.ProcessEnv; extraArgs?: string[]; callId?: string } = {},
): Promise<ToolResponse> {
  const result = await runToolbox(
    ['--root', workspace.root, '--home', workspace.home, ...(options.extraArgs ?? []), 'call'],
    encodeRequest({ tool, input, callId: options.callId }),
    options.env ? { env: options.env } : {},
  );
  if (result.code !== 0) throw new Error(`toolbox exited ${result.code}: ${result.stderr}`);
  const reading = decodeResponse(result.stdout);
  if (reading.kind === 'invalid') throw new Error(`toolbox answered ${reading.message}`);
  return reading.response;
}

/** A kept serve session on the workspace, for tests that make many calls. */
export function openSession(workspace: Workspace, env?: NodeJS.ProcessEnv): Promise<LocalSandbox> {
  return createLocalSandbox({ mode: 'serve', workspaceDir: workspace.root, homeDir: workspace.home, ...(env ? { env } : {}) });
}

/** The result of a successful response, or a failed assertion naming the error. */
export function resultOf<T = Record<string, unknown>>(response: ToolResponse): T {
  if (!response.ok) throw new Error(`expected ok, got ${response.error.code}: ${response.error.message}`);
  return response.result as T;
}

export function errorCodeOf(response: ToolResponse): string | undefined {
  return response.ok ? undefined : response.error.code;
}
