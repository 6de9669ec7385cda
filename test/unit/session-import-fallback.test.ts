// A toolbox older than session imports (an image or a warm pool pod from before them) refuses
// the import's request line; the sandbox then imports the old way, the archive unread until
// then. The old toolbox is scripted here with the line it really answers (checked against the
// bundle before session imports: `protocol: unknown tool undefined`).
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';

const OLD_ANSWER = (id: unknown) =>
  `{"id":${JSON.stringify(id)},"ok":false,"error":{"code":"INVALID_INPUT","message":"protocol: unknown tool undefined"}}\n`;

/** A process of streams; `onStdin` answers what the operator writes. */
function scriptedProcess(onStdin: (stdin: PassThrough, stdout: PassThrough) => void): ToolboxProcess {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  let exit!: (value: { code: number | null; signal: string | null }) => void;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => (exit = resolve));
  onStdin(stdin, stdout);
  stdin.on('finish', () => {
    stdout.end();
    exit({ code: 0, signal: null });
  });
  return { stdin, stdout, stderr: new PassThrough(), exited, kill: () => exit({ code: null, signal: 'SIGTERM' }) };
}

/** `serve` as a toolbox before session imports: a tool request is answered, anything else is an unknown tool. */
function oldServe(sessionLines: string[]): ToolboxProcess {
  return scriptedProcess((stdin, stdout) => {
    const splitter = new LineSplitter(1_000_000, {
      line: (line) => {
        sessionLines.push(line);
        const request = JSON.parse(line) as { id: unknown; tool?: string };
        stdout.write(
          request.tool ? `{"id":${JSON.stringify(request.id)},"ok":true,"result":{"tool":"${request.tool}"}}\n` : OLD_ANSWER(request.id),
        );
      },
      oversized: () => undefined,
    });
    stdin.on('data', (chunk: Buffer) => splitter.push(chunk));
  });
}

/** `import`: reads the archive to its end, then answers with its size. */
function oneShotImport(received: Buffer[]): ToolboxProcess {
  return scriptedProcess((stdin, stdout) => {
    stdin.on('data', (chunk: Buffer) => received.push(chunk));
    stdin.on('end', () => stdout.write(`{"ok":true,"result":{"bytes":${Buffer.concat(received).length}}}\n`));
  });
}

describe('a session import into a toolbox older than session imports', () => {
  it('falls back to `toolbox import` with the whole archive, and the session keeps serving', async () => {
    const starts: string[] = [];
    const sessionLines: string[] = [];
    const received: Buffer[] = [];
    const transport: ToolboxTransport = {
      start: (args) => {
        starts.push(args.join(' '));
        return Promise.resolve(args[0] === 'serve' ? oldServe(sessionLines) : oneShotImport(received));
      },
    };
    const sandbox = new ToolboxSandbox(transport, { mode: 'serve' });
    const archive = Buffer.alloc(3000, 7);
    await sandbox.importTree(Readable.from([archive.subarray(0, 1000), archive.subarray(1000)]), { prune: ['test/**'] });
    expect(starts).toEqual(['serve', 'import --prune test/**']);
    expect(Buffer.concat(received).equals(archive)).toBe(true);
    // Only the request line reached the old session: no frame of the archive.
    expect(sessionLines).toEqual([JSON.stringify({ id: 1, import: { prune: ['test/**'] } })]);
    expect(await sandbox.call({ tool: 'git_diff', input: {} })).toEqual({ ok: true, result: { tool: 'git_diff' } });
    await sandbox.close();
  });
});
