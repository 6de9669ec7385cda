// Where the toolbox works: the workspace root, its own home (bash state, logs), and the knobs
// a test may turn. Resolved once per process; every tool receives it.
import { mkdirSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { OUTPUT_LOG_MAX_BYTES } from './contract/limits.ts';
import type { ProtectedPaths } from './contract/protected-paths.ts';
import type { CleanShell } from './contract/protocol.ts';

export interface ToolboxContext {
  /** Workspace root as given (absolute). */
  root: string;
  /** Real path of the root; every guarded path must resolve under it. */
  realRoot: string;
  /** Real path of the toolbox home. */
  home: string;
  /** Per-stream cap of bash output logs. */
  outputLogMaxBytes: number;
  /** grep with git grep: how long nested repositories may take (undefined: grep's default). */
  nestedSearchDeadlineMs?: number;
  /** This request's spec.verify.protect (the operator sends it with every call of a run that has one). */
  isProtected?: ProtectedPaths;
  /**
   * This request's bash runs in a fresh shell (the operator's): true (the verify check) after
   * stopping what the model left running, 'keep-jobs' (the diff snapshot) leaving it running.
   */
  cleanShell?: CleanShell;
  /**
   * This request's bash is the operator's own command: it runs in the toolbox's environment,
   * not the run's (operator-shell-environment.ts), and without the session's state.
   */
  operatorEnvironment?: true;
}

export interface ContextOptions {
  root?: string | undefined;
  home?: string | undefined;
  outputLogMaxBytes?: number | undefined;
}

export function createContext(options: ContextOptions, env: NodeJS.ProcessEnv = process.env): ToolboxContext {
  const root = path.resolve(options.root ?? env.CHAMVI_WORKSPACE ?? '/workspace');
  const home = path.resolve(options.home ?? env.CHAMVI_HOME ?? path.join(homedir(), '.chamvi'));
  mkdirSync(root, { recursive: true });
  mkdirSync(home, { recursive: true });
  // The cap is configurable so a test can show the kill without writing 64 MiB.
  const capFromEnv = Number(env.CHAMVI_OUTPUT_LOG_MAX_BYTES);
  const outputLogMaxBytes =
    options.outputLogMaxBytes ?? (Number.isSafeInteger(capFromEnv) && capFromEnv > 0 ? capFromEnv : OUTPUT_LOG_MAX_BYTES);
  // So a test can show a slow nested repository given up on without waiting the default.
  const nestedFromEnv = Number(env.CHAMVI_GREP_NESTED_DEADLINE_MS);
  const nestedSearchDeadlineMs = Number.isSafeInteger(nestedFromEnv) && nestedFromEnv > 0 ? nestedFromEnv : undefined;
  return { root, realRoot: realpathSync(root), home: realpathSync(home), outputLogMaxBytes, nestedSearchDeadlineMs };
}
