// The sandbox as the model's tool calls reach it: every request carries the run's
// spec.verify.protect globs, so the toolbox refuses a file-tool edit of a protected path with
// PROTECTED_PATH (checked there, on the real path the write would land on). A decorator, so
// the tool-call code stays unaware of verification.
import type { ParsedCodingRun } from '../api/index.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';

export function protectingSandbox(sandbox: Sandbox, run: ParsedCodingRun): Sandbox {
  const protect = run.spec.verify?.protect ?? [];
  if (protect.length === 0) return sandbox;
  return {
    call: (request, options) => sandbox.call({ ...request, protect }, options),
    importTree: (tar, options) => sandbox.importTree(tar, options),
    close: () => sandbox.close(),
  };
}
