// What would git contact for a repository URL? Real git, no network: every transport is
// pointed at a recorder on this machine (security #11.2 tests).
// - http(s): `http.proxy` is a loopback TCP server; git/curl send it `CONNECT host:port` (https)
//   or `GET http://host[:port]/path` (http), which is recorded and the connection closed.
// - ssh: GIT_SSH_COMMAND is a script that records its arguments (with ssh.variant=ssh, git
//   passes `[-p port] [user@]host command`) and fails.
// - git://: core.gitProxy is a script that records `host port` and fails.
// - file://: git reads the path itself; ls-remote's output names the repository it read (each
//   test repository has a commit of its own).
// git is run as the operator runs it (`--` before the URL), so an option-like value is a path.
import { spawn } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type GitContact =
  | { kind: 'network'; scheme: 'https' | 'http' | 'ssh' | 'git'; host: string; port: number; user?: string; path?: string }
  | { kind: 'file'; head: string }
  | { kind: 'none'; stderr: string };

const RECORD_SSH = `#!/bin/sh
for argument in "$@"; do printf '%s\\n' "$argument"; done > "$CHAMVI_RECORD_SSH"
exit 1
`;
const RECORD_GIT_PROXY = `#!/bin/sh
printf '%s %s\\n' "$1" "$2" > "$CHAMVI_RECORD_GIT_PROXY"
exit 1
`;

function parseProxyLine(line: string): GitContact | undefined {
  const connect = /^CONNECT (.+):([0-9]+) HTTP\/1\.[01]$/.exec(line);
  if (connect) return { kind: 'network', scheme: 'https', host: connect[1]!, port: Number(connect[2]) };
  const get = /^GET http:\/\/([^/:]+)(?::([0-9]+))?(\/\S*) HTTP\/1\.[01]$/.exec(line);
  if (get) return { kind: 'network', scheme: 'http', host: get[1]!, port: Number(get[2] ?? 80), path: get[3]! };
  return undefined;
}

/** OpenSSH reads `user@host` up to the last `@` as the user. */
function parseSshArguments(args: string[]): GitContact {
  const portIndex = args.indexOf('-p');
  const destination = args[args.length - 2]!;
  const at = destination.lastIndexOf('@');
  return {
    kind: 'network',
    scheme: 'ssh',
    host: at >= 0 ? destination.slice(at + 1) : destination,
    port: portIndex >= 0 ? Number(args[portIndex + 1]) : 22,
    ...(at >= 0 ? { user: destination.slice(0, at) } : {}),
    path: args[args.length - 1]!,
  };
}

/** Runs `git ls-remote -- url` with every transport pointed at a recorder; resolves to what git reached. */
export async function whatGitContacts(url: string): Promise<GitContact> {
  const scratch = mkdtempSync(join(tmpdir(), 'git-contact-'));
  const lines: string[] = [];
  const proxy = createServer((socket) => {
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      const end = buffered.indexOf('\r\n');
      if (end >= 0) {
        lines.push(buffered.slice(0, end));
        socket.destroy();
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const port = (proxy.address() as { port: number }).port;
  const sshScript = join(scratch, 'record-ssh');
  const gitProxyScript = join(scratch, 'record-git-proxy');
  writeFileSync(sshScript, RECORD_SSH);
  writeFileSync(gitProxyScript, RECORD_GIT_PROXY);
  chmodSync(sshScript, 0o755);
  chmodSync(gitProxyScript, 0o755);
  const sshRecord = join(scratch, 'ssh.txt');
  const gitProxyRecord = join(scratch, 'git-proxy.txt');
  try {
    const devNull = openSync('/dev/null', 'r');
    const result = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
      const child = spawn(
        'git',
        [
          '-c',
          `http.proxy=http://127.0.0.1:${port}`,
          '-c',
          `core.gitProxy=${gitProxyScript}`,
          '-c',
          'ssh.variant=ssh',
          'ls-remote',
          '--',
          url,
        ],
        {
          cwd: scratch,
          env: {
            PATH: process.env.PATH,
            HOME: scratch,
            GIT_TERMINAL_PROMPT: '0',
            GIT_CONFIG_NOSYSTEM: '1',
            GIT_CONFIG_GLOBAL: '/dev/null',
            GIT_SSH_COMMAND: sshScript,
            CHAMVI_RECORD_SSH: sshRecord,
            CHAMVI_RECORD_GIT_PROXY: gitProxyRecord,
          },
          // fd 3 read-only /dev/null: the fd:: transport would otherwise wait on it until killed.
          stdio: ['ignore', 'pipe', 'pipe', devNull],
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      child.on('close', () => {
        clearTimeout(timer);
        closeSync(devNull);
        resolve({ stdout, stderr });
      });
    });
    const proxied = lines.map(parseProxyLine).find((contact) => contact !== undefined);
    if (proxied) return proxied;
    const ssh = (() => {
      try {
        return readFileSync(sshRecord, 'utf8');
      } catch {
        return undefined;
      }
    })();
    if (ssh !== undefined) return parseSshArguments(ssh.replace(/\n$/, '').split('\n'));
    const gitProxy = (() => {
      try {
        return readFileSync(gitProxyRecord, 'utf8').trim();
      } catch {
        return undefined;
      }
    })();
    if (gitProxy !== undefined) {
      const [host, gitPort] = gitProxy.split(' ');
      return { kind: 'network', scheme: 'git', host: host!, port: Number(gitPort) };
    }
    const head = /^([0-9a-f]{40})\tHEAD$/m.exec(result.stdout);
    if (head) return { kind: 'file', head: head[1]! };
    return { kind: 'none', stderr: result.stderr.trim() };
  } finally {
    proxy.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
