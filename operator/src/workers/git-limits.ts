// The limits git runs under when the workers start it on a repository's objects (every git they
// start, through git-runner.ts: the clone, publishing, `git apply` of a run's diff). git runs
// in the operator's container, whose memory every namespace's jobs share, and reads objects
// the repository's owner made: a commit or a tree is read whole wherever git reads it
// (index-pack hashing a download, fetch writing FETCH_HEAD, log printing it), whatever its pack
// costs. A commit whose message is 300 MB of zeros is a 1.4 MB pack; its fetch took 313 MB, and
// `git log` of it 619 MB, of the chart's 1 GiB.
//
// - The memory: RLIMIT_DATA (`ulimit -d`), which Linux (4.7 and later) counts for the heap and
//   every private writable mapping, not for the pack files git maps read-only (RLIMIT_AS counts
//   those, and a pack may be maxCheckoutBytes). Past it malloc fails and that one git process
//   dies, "fatal: Out of memory, malloc failed".
// - Room under it for a real repository: blobs over 16 MiB streamed rather than read whole
//   (core.bigFileThreshold: index-pack hashes them, checkout writes them, pack-objects sends
//   them in pieces; it does nothing for commits and trees, which are never streamed), a 16 MiB
//   delta base cache instead of 96 MiB, and one thread for index-pack and pack-objects: each
//   thread's 8 MiB stack counts against the limit, and git starts up to 20 on a large node.
//
// Measured with git 2.39 (the image's), clones at depth 1 over git://: 60 493 files of
// 689 MiB (a 479 MiB pack) need 41 to 48 MiB; 250 000 small files 33 to 40 MiB; the 300 MB
// commit fails at once with 6 MB resident. What does not fit is a commit or tree near the
// limit, or a file stored in the download as a delta of another whose two copies do not
// (60 MB files need about 120 MiB): such a repository fails CloneFailed, saying so.
const MiB = 1024 * 1024;

/**
 * 64 MiB: of the chart's 1 GiB, the operator (heap limit 160 MiB) and what it keeps beside the
 * heap leave about 700 MiB, and workerConcurrency (8) jobs may each run one git at once; at
 * 64 MiB each that is 512 MiB. A job's `git apply` runs under it too, judged first against it
 * (apply-budget.ts).
 */
export const GIT_MEMORY_LIMIT_BYTES = 64 * MiB;

/** git config that keeps a real repository's clone and push under GIT_MEMORY_LIMIT_BYTES (above). */
export const GIT_MEMORY_CONFIG: readonly string[] = [
  '-c',
  'core.bigFileThreshold=16m',
  '-c',
  'core.deltaBaseCacheLimit=16m',
  '-c',
  'pack.threads=1',
];

/**
 * For a repository on this machine (a `file://` URL, which only an admin's allowRepo admits: the
 * tests, `run --local`), the clone's fetch starts the serving side too, git-upload-pack, which
 * would inherit the limit: it reads a large loose object whole (a 50 MiB file committed and not
 * yet packed), and the clone failed for a server that is not the remote this limit is about.
 * The limit is a soft one (withLimits), so the server lifts it. Only for file://: over ssh the
 * command would run on the remote host, whose git service takes no other.
 */
export function localServerConfig(url: string): string[] {
  return url.startsWith('file:') ? ['-c', 'remote.origin.uploadpack=ulimit -S -d unlimited && exec git-upload-pack'] : [];
}

export interface ProcessLimits {
  /** RLIMIT_FSIZE: no file the command or its children write grows past it. */
  fileBytes?: number | undefined;
  /**
   * RLIMIT_DATA: the heap and private writable memory of the command and of each of its children.
   * Set as the soft limit: git never raises it, and the serving side of a local clone may
   * (localServerConfig).
   */
  dataBytes?: number | undefined;
}

/**
 * The command and arguments that run `command args` under the limits: through /bin/sh's
 * `ulimit`, which needs no prlimit in the image (POSIX sh counts -f in 512-byte blocks, -d in
 * KiB). Each limit holds for the command and everything it starts, each process on its own.
 */
export function withLimits(limits: ProcessLimits, command: string, args: readonly string[]): [string, string[]] {
  const set: [flag: string, value: number][] = [];
  if (limits.dataBytes !== undefined) set.push(['-S -d', Math.ceil(limits.dataBytes / 1024)]);
  if (limits.fileBytes !== undefined) set.push(['-f', Math.ceil(limits.fileBytes / 512)]);
  if (set.length === 0) return [command, [...args]];
  const script = [...set.map(([flag], index) => `ulimit ${flag} "$${index + 1}"`), `shift ${set.length}`, 'exec "$@"'].join(' && ');
  return ['/bin/sh', ['-c', script, 'chamvi-limits', ...set.map(([, value]) => String(value)), command, ...args]];
}

/**
 * Whether git (or a git process it started here) said it ran out of memory. Lines a remote sent
 * ("remote: fatal: Out of memory") are the server's own trouble, not this limit.
 */
export function ranOutOfMemory(stderr: string): boolean {
  return /^(fatal|error): [^\n]*out of memory/im.test(stderr);
}

/**
 * What one `git ls-remote` may print, read whole (never a tail: the lines wanted may be the last):
 * the clone cache's lookup of a revision (git-clone.ts remoteCommit: past it the run clones) and
 * publishing's lookup of its branch (publish-git.ts lookUpRemote: past it the publish fails).
 * git matches a pattern against the end of each ref's name, so every ref ending in `/HEAD` is
 * printed too, as many as anyone who may push makes: room for a hundred of the longest name a
 * server advertises (one pkt-line, 65 516 bytes), thousands of usual length.
 */
export const LS_REMOTE_MAX_BYTES = 8 * MiB;
