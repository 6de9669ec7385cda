// A serve-mode sandbox imports through its kept session (contract/protocol.ts, "session
// import"): the bundled toolbox as a real process, the transport counted.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { countedServeSandboxPerTest } from '../support/counted-serve-sandbox.ts';
import { chunked, makeTar } from '../support/sandbox-contract.ts';
import { makeWorkspace, resultOf } from './toolbox-fixture.ts';

const serve = countedServeSandboxPerTest(makeWorkspace);

const read = (path: string) => serve.sandbox.call({ tool: 'read_file', input: { path } });

/** An archive of first.txt and second.txt that streams its first 700 bytes, then waits for release(). */
function heldArchive() {
  const archive = makeTar([
    { name: 'first.txt', content: 'one\n' },
    { name: 'second.txt', content: 'two\n' },
  ]);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  async function* slowly(): AsyncGenerator<Uint8Array> {
    yield archive.subarray(0, 700);
    await held;
    yield archive.subarray(700);
  }
  return { slowly, release };
}

describe('a serve-mode sandbox imports through its kept session', () => {
  it('starts one toolbox for the session, the import and the calls', async () => {
    await Promise.all([serve.sandbox.open(), serve.sandbox.importTree(chunked(makeTar([{ name: 'a.txt', content: 'alpha\n' }]), 512))]);
    expect(resultOf(await read('a.txt'))).toMatchObject({ content: 'alpha' });
    await serve.sandbox.importTree(chunked(makeTar([{ name: 'b.txt', content: 'beta\n' }]), 512), { prune: ['a.txt'] });
    expect(resultOf(await read('b.txt'))).toMatchObject({ content: 'beta' });
    expect(serve.starts).toEqual(['serve']);
  });

  it('writes a call made while the archive streams after its last frame, and answers it from the whole tree', async () => {
    const { slowly, release } = heldArchive();
    const importing = serve.sandbox.importTree(slowly());
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Written now, this line would land inside the archive's frames.
    const reading = read('second.txt');
    release();
    await importing;
    expect(resultOf(await reading)).toMatchObject({ content: 'two' });
    expect(serve.starts).toEqual(['serve']);
  });

  it('writes a call made during one import after the import queued behind it too, not inside its frames', async () => {
    const { slowly, release } = heldArchive();
    const importing = serve.sandbox.importTree(slowly());
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Queued first, the second import sends its request line the moment the first ends.
    const next = serve.sandbox.importTree(chunked(makeTar([{ name: 'third.txt', content: 'three\n' }]), 512));
    const reading = read('second.txt');
    release();
    await Promise.all([importing, next]);
    expect(resultOf(await reading)).toMatchObject({ content: 'two' });
    expect(resultOf(await read('third.txt'))).toMatchObject({ content: 'three' });
    expect(serve.starts).toEqual(['serve']);
  });

  it("writes a call made during one import before an import made after it, not inside that import's frames", async () => {
    const { slowly, release } = heldArchive();
    const importing = serve.sandbox.importTree(slowly());
    await new Promise((resolve) => setTimeout(resolve, 200));
    const reading = read('second.txt');
    // Made after the call, the second import waits with it for the first to end.
    const next = serve.sandbox.importTree(chunked(makeTar([{ name: 'third.txt', content: 'three\n' }]), 512));
    release();
    await Promise.all([importing, next]);
    expect(resultOf(await reading)).toMatchObject({ content: 'two' });
    expect(resultOf(await read('third.txt'))).toMatchObject({ content: 'three' });
    expect(serve.starts).toEqual(['serve']);
  });

  it('prunes a protected directory whose name is not UTF-8, and a .git the model made in it, but not the workspace .git', async () => {
    serve.workspace.write({ '.git/HEAD': 'ref: refs/heads/main\n', 'tests/ok.py': 'the model edited it\n' });
    // tests/\xff/conftest.py and tests/.git/config, as the model could make them.
    const odd = Buffer.concat([Buffer.from(`${serve.workspace.root}/tests/`), Buffer.from([0xff])]);
    mkdirSync(odd);
    writeFileSync(Buffer.concat([odd, Buffer.from('/conftest.py')]), 'import os; os._exit(0)\n');
    serve.workspace.write({ 'tests/.git/config': '[core]\n\tworktree = /\n' });
    await serve.sandbox.importTree(chunked(makeTar([{ name: 'tests/ok.py', content: 'the original\n' }]), 512), { prune: ['tests/**'] });
    expect(existsSync(odd)).toBe(false);
    expect(existsSync(`${serve.workspace.root}/tests/.git`)).toBe(false);
    expect(readFileSync(`${serve.workspace.root}/tests/ok.py`, 'utf8')).toBe('the original\n');
    expect(existsSync(`${serve.workspace.root}/.git/HEAD`)).toBe(true);
  });

  it('refuses an archive it cannot unpack with IMPORT_REFUSED, and the session goes on', async () => {
    const failure = await serve.sandbox
      .importTree(chunked(makeTar([{ name: '../out.txt', content: 'x' }]), 512))
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ reason: 'IMPORT_REFUSED', toolErrorCode: 'OUTSIDE_WORKSPACE' });
    serve.workspace.write({ 'here.txt': 'still\n' });
    expect(resultOf(await read('here.txt'))).toMatchObject({ content: 'still' });
    expect(serve.starts).toEqual(['serve']);
  });

  it('fails an import whose session dies mid-archive with a TRANSPORT error, and the next call opens a new session', async () => {
    const archive = makeTar([{ name: 'big.bin', content: 'z'.repeat(400_000) }]);
    async function* steadily(): AsyncGenerator<Uint8Array> {
      for (let at = 0; at < archive.length; at += 16_384) {
        if (at === 65_536) serve.processes[0]!.kill();
        await new Promise((resolve) => setTimeout(resolve, 20));
        yield archive.subarray(at, at + 16_384);
      }
    }
    const failure = await serve.sandbox.importTree(steadily()).catch((error: unknown) => error);
    expect(failure).toMatchObject({ name: 'SandboxError', reason: 'TRANSPORT' });
    serve.workspace.write({ 'after.txt': 'new session\n' });
    expect(resultOf(await read('after.txt'))).toMatchObject({ content: 'new session' });
    expect(serve.starts).toEqual(['serve', 'serve']);
  });
});
