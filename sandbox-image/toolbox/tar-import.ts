// `import`: a tar stream (optionally gzip) becomes the workspace. This is how the worker's
// clone reaches the pod without network. Every entry is confined like a tool path: an entry
// that would land outside the root (absolute, `..`, or through a symlink created by an earlier
// entry) fails the import with OUTSIDE_WORKSPACE. Files are streamed to disk, never buffered.
//
// A clone is thousands of small files, so each entry's file-system calls are synchronous: an
// awaited call per open, write, close, lstat and mkdir waited on libuv's thread pool, and a
// 3000-file repository took 3.6-4.7 s to import where tar(1) takes 0.3 s. The event loop is held
// for one entry's calls at a time; the archive arrives between them.
//
// Names are bytes, and a repository may hold names that are not UTF-8. They are decoded with
// each byte that is not part of valid UTF-8 kept as a lone surrogate (U+DC80-U+DCFF, as
// Python's surrogateescape), so every name stays a distinct string for the checks here, and
// `fsPath` turns it back into its exact bytes for the file system. `a\xff` and `a\xfe` stay two
// files instead of both becoming `a\uFFFD`.
import { isUtf8 } from 'node:buffer';
import {
  closeSync,
  constants,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { guardWorkspacePath, isInside, lexicalRelative } from './path-guard.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

export interface ImportResult {
  files: number;
  directories: number;
  symlinks: number;
  bytes: number;
  /** Device files, fifos and other entries a workspace has no use for. */
  skipped: number;
}

const BLOCK = 512;
const PAX_MAX_BYTES = 1_048_576;

export interface ImportOptions {
  /**
   * Every entry lands at its literal path: a symlink or file where an entry needs a directory
   * is replaced by a directory, never followed. The restore of spec.verify.protect paths uses
   * it, so a protected directory the model turned into a symlink (to a directory holding its
   * own files) cannot make the restored files land beside the model's.
   */
  literal?: boolean;
}

export async function importTar(
  context: ToolboxContext,
  input: AsyncIterable<Uint8Array>,
  options: ImportOptions = {},
): Promise<ImportResult> {
  const reader = new ChunkReader(await maybeGunzip(input));
  const result: ImportResult = { files: 0, directories: 0, symlinks: 0, bytes: 0, skipped: 0 };
  // Literal imports replace what stands in an entry's way, so they resolve every parent anew.
  const parents = options.literal ? undefined : new ResolvedParents();
  let pax: Record<string, string> = {};
  let longName: string | undefined;
  let longLink: string | undefined;

  for (;;) {
    const header = await reader.read(BLOCK);
    if (!header) break;
    if (header.every((byte) => byte === 0)) break; // end-of-archive marker
    verifyChecksum(header);
    const type = String.fromCharCode(header[156] ?? 0);
    const size = pax.size !== undefined ? Number(pax.size) : parseNumber(header.subarray(124, 136));
    if (!Number.isSafeInteger(size) || size < 0)
      throw new ToolboxError('INVALID_INPUT', 'The tar stream has an entry with an invalid size');
    const padded = Math.ceil(size / BLOCK) * BLOCK;

    if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
      if (size > PAX_MAX_BYTES) throw new ToolboxError('TOO_LARGE', 'The tar stream has an oversized extended header');
      const data = (await reader.read(padded)) ?? truncatedArchive();
      const body = data.subarray(0, size);
      if (type === 'x') pax = parsePax(body);
      else if (type === 'L') longName = cString(body);
      else if (type === 'K') longLink = cString(body);
      continue;
    }

    const name = pax.path ?? longName ?? ustarName(header);
    const linkName = pax.linkpath ?? longLink ?? cString(header.subarray(157, 257));
    const mode = parseNumber(header.subarray(100, 108)) & 0o777;
    pax = {};
    longName = undefined;
    longLink = undefined;

    const relative = confine(context, name);
    if (relative === '') {
      await reader.skip(padded);
      continue;
    }
    if (options.literal) literalDirectories(context, type === '5' ? relative : path.posix.dirname(relative));
    if (type === '5') {
      const real = await entryLocation(context, relative, name, parents);
      mkdirSync(fsPath(real), { recursive: true, mode: mode | 0o700 });
      result.directories += 1;
      await reader.skip(padded);
    } else if (type === '0' || type === '\0' || type === '7') {
      const real = await entryLocation(context, relative, name, parents);
      clearForEntry(real, parents);
      const fd = createEntryFile(real, mode | 0o600, name);
      try {
        await reader.drain(size, (piece) => writeAll(fd, piece));
      } finally {
        closeSync(fd);
      }
      await reader.skip(padded - size);
      result.files += 1;
      result.bytes += size;
    } else if (type === '2') {
      const real = await entryLocation(context, relative, name, parents);
      clearForEntry(real, parents);
      // The link may point anywhere: tools refuse to follow it out, later entries may not pass it.
      symlinkSync(fsPath(linkName), fsPath(real));
      result.symlinks += 1;
      await reader.skip(padded);
    } else if (type === '1') {
      const targetRelative = confine(context, linkName);
      const target = hasUndecodableBytes(targetRelative)
        ? realPathOfUndecodable(context, targetRelative, linkName)
        : (await guardWorkspacePath(context, targetRelative, { allowDenied: true })).real;
      const real = await entryLocation(context, relative, name, parents);
      clearForEntry(real, parents);
      linkSync(fsPath(target), fsPath(real));
      result.files += 1;
      await reader.skip(padded);
    } else {
      result.skipped += 1;
      await reader.skip(padded);
    }
  }
  return result;
}

/** Root-relative path of an entry name, refusing absolute names and `..` escapes. */
function confine(context: ToolboxContext, name: string): string {
  if (path.posix.isAbsolute(name)) {
    throw new ToolboxError('OUTSIDE_WORKSPACE', `The tar entry ${name.slice(0, 200)} is absolute; the import was stopped`);
  }
  try {
    return lexicalRelative(context, name);
  } catch {
    throw new ToolboxError('OUTSIDE_WORKSPACE', `The tar entry ${name.slice(0, 200)} leaves the workspace; the import was stopped`);
  }
}

/**
 * Parent directories this import has resolved for real (and made), by the entry path's
 * root-relative parent. The import is alone in the workspace (the model has not started, or
 * its jobs were stopped), so only its own entries change what a path resolves to, and each
 * entry that replaces a real path forgets every parent that resolved to it or below it, under
 * whatever name (a symlink inside the workspace is another name for the same directory).
 */
class ResolvedParents {
  private readonly real = new Map<string, string>();

  get(relative: string): string | undefined {
    return this.real.get(relative);
  }

  set(relative: string, real: string): void {
    this.real.set(relative, real);
  }

  forgetAt(real: string): void {
    for (const [key, value] of this.real) if (value === real || value.startsWith(`${real}${path.sep}`)) this.real.delete(key);
  }
}

/** Where an entry goes: its parent resolved for real (symlinks included) must be in the root. */
async function entryLocation(context: ToolboxContext, relative: string, name: string, parents?: ResolvedParents): Promise<string> {
  const parent = path.posix.dirname(relative);
  const known = parents?.get(parent);
  const realParent = known ?? (await realParentOf(context, parent, name));
  const real = path.join(realParent, path.posix.basename(relative));
  if (!isInside(context.realRoot, real))
    throw new ToolboxError('OUTSIDE_WORKSPACE', `The tar entry ${name.slice(0, 200)} leaves the workspace`);
  if (!known) {
    mkdirSync(fsPath(realParent), { recursive: true });
    parents?.set(parent, realParent);
  }
  return real;
}

/** An entry's parent directory resolved for real (symlinks included), refused outside the root. */
async function realParentOf(context: ToolboxContext, parent: string, name: string): Promise<string> {
  if (hasUndecodableBytes(parent)) return realPathOfUndecodable(context, parent, name);
  try {
    return (await guardWorkspacePath(context, parent === '.' ? '' : parent, { allowDenied: true })).real;
  } catch (error) {
    if (ToolboxError.isInstance(error) && error.code === 'OUTSIDE_WORKSPACE') {
      throw new ToolboxError(
        'OUTSIDE_WORKSPACE',
        `The tar entry ${name.slice(0, 200)} would be written through a symlink outside the workspace; the import was stopped`,
      );
    }
    throw error;
  }
}

/**
 * The real path of a root-relative path whose name has bytes that are not UTF-8, which the
 * path guard's string paths cannot name: its longest existing prefix resolved for real (a
 * symlink on it included), the rest, which does not exist and so holds no symlink, appended.
 */
function realPathOfUndecodable(context: ToolboxContext, relative: string, name: string): string {
  const segments = relative === '.' || relative === '' ? [] : relative.split('/');
  let existing = 0;
  while (
    existing < segments.length &&
    lstatSync(fsPath(path.join(context.realRoot, ...segments.slice(0, existing + 1))), { throwIfNoEntry: false })
  ) {
    existing += 1;
  }
  let realPrefix: string;
  try {
    // The native realpath: the JavaScript one turns a Buffer path into a string on the way.
    realPrefix = decodeName(
      realpathSync.native(fsPath(path.join(context.realRoot, ...segments.slice(0, existing))), { encoding: 'buffer' }),
    );
  } catch {
    throw new ToolboxError(
      'OUTSIDE_WORKSPACE',
      `The tar entry ${name.slice(0, 200)} would be written through a symlink that does not resolve; the import was stopped`,
    );
  }
  const real = path.join(realPrefix, ...segments.slice(existing));
  if (!isInside(context.realRoot, real)) {
    throw new ToolboxError(
      'OUTSIDE_WORKSPACE',
      `The tar entry ${name.slice(0, 200)} would be written through a symlink outside the workspace; the import was stopped`,
    );
  }
  return real;
}

/** writeSync may write less than asked (a full disk, a signal): the rest, until all of it is written. */
function writeAll(fd: number, piece: Buffer): void {
  for (let offset = 0; offset < piece.length;) offset += writeSync(fd, piece, offset);
}

/** Makes each segment of a root-relative directory path a real directory, replacing a symlink or file in the way. */
function literalDirectories(context: ToolboxContext, relativeDirectory: string): void {
  let current = context.realRoot;
  for (const segment of relativeDirectory.split('/')) {
    if (segment === '' || segment === '.') continue;
    current = path.join(current, segment);
    const stats = lstatSync(fsPath(current), { throwIfNoEntry: false });
    if (stats?.isDirectory()) continue;
    if (stats) rmSync(fsPath(current), { force: true });
    mkdirSync(fsPath(current), { mode: 0o755 });
  }
}

/**
 * A file or symlink entry replaces what is there, never writes through an old symlink. What
 * stood there may have been a directory that parents were resolved through: they are forgotten.
 */
function clearForEntry(real: string, parents: ResolvedParents | undefined): void {
  parents?.forgetAt(real);
  const stats = lstatSync(fsPath(real), { throwIfNoEntry: false });
  if (!stats) return;
  if (stats.isDirectory()) rmSync(fsPath(real), { recursive: true, force: true });
  else unlinkSync(fsPath(real));
}

/**
 * A new file at an entry's path, which clearForEntry has just emptied. A process still running
 * in the workspace may have put something there since: a FIFO, whose open for writing would
 * wait for a reader on the main thread, where every tool of the session waits behind it, or a
 * symlink, which would be written through. O_EXCL opens nothing that exists (nor a symlink;
 * O_NOFOLLOW says so too), so the import fails and says why instead. O_NONBLOCK would change
 * nothing: what this opens is always a regular file it just made.
 */
export function createEntryFile(real: string, mode: number, name: string): number {
  try {
    return openSync(fsPath(real), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    if (code !== 'EEXIST' && code !== 'ELOOP') throw error;
    throw new ToolboxError(
      'IO_ERROR',
      `The tar entry ${name.slice(0, 200)} could not be written: something else put a file at its path during the import ` +
        '(a process still running in the workspace?); the import was stopped',
    );
  }
}

async function maybeGunzip(input: AsyncIterable<Uint8Array>): Promise<AsyncIterable<Uint8Array>> {
  const iterator = input[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) return (async function* empty() {})();
  const head = first.value;
  async function* rest(): AsyncGenerator<Uint8Array> {
    yield head;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
  }
  if (head[0] === 0x1f && head[1] === 0x8b) return Readable.from(rest()).pipe(createGunzip());
  return rest();
}

function verifyChecksum(header: Buffer): void {
  const stored = parseNumber(header.subarray(148, 156));
  let sum = 0;
  for (let index = 0; index < BLOCK; index += 1) sum += index >= 148 && index < 156 ? 0x20 : (header[index] as number);
  if (sum !== stored) throw new ToolboxError('INVALID_INPUT', 'The input is not a valid tar stream (header checksum mismatch)');
}

function parseNumber(field: Buffer): number {
  if ((field[0] ?? 0) & 0x80) {
    // GNU base-256 for sizes past 8 GiB.
    let value = 0;
    for (let index = 1; index < field.length; index += 1) value = value * 256 + (field[index] as number);
    return value;
  }
  const text = cString(field).trim();
  return text === '' ? 0 : parseInt(text, 8);
}

function ustarName(header: Buffer): string {
  const name = cString(header.subarray(0, 100));
  const isUstar = header.subarray(257, 262).toString('latin1') === 'ustar';
  const prefix = isUstar ? cString(header.subarray(345, 500)) : '';
  return prefix ? `${prefix}/${name}` : name;
}

function cString(field: Buffer): string {
  const end = field.indexOf(0);
  return decodeName(field.subarray(0, end === -1 ? field.length : end));
}

/** The bytes as UTF-8, each byte outside a valid sequence kept as the lone surrogate U+DC00 + byte. */
export function decodeName(bytes: Buffer): string {
  if (isUtf8(bytes)) return bytes.toString('utf8');
  let text = '';
  let start = 0;
  let index = 0;
  while (index < bytes.length) {
    const length = utf8SequenceLength(bytes, index);
    if (length > 0) {
      index += length;
      continue;
    }
    text += bytes.toString('utf8', start, index) + String.fromCharCode(0xdc00 + (bytes[index] as number));
    index += 1;
    start = index;
  }
  return text + bytes.toString('utf8', start, index);
}

/** Length of the valid UTF-8 sequence at `index`, or 0 when the byte there starts none. */
function utf8SequenceLength(bytes: Buffer, index: number): number {
  const lead = bytes[index] as number;
  const length =
    lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
  if (length <= 1) return length;
  return index + length <= bytes.length && isUtf8(bytes.subarray(index, index + length)) ? length : 0;
}

/** A lone low surrogate U+DC80-U+DCFF: a byte decodeName could not decode (the `u` flag skips pairs). */
const UNDECODABLE_BYTE = /[\uDC80-\uDCFF]/u;

function hasUndecodableBytes(name: string): boolean {
  return UNDECODABLE_BYTE.test(name);
}

/** The path for fs calls: the string itself, or its exact bytes when decodeName escaped some. */
export function fsPath(name: string): string | Buffer {
  if (!hasUndecodableBytes(name)) return name;
  const pieces: Buffer[] = [];
  let pending = '';
  for (const character of name) {
    const code = character.charCodeAt(0);
    if (character.length === 1 && code >= 0xdc80 && code <= 0xdcff) {
      pieces.push(Buffer.from(pending, 'utf8'), Buffer.of(code - 0xdc00));
      pending = '';
    } else {
      pending += character;
    }
  }
  pieces.push(Buffer.from(pending, 'utf8'));
  return Buffer.concat(pieces);
}

function parsePax(body: Buffer): Record<string, string> {
  const records: Record<string, string> = {};
  let offset = 0;
  while (offset < body.length) {
    const space = body.indexOf(0x20, offset);
    if (space === -1) break;
    const length = Number(body.subarray(offset, space).toString('latin1'));
    if (!Number.isSafeInteger(length) || length <= 0) break;
    // GNU tar writes a name that is not UTF-8 as raw bytes (hdrcharset=BINARY): decoded like a header's.
    const record = body.subarray(space + 1, offset + length - 1);
    const equals = record.indexOf(0x3d);
    if (equals > 0) records[record.subarray(0, equals).toString('utf8')] = decodeName(record.subarray(equals + 1));
    offset += length;
  }
  return records;
}

function truncatedArchive(): never {
  throw new ToolboxError('INVALID_INPUT', 'The tar stream ended in the middle of an entry');
}

/** Exact-size reads over a stream of chunks of any size. */
class ChunkReader {
  private readonly iterator: AsyncIterator<Uint8Array>;
  private buffered: Buffer = Buffer.alloc(0);
  private ended = false;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.iterator = source[Symbol.asyncIterator]();
  }

  /** Exactly n bytes, or undefined at a clean end of stream. */
  async read(n: number): Promise<Buffer | undefined> {
    while (this.buffered.length < n && (await this.fill()));
    if (this.buffered.length === 0 && n > 0) return undefined;
    if (this.buffered.length < n) truncatedArchive();
    const out = this.buffered.subarray(0, n);
    this.buffered = this.buffered.subarray(n);
    return out;
  }

  async skip(n: number): Promise<void> {
    let left = n;
    while (left > 0) {
      if (this.buffered.length === 0 && !(await this.fill())) truncatedArchive();
      const take = Math.min(left, this.buffered.length);
      this.buffered = this.buffered.subarray(take);
      left -= take;
    }
  }

  /** Hands the next n bytes to `write` as they arrive (a file is never held whole). */
  async drain(n: number, write: (piece: Buffer) => void): Promise<void> {
    let left = n;
    while (left > 0) {
      if (this.buffered.length === 0 && !(await this.fill())) truncatedArchive();
      const take = Math.min(left, this.buffered.length);
      const piece = this.buffered.subarray(0, take);
      this.buffered = this.buffered.subarray(take);
      left -= take;
      write(piece);
    }
  }

  private async fill(): Promise<boolean> {
    if (this.ended) return false;
    const next = await this.iterator.next();
    if (next.done) {
      this.ended = true;
      return false;
    }
    const chunk = Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    return true;
  }
}
