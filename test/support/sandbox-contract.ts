// The ONE contract every Sandbox implementation passes (local process per call, local serve
// session, and later Kubernetes pods/exec), in the manner of hono's shared router suite: the
// behaviour a worker relies on, written once against the port.
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';

export interface SandboxUnderTest {
  sandbox: Sandbox;
  cleanup(): Promise<void>;
}

export interface SandboxContractOptions {
  /** A small bound, to show how an oversized answer is handled. */
  maxResponseBytes?: number;
}

export interface SandboxTraits {
  /**
   * The toolbox runs in the sandbox container, whose every other process the run started
   * (the real node). A local or kwok toolbox is a process of this machine: there it stops only
   * the model's jobs, and a test that leaves a daemon would leave it on the host.
   */
  ownContainer?: boolean;
}

export function describeSandboxContract(
  name: string,
  makeSandbox: (options?: SandboxContractOptions) => Promise<SandboxUnderTest>,
  traits: SandboxTraits = {},
): void {
  describe(`Sandbox contract: ${name}`, () => {
    async function withSandbox(test: (sandbox: Sandbox) => Promise<void>, options?: SandboxContractOptions): Promise<void> {
      const { sandbox, cleanup } = await makeSandbox(options);
      try {
        await test(sandbox);
      } finally {
        await sandbox.close().catch(() => undefined);
        await cleanup();
      }
    }

    it('runs a tool and returns its result (write then read round trip)', () =>
      withSandbox(async (sandbox) => {
        const written = await sandbox.call({ tool: 'write_file', input: { path: 'src/hello.txt', content: 'hello\nworld\n' } });
        expect(written).toEqual({ ok: true, result: { path: 'src/hello.txt', bytes: 12 } });
        const read = await sandbox.call({ tool: 'read_file', input: { path: 'src/hello.txt' } });
        expect(read.ok && read.result).toMatchObject({ path: 'src/hello.txt', content: 'hello\nworld', totalLines: 2 });
      }));

    it('returns tool errors as values, not exceptions', async () =>
      withSandbox(async (sandbox) => {
        const missing = await sandbox.call({ tool: 'read_file', input: { path: 'nope.txt' } });
        expect(missing).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
        const escape = await sandbox.call({ tool: 'read_file', input: { path: '../etc/passwd' } });
        expect(escape).toMatchObject({ ok: false, error: { code: 'OUTSIDE_WORKSPACE' } });
        const invalid = await sandbox.call({ tool: 'read_file', input: { path: 42 } });
        expect(invalid).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
      }));

    it('refuses an unknown tool with a SandboxError (a programming error, not a model one)', () =>
      withSandbox(async (sandbox) => {
        await expect(sandbox.call({ tool: 'rm_rf', input: {} })).rejects.toMatchObject({ name: 'SandboxError', reason: 'PROTOCOL' });
      }));

    it('imports a tar stream as the workspace, then reads from it', () =>
      withSandbox(async (sandbox) => {
        const tar = makeTar([
          { name: 'repo/', type: 'directory' },
          { name: 'repo/README.md', content: '# imported\n' },
          { name: 'repo/link', type: 'symlink', target: 'README.md' },
        ]);
        await sandbox.importTree(chunked(tar, 100));
        const read = await sandbox.call({ tool: 'read_file', input: { path: 'repo/README.md' } });
        expect(read.ok && read.result).toMatchObject({ content: '# imported' });
        const throughLink = await sandbox.call({ tool: 'read_file', input: { path: 'repo/link' } });
        expect(throughLink.ok && throughLink.result).toMatchObject({ content: '# imported' });
      }));

    it('imports an archive of several MiB whole, sent in chunks of a MiB and more', () =>
      withSandbox(async (sandbox) => {
        // The operator reads an archive a MiB at a time (archive-stream.ts); a chunk larger than
        // a frame is cut, and each frame's header and data go out as one write (serve-session.ts).
        const content = randomBytes(2_100_000).toString('base64');
        const tar = makeTar([{ name: 'big.txt', content }]);
        expect(tar.length).toBeGreaterThan(2.5 * 1_048_576);
        await sandbox.importTree(chunked(tar, 1_048_576 + 1));
        const sum = await sandbox.call({ tool: 'bash', input: { command: 'sha256sum big.txt' } });
        expect(sum.ok && (sum.result as { stdout: string }).stdout).toContain(createHash('sha256').update(content).digest('hex'));
      }));

    it('refuses an archive whose entries would land outside the workspace', () =>
      withSandbox(async (sandbox) => {
        const tar = makeTar([{ name: '../escaped.txt', content: 'x' }]);
        const failure = await sandbox.importTree(chunked(tar, 512)).catch((error: unknown) => error);
        expect(SandboxError.isInstance(failure) && failure.reason).toBe('IMPORT_REFUSED');
        expect((failure as SandboxError).toolErrorCode).toBe('OUTSIDE_WORKSPACE');
      }));

    it('refuses file-tool edits of protected paths with PROTECTED_PATH, by the path the write would land on', () =>
      withSandbox(async (sandbox) => {
        const protect = ['test/**', 'package.json'];
        await sandbox.call({ tool: 'write_file', input: { path: 'test/a.test.sh', content: 'exit 1\n' } });
        await sandbox.call({ tool: 'bash', input: { command: 'ln -s test alias' } });
        for (const path of [
          'test/a.test.sh',
          '/workspace/test/a.test.sh',
          'src/../test/a.test.sh',
          'alias/a.test.sh',
          'test/new.sh',
          'package.json',
        ]) {
          const write = await sandbox.call({ tool: 'write_file', input: { path, content: 'exit 0\n' }, protect });
          expect([path, write.ok ? 'ok' : write.error.code]).toEqual([path, 'PROTECTED_PATH']);
        }
        const edit = await sandbox.call({ tool: 'edit_file', input: { path: 'test/a.test.sh', oldString: '1', newString: '0' }, protect });
        expect(edit).toMatchObject({ ok: false, error: { code: 'PROTECTED_PATH' } });
        const read = await sandbox.call({ tool: 'read_file', input: { path: 'test/a.test.sh' }, protect });
        expect(read.ok && read.result).toMatchObject({ content: 'exit 1' });
        // Only the globs' paths: the code under test stays writable.
        const other = await sandbox.call({ tool: 'write_file', input: { path: 'src/tested.sh', content: 'x\n' }, protect });
        expect(other.ok).toBe(true);
      }));

    it('runs a clean bash without the session state the model left', () =>
      withSandbox(async (sandbox) => {
        await sandbox.call({ tool: 'bash', input: { command: 'export CHEAT=1; mkdir -p sub; cd sub' } });
        const session = await sandbox.call({ tool: 'bash', input: { command: 'echo "${CHEAT:-none} $(basename "$PWD")"' } });
        expect(session.ok && (session.result as { stdout: string }).stdout).toBe('1 sub\n');
        const clean = await sandbox.call({ tool: 'bash', input: { command: 'echo "${CHEAT:-none} $(basename "$PWD")"' }, clean: true });
        expect(clean.ok && (clean.result as { stdout: string }).stdout).not.toContain('1 sub');
        expect(clean.ok && (clean.result as { stdout: string }).stdout).toMatch(/^none /);
      }));

    it('prunes the protected paths before an import, so they become exactly the archive', () =>
      withSandbox(async (sandbox) => {
        await sandbox.call({ tool: 'write_file', input: { path: 'test/a.test.sh', content: 'exit 0 # cheated\n' } });
        await sandbox.call({ tool: 'write_file', input: { path: 'test/added-by-model.sh', content: 'exit 0\n' } });
        await sandbox.call({ tool: 'write_file', input: { path: 'src/kept.sh', content: 'kept\n' } });
        await sandbox.importTree(chunked(makeTar([{ name: 'test/a.test.sh', content: 'exit 1\n' }]), 512), { prune: ['test'] });
        const restored = await sandbox.call({ tool: 'read_file', input: { path: 'test/a.test.sh' } });
        expect(restored.ok && restored.result).toMatchObject({ content: 'exit 1' });
        const added = await sandbox.call({ tool: 'read_file', input: { path: 'test/added-by-model.sh' } });
        expect(added).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
        const kept = await sandbox.call({ tool: 'read_file', input: { path: 'src/kept.sh' } });
        expect(kept.ok && kept.result).toMatchObject({ content: 'kept' });
      }));

    it('restores a protected directory the model replaced with a symlink as a real directory', () =>
      withSandbox(async (sandbox) => {
        await sandbox.call({
          tool: 'bash',
          input: { command: 'mkdir -p fake && echo "exit 0" > fake/a.test.sh && echo "exit 0" > fake/extra.sh && ln -s fake test' },
        });
        await sandbox.importTree(chunked(makeTar([{ name: 'test/a.test.sh', content: 'exit 1\n' }]), 512), { prune: ['test/**'] });
        const listing = await sandbox.call({ tool: 'bash', input: { command: 'test -L test && echo link; ls test; cat fake/a.test.sh' } });
        expect(listing.ok && (listing.result as { stdout: string }).stdout).toBe('a.test.sh\nexit 0\n');
      }));

    it('stops the background jobs the model left before a restore and a clean check, so none writes over them', () =>
      withSandbox(async (sandbox) => {
        const loop = "while true; do echo 'exit 0' > test/a.test.sh; sleep 0.05; done";
        const job = await sandbox.call({ tool: 'bash', input: { command: `mkdir -p test; ${loop}`, background: true } });
        expect(job.ok).toBe(true);
        await sandbox.importTree(chunked(makeTar([{ name: 'test/a.test.sh', content: 'exit 1\n' }]), 512), { prune: ['test/**'] });
        const check = await sandbox.call({ tool: 'bash', input: { command: 'sleep 0.5; cat test/a.test.sh' }, clean: true });
        expect(check.ok && (check.result as { stdout: string }).stdout).toBe('exit 1\n');
      }));

    it.skipIf(!traits.ownContainer)('stops every process the model left, one in no job included, before a restore and a clean check', () =>
      withSandbox(async (sandbox) => {
        const loop = "while true; do echo 'exit 0' > test/a.test.sh; sleep 0.05; done";
        const started = await sandbox.call({
          tool: 'bash',
          input: { command: `mkdir -p test; nohup sh -c "${loop}" > /dev/null 2>&1 < /dev/null & echo $!` },
        });
        const pid = started.ok ? (started.result as { stdout: string }).stdout.trim() : '';
        expect(pid).toMatch(/^[0-9]+$/);
        await sandbox.importTree(chunked(makeTar([{ name: 'test/a.test.sh', content: 'exit 1\n' }]), 512), { prune: ['test/**'] });
        const check = await sandbox.call({ tool: 'bash', input: { command: 'sleep 0.5; cat test/a.test.sh' }, clean: true });
        expect(check.ok && (check.result as { stdout: string }).stdout).toBe('exit 1\n');
        // Gone (tini reaps it), and the session that asked still answers.
        const after = await sandbox.call({ tool: 'bash', input: { command: `cut -d' ' -f3 /proc/${pid}/stat 2>/dev/null || echo gone` } });
        expect(after.ok && (after.result as { stdout: string }).stdout.trim()).toMatch(/^(gone|Z)$/);
      }),
    );

    it('answers concurrent requests, each with its own result', () =>
      withSandbox(async (sandbox) => {
        const names = Array.from({ length: 12 }, (_, index) => `file-${index}.txt`);
        await Promise.all(names.map((file) => sandbox.call({ tool: 'write_file', input: { path: file, content: `content of ${file}` } })));
        const reads = await Promise.all(names.map((file) => sandbox.call({ tool: 'read_file', input: { path: file } })));
        reads.forEach((read, index) => {
          expect(read.ok && read.result).toMatchObject({ path: names[index], content: `content of ${names[index]}` });
        });
      }));

    it('applies concurrent edits of one file one after the other, so all of them land', () =>
      withSandbox(async (sandbox) => {
        const slots = Array.from({ length: 8 }, (_, index) => `slot ${index}: empty`);
        await sandbox.call({ tool: 'write_file', input: { path: 'slots.txt', content: `${slots.join('\n')}\n` } });
        const edits = await Promise.all(
          slots.map((slot) =>
            sandbox.call({ tool: 'edit_file', input: { path: 'slots.txt', oldString: slot, newString: slot.replace('empty', 'filled') } }),
          ),
        );
        expect(edits.every((edit) => edit.ok)).toBe(true);
        const read = await sandbox.call({ tool: 'read_file', input: { path: 'slots.txt' } });
        expect(read.ok && (read.result as { content: string }).content).not.toContain('empty');
      }));

    it('gives up on a call that does not answer in time, and keeps working', () =>
      withSandbox(async (sandbox) => {
        const started = Date.now();
        const hung = await sandbox
          .call({ tool: 'bash', input: { command: 'sleep 5' } }, { timeoutMs: 300 })
          .catch((error: unknown) => error);
        expect(SandboxError.isInstance(hung) && hung.reason).toBe('TIMEOUT');
        expect(Date.now() - started).toBeLessThan(3_000);
        const next = await sandbox.call({ tool: 'bash', input: { command: 'echo still here' } });
        expect(next.ok && next.result).toMatchObject({ stdout: 'still here\n' });
      }));

    it('takes the late answer of a call it gave up on in stride: the calls after it are answered', () =>
      withSandbox(async (sandbox) => {
        // A kept session refuses output that answers no call (serve-session.ts), but the answer
        // of a call given up at its deadline may still come: here while the next call runs.
        const late = await sandbox
          .call({ tool: 'bash', input: { command: 'sleep 0.4; echo late' } }, { timeoutMs: 100 })
          .catch((error: unknown) => error);
        expect(SandboxError.isInstance(late) && late.reason).toBe('TIMEOUT');
        const during = await sandbox.call({ tool: 'bash', input: { command: 'sleep 1; echo during' } });
        expect(during.ok && during.result).toMatchObject({ stdout: 'during\n' });
        const after = await sandbox.call({ tool: 'bash', input: { command: 'echo after' } });
        expect(after.ok && after.result).toMatchObject({ stdout: 'after\n' });
      }));

    it('honours an AbortSignal', () =>
      withSandbox(async (sandbox) => {
        const controller = new AbortController();
        const call = sandbox.call({ tool: 'bash', input: { command: 'sleep 5' } }, { signal: controller.signal });
        setTimeout(() => controller.abort(), 100);
        await expect(call).rejects.toMatchObject({ reason: 'ABORTED' });
      }));

    it('refuses an answer larger than the bound, and keeps working', () =>
      withSandbox(
        async (sandbox) => {
          await sandbox.call({ tool: 'write_file', input: { path: 'big.txt', content: 'x'.repeat(100).concat('\n').repeat(200) } });
          const oversized = await sandbox.call({ tool: 'read_file', input: { path: 'big.txt' } }).catch((error: unknown) => error);
          expect(SandboxError.isInstance(oversized) && oversized.reason).toBe('RESPONSE_TOO_LARGE');
          const small = await sandbox.call({ tool: 'write_file', input: { path: 'small.txt', content: 'ok' } });
          expect(small.ok).toBe(true);
        },
        { maxResponseBytes: 4_096 },
      ));

    it('keeps the bash working directory and exported variables between calls', () =>
      withSandbox(async (sandbox) => {
        await sandbox.call({ tool: 'bash', input: { command: 'mkdir -p sub/dir && cd sub/dir && export CONTRACT_VALUE=kept' } });
        const next = await sandbox.call({ tool: 'bash', input: { command: 'echo "$CONTRACT_VALUE"; basename "$PWD"' } });
        expect(next.ok && next.result).toMatchObject({ stdout: 'kept\ndir\n', cwd: 'sub/dir' });
      }));

    it('fails a call whose toolbox dies with a SandboxError, and the next call works', () =>
      withSandbox(async (sandbox) => {
        // bash's parent is the toolbox process, whatever the transport.
        const died = await sandbox.call({ tool: 'bash', input: { command: 'kill -9 $PPID; sleep 5' } }).catch((error: unknown) => error);
        expect(SandboxError.isInstance(died) && died.reason).toBe('TRANSPORT');
        const next = await sandbox.call({ tool: 'bash', input: { command: 'echo alive' } });
        expect(next.ok && next.result).toMatchObject({ stdout: 'alive\n' });
      }));

    it('answers a mutating call sent again under its callId from the journal, across a toolbox restart: it applies once', () =>
      withSandbox(async (sandbox) => {
        await sandbox.call({ tool: 'write_file', input: { path: 'hello.txt', content: 'Hello\n' } });
        const edit = {
          tool: 'edit_file',
          input: { path: 'hello.txt', oldString: 'Hello', newString: 'Hello, world' },
          callId: 's3:call_1',
        };
        const first = await sandbox.call(edit);
        expect(first).toEqual({ ok: true, result: { path: 'hello.txt', replacements: 1 } });
        // The worker that sent it died before saving the answer; the session goes with it.
        await sandbox.call({ tool: 'bash', input: { command: 'kill -9 $PPID; sleep 5' } }).catch(() => undefined);
        expect(await sandbox.call(edit)).toEqual(first);
        const read = await sandbox.call({ tool: 'read_file', input: { path: 'hello.txt' } });
        expect(read.ok && read.result).toMatchObject({ content: 'Hello, world' });
        const append = { tool: 'bash', input: { command: 'echo ran >> ran.txt; wc -l < ran.txt' }, callId: 's4:call_2' };
        const ran = await sandbox.call(append);
        expect(await sandbox.call(append)).toEqual(ran);
        expect(ran.ok && ran.result).toMatchObject({ stdout: '1\n' });
      }));

    it('runs a call whose callId names another request, and journals no reads', () =>
      withSandbox(async (sandbox) => {
        await sandbox.call({ tool: 'write_file', input: { path: 'hello.txt', content: 'Hello\n' } });
        const edit = (oldString: string, newString: string) => ({ tool: 'edit_file', input: { path: 'hello.txt', oldString, newString } });
        expect((await sandbox.call({ ...edit('Hello', 'Hello, world'), callId: 'reused' })).ok).toBe(true);
        // A model that reuses an id for another edit gets that edit, not the first one's answer.
        expect(await sandbox.call({ ...edit('world', 'there'), callId: 'reused' })).toMatchObject({ ok: true });
        // Without a callId a repeat is a new call (at least once).
        await sandbox.call(edit('Hello', '>Hello'));
        await sandbox.call(edit('Hello', '>Hello'));
        const read = { tool: 'read_file', input: { path: 'hello.txt' }, callId: 'read-1' };
        expect((await sandbox.call(read)).ok && (await sandbox.call(read))).toMatchObject({
          result: { content: '>>Hello, there' },
        });
        await sandbox.call({ tool: 'write_file', input: { path: 'hello.txt', content: 'changed\n' } });
        expect(await sandbox.call(read)).toMatchObject({ ok: true, result: { content: 'changed' } });
      }));

    it('runs a background job and follows it with bash_output and bash_kill', () =>
      withSandbox(async (sandbox) => {
        const started = await sandbox.call({ tool: 'bash', input: { command: 'echo begun; sleep 30', background: true } });
        const job = (started.ok && (started.result as { job: string }).job) as string;
        expect(job).toMatch(/^job-/);
        let output = await sandbox.call({ tool: 'bash_output', input: { job } });
        for (let attempt = 0; attempt < 50 && output.ok && (output.result as { size: number }).size === 0; attempt += 1) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          output = await sandbox.call({ tool: 'bash_output', input: { job } });
        }
        expect(output.ok && output.result).toMatchObject({ status: 'running', output: 'begun\n' });
        const killed = await sandbox.call({ tool: 'bash_kill', input: { job } });
        expect(killed.ok && killed.result).toMatchObject({ job, status: 'killed' });
      }));

    it('refuses calls once closed', () =>
      withSandbox(async (sandbox) => {
        expect((await sandbox.call({ tool: 'list_files', input: {} })).ok).toBe(true);
        await sandbox.close();
        await expect(sandbox.call({ tool: 'list_files', input: {} })).rejects.toMatchObject({ reason: 'CLOSED' });
      }));
  });
}

export type TarEntry =
  | { name: string; type?: 'file'; content: string | Uint8Array; mode?: number }
  | { name: string; type: 'directory' }
  | { name: string; type: 'symlink' | 'hardlink'; target: string };

/** A ustar archive built in memory, so tests can write entries `tar` itself would refuse. */
export function makeTar(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const header = Buffer.alloc(512);
    const body = entry.type === undefined || entry.type === 'file' ? Buffer.from(entry.content) : Buffer.alloc(0);
    header.write(entry.name, 0, 100, 'utf8');
    const mode = entry.type === 'directory' ? 0o755 : entry.type === undefined || entry.type === 'file' ? (entry.mode ?? 0o644) : 0o777;
    header.write(mode.toString(8).padStart(7, '0'), 100, 'latin1');
    header.write('0000000', 108, 'latin1');
    header.write('0000000', 116, 'latin1');
    header.write(body.length.toString(8).padStart(11, '0'), 124, 'latin1');
    header.write('00000000000', 136, 'latin1');
    const typeFlag = { file: '0', directory: '5', symlink: '2', hardlink: '1' }[entry.type ?? 'file'];
    header.write(typeFlag, 156, 'latin1');
    if (entry.type === 'symlink' || entry.type === 'hardlink') header.write(entry.target, 157, 100, 'utf8');
    header.write('ustar\u000000', 257, 'latin1');
    header.fill(0x20, 148, 156);
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(`${sum.toString(8).padStart(6, '0')}\u0000 `, 148, 'latin1');
    blocks.push(header, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** Delivers a buffer in small chunks, as a network stream would. */
export async function* chunked(data: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < data.length; offset += size) yield data.subarray(offset, offset + size);
}
