// Real git repositories for tests, made with a fixed identity so a commit works on any machine.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** git with the test identity; returns its stdout and throws with its stderr when it fails. */
export function git(args: readonly string[], cwd: string): string {
  const result = spawnSync('git', ['-c', 'user.name=test', '-c', 'user.email=test@chamvi.dev', ...args], { cwd, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`git ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

/** A repository at `dir` (made if missing) on branch main, holding `files` in one commit. */
export function createRepository(dir: string, files: Record<string, string> = { 'README.md': 'Hello\n' }): void {
  mkdirSync(dir, { recursive: true });
  git(['init', '-q', '-b', 'main'], dir);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  git(['add', '.'], dir);
  git(['commit', '-qm', 'initial'], dir);
}

/**
 * A repository made in root/source and cloned bare to root/git/hello.git (or root/git/<name>),
 * where an operator with allowRepo `file://<root>/git/*` may clone it; returns that file:// URL.
 */
export function createBareRepository(root: string, files?: Record<string, string>, name = 'hello.git'): string {
  const source = join(root, name === 'hello.git' ? 'source' : `source-${name}`);
  createRepository(source, files);
  const bare = join(root, 'git', name);
  git(['clone', '-q', '--bare', source, bare], root);
  return `file://${bare}`;
}
