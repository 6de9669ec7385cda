// Puts spec.verify.protect paths back as they are in the commit the run cloned, right before
// each verification, so whatever the model did to them through bash cannot change the grade.
// The source is a fresh clone in the worker (the operator's, never the sandbox's .git, which
// the model can rewrite: replace refs, forged objects); the sandbox first removes everything
// the globs cover (toolbox `import --prune`), then unpacks the clone's protected files. An import
// the sandbox does not answer is judged as the check is (sandbox-lost-check.ts): a stopped
// toolbox fails the check closed, a lost sandbox is retried into SandboxLost.
import { repositoryAllowedNow } from './repository-allowed-now.ts';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { protectedPaths } from '../../../sandbox-image/toolbox/contract/protected-paths.ts';
import { REASONS, RunFailure, type ParsedCodingRun } from '../api/index.ts';
import { launchHere, launchToEnd } from './process-launcher.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { cloneRepository } from './git-clone.ts';
import { readGitToken } from './git-token.ts';
import { archiveReadStream } from './archive-stream.ts';
import { judgeUnansweredCall } from './sandbox-lost-check.ts';

/** Entries matched between two turns of the event loop. */
const YIELD_EVERY_ENTRIES = 64;
const SLASH = Buffer.from('/');
const NUL = Buffer.from([0]);

/**
 * Root-relative paths, as bytes, of the files (and symlinks) under `dir` the globs protect, and of
 * its protected directories that are empty; .git is never walked. The prune removes protected
 * directories too, and tar makes a file's directories again but not an empty one: in a clone,
 * that is an uninitialised submodule (a gitlink), whose absence the diff shows as its deletion.
 * Names are read as bytes and matched as UTF-8 text, as the toolbox's prune matches them
 * (protected-prune.ts): a name that is not UTF-8 (`caf\xe9.js`) read as a string became
 * U+FFFD, a path neither readdir nor tar could find again, and the restore failed.
 */
export async function protectedFilesIn(dir: string, globs: readonly string[]): Promise<Buffer[]> {
  const isProtected = protectedPaths(globs);
  const root = Buffer.from(dir);
  const files: Buffer[] = [];
  let seen = 0;
  /** Walks a directory; true when it holds nothing (a .git skipped at the root counts as something). */
  const walk = async (relative: Buffer): Promise<boolean> => {
    const directory = relative.length === 0 ? root : Buffer.concat([root, SLASH, relative]);
    const entries = await readdir(directory, { withFileTypes: true, encoding: 'buffer' });
    for (const entry of entries) {
      // A match is bounded (glob-pattern.ts), not free: the run author's 64 globs of 256
      // characters cost up to about 20 ms on a long path, and a clone may hold 250 000 of them.
      // The event loop is let go between batches, so reconciles and other runs' steps go on.
      seen += 1;
      if (seen % YIELD_EVERY_ENTRIES === 0) await new Promise((resolve) => setImmediate(resolve));
      if (relative.length === 0 && entry.name.toString('latin1') === '.git') continue;
      const child = relative.length === 0 ? entry.name : Buffer.concat([relative, SLASH, entry.name]);
      // The dirent's type is the entry's own (lstat's): a symlink to a directory is a file here.
      if (entry.isDirectory()) {
        // Its files name it already; an empty one (a gitlink's) is carried as a directory entry.
        if ((await walk(child)) && isProtected(child.toString('utf8'))) files.push(child);
      } else if (isProtected(child.toString('utf8'))) files.push(child);
    }
    return entries.length === 0;
  };
  await walk(Buffer.alloc(0));
  return files.sort(Buffer.compare);
}

/** Restores the protected paths in the sandbox; returns how many entries (files, symlinks, empty directories) the clone put back. */
export async function restoreProtected(
  deps: Pick<AgentDependencies, 'clonePolicy' | 'resources' | 'launch' | 'sandboxLost' | 'logger'>,
  run: ParsedCodingRun,
  revision: string,
  sandbox: Sandbox,
  timeoutMs: number,
): Promise<number> {
  const protect = run.spec.verify?.protect ?? [];
  if (protect.length === 0) return 0;
  const { spec } = run;
  // The same checks as the first clone (prepare-job.ts): allowRepo as it is now (the
  // namespace's too: the model may have worked for hours), the run's own token.
  const repository = await repositoryAllowedNow(deps, run.metadata.namespace, spec.repository.url);
  if (!repository.allowed) throw new RunFailure(REASONS.RepoNotAllowed, repository.message);
  const token = spec.repository.credentialsSecretRef
    ? await readGitToken(deps.resources, run.metadata.namespace, {
        ...spec.repository.credentialsSecretRef,
        field: 'spec.repository.credentialsSecretRef',
      })
    : undefined;
  const dir = await cloneRepository({
    url: repository.url,
    revision,
    token,
    maxCheckoutBytes: deps.clonePolicy.maxCheckoutBytes,
    maxCheckoutFiles: deps.clonePolicy.maxCheckoutFiles,
    maxGitMemoryBytes: deps.clonePolicy.maxGitMemoryBytes,
    launch: deps.launch,
  });
  try {
    const files = await protectedFilesIn(dir, protect);
    const list = join(dirname(dir), 'protected.list');
    const archive = join(dirname(dir), 'protected.tar');
    // NUL-separated bytes: tar finds each name as the clone holds it, UTF-8 or not.
    await writeFile(list, Buffer.concat(files.flatMap((file) => [file, NUL])));
    // --no-recursion: exactly the listed entries (a listed directory is an entry of its own, not
    // its contents); an empty list makes an empty archive, and the prune alone runs.
    await launchToEnd(deps.launch ?? launchHere, 'tar', ['-C', dir, '--no-recursion', '--null', '-T', list, '-cf', archive], dir);
    await sandbox.importTree(archiveReadStream(archive), { prune: protect, timeoutMs }).catch(async (error: unknown) => {
      // Fail closed, at once: a process the model left can stop the toolbox before it reads the
      // request, and each retry's new session would wait as long again (31 minutes a try, by
      // the default call timeout, in a worker slot every namespace shares). Unless the sandbox
      // is lost (its pod gone or NotReady) or the import never reached it: then the TIMEOUT is
      // thrown on, as the check's is, and the finalize retried into SandboxLost.
      if (error instanceof SandboxError && error.reason === 'TIMEOUT') {
        await judgeUnansweredCall(deps, run, error);
        throw new RunFailure(
          REASONS.VerificationFailed,
          `The spec.verify.protect paths could not be put back within ${Math.round(timeoutMs / 1000)} s: the sandbox did not answer ` +
            '(a process left running in it may have stopped the toolbox); nothing was graded.',
        );
      }
      // The toolbox could not make the protected paths the clone's (a directory the model made
      // that cannot be read or emptied, an entry of the archive it refused): the same sandbox
      // answers a retry the same way, after another clone, and then the run ended AgentFailed.
      if (error instanceof SandboxError && error.reason === 'IMPORT_REFUSED') {
        throw new RunFailure(
          REASONS.VerificationFailed,
          `The spec.verify.protect paths could not be put back: ${error.message}; nothing was graded.`,
        );
      }
      throw error;
    });
    return files.length;
  } finally {
    await rm(dirname(dir), { recursive: true, force: true });
  }
}
