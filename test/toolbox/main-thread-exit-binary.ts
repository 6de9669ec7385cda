// A program whose main thread exits while another thread goes on writing: /proc then shows the
// process as a zombie (state Z) though it lives, its descriptors only under /proc/PID/task/.
// The model can write such a binary (printf into a file, chmod +x), so the tests need one, and
// they build it here byte by byte rather than needing a compiler (or python) on the machine:
// a static x86-64 ELF of one segment, no libc, raw system calls. Elsewhere it is undefined and
// the tests that need it are skipped, as they are where it cannot run (mainThreadExitUnavailable).
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** The machine code, placed right after the two headers; its data follows it (offsets from its start). */
const CODE: readonly (readonly [string, string])[] = [
  // rt_sigaction(SIGTERM, &act, NULL, 8): SIGTERM ignored, so only SIGKILL stops it.
  ['b80d000000', 'mov eax, 13'],
  ['bf0f000000', 'mov edi, 15'],
  ['488d3557000000', 'lea rsi, [rip + act]  (0x68)'],
  ['31d2', 'xor edx, edx'],
  ['41ba08000000', 'mov r10d, 8'],
  ['0f05', 'syscall'],
  // clone(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD, same stack): a thread.
  ['b838000000', 'mov eax, 56'],
  ['bf000f0100', 'mov edi, 0x10f00'],
  ['31f6', 'xor esi, esi'],
  ['31d2', 'xor edx, edx'],
  ['4531d2', 'xor r10d, r10d'],
  ['4531c0', 'xor r8d, r8d'],
  ['0f05', 'syscall'],
  ['85c0', 'test eax, eax'],
  ['7409', 'jz writer  (0x3e)'],
  // The main thread: exit(0), which ends this thread only (exit_group would end them all).
  ['b83c000000', 'mov eax, 60'],
  ['31ff', 'xor edi, edi'],
  ['0f05', 'syscall'],
  // writer (0x3e): write(1, buffer, 4096), nanosleep(10 ms), again: about 400 KB a second.
  ['b801000000', 'mov eax, 1'],
  ['bf01000000', 'mov edi, 1'],
  ['488d3549000000', 'lea rsi, [rip + buffer]  (0x98)'],
  ['ba00100000', 'mov edx, 4096'],
  ['0f05', 'syscall'],
  ['b823000000', 'mov eax, 35'],
  ['488d3d26000000', 'lea rdi, [rip + ts]  (0x88)'],
  ['31f6', 'xor esi, esi'],
  ['0f05', 'syscall'],
  ['ebd6', 'jmp writer'],
  // act (0x68): struct sigaction { handler = SIG_IGN, flags, restorer, mask }.
  ['0100000000000000' + '00'.repeat(24), 'act'],
  // ts (0x88): struct timespec { 0 s, 10 000 000 ns }.
  ['0000000000000000' + '8096980000000000', 'ts'],
  // buffer (0x98): 4096 zero bytes past the end of the file (the segment's memory size).
];

const BASE = 0x400000n;
const HEADERS = 64 + 56;

/** The program's bytes, or undefined where it cannot run (not x86-64 Linux). */
export function mainThreadExitBinary(): Buffer | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64') return undefined;
  const code = Buffer.from(CODE.map(([hex]) => hex).join(''), 'hex');
  const file = Buffer.alloc(HEADERS + code.length);
  // ELF header: 64-bit, little-endian, version 1, an executable for x86-64.
  Buffer.from('7f454c46020101', 'hex').copy(file, 0);
  file.writeUInt16LE(2, 16); // e_type: EXEC
  file.writeUInt16LE(0x3e, 18); // e_machine: x86-64
  file.writeUInt32LE(1, 20); // e_version
  file.writeBigUInt64LE(BASE + BigInt(HEADERS), 24); // e_entry: the code
  file.writeBigUInt64LE(64n, 32); // e_phoff
  file.writeUInt16LE(64, 52); // e_ehsize
  file.writeUInt16LE(56, 54); // e_phentsize
  file.writeUInt16LE(1, 56); // e_phnum
  // One PT_LOAD segment, read/write/execute, the whole file at BASE and 8 KiB of memory.
  file.writeUInt32LE(1, 64); // p_type
  file.writeUInt32LE(7, 68); // p_flags
  file.writeBigUInt64LE(0n, 72); // p_offset
  file.writeBigUInt64LE(BASE, 80); // p_vaddr
  file.writeBigUInt64LE(BASE, 88); // p_paddr
  file.writeBigUInt64LE(BigInt(file.length), 96); // p_filesz
  file.writeBigUInt64LE(0x2000n, 104); // p_memsz: the buffer is the zeroed rest
  file.writeBigUInt64LE(0x1000n, 112); // p_align
  code.copy(file, HEADERS);
  return file;
}

/**
 * Why the program cannot run here, or undefined when it can: built for x86-64 Linux only, and run
 * once from the temporary directory the workspaces live in, since a noexec mount or a policy
 * refusing writable-and-executable memory (SELinux execmem) stops it where the build cannot tell.
 * The run is killed (SIGKILL: it ignores SIGTERM) once it has written (or after 10 s).
 */
export function mainThreadExitUnavailable(): string | undefined {
  const program = mainThreadExitBinary();
  if (!program) return 'the main-thread-exit program is built for x86-64 Linux only';
  const directory = mkdtempSync(path.join(tmpdir(), 'chamvi-mte-probe-'));
  try {
    const file = path.join(directory, 'mte');
    writeFileSync(file, program);
    chmodSync(file, 0o755);
    // Ended by its first output past maxBuffer (ENOBUFS), else by the timeout: a loaded machine
    // may not run it within a fixed 300 ms, which skipped the tests as if it could not run here.
    const run = spawnSync(file, [], { timeout: 10_000, killSignal: 'SIGKILL', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1024 });
    if ((run.error as NodeJS.ErrnoException | undefined)?.code === 'ENOBUFS') return undefined;
    if (run.error && (run.error as NodeJS.ErrnoException).code !== 'ETIMEDOUT') {
      return `the main-thread-exit program cannot be started from ${tmpdir()}: ${run.error.message}`;
    }
    if ((run.stdout?.length ?? 0) < 4096) {
      return `the main-thread-exit program started from ${tmpdir()} wrote nothing (ended by ${run.signal ?? `exit ${run.status}`}): execution refused here`;
    }
    return undefined;
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
