// spec.verify.protect: which workspace paths the model may not change. One matcher for both
// ends: the toolbox refuses file-tool edits of a protected path (matching the real,
// root-relative path the tool would write, after `..`, /workspace/ and symlinks are resolved)
// and prunes them before a verification; the operator picks the files of its own clone to put
// back. A glob protects what it matches and everything under it (`test` protects test/a.js).
// Pure.
import { compileGlob } from './glob-pattern.ts';

export type ProtectedPaths = (relative: string) => boolean;

/** A predicate over root-relative '/'-separated paths ('' is the root, which is never protected). */
export function protectedPaths(globs: readonly string[]): ProtectedPaths {
  const patterns = globs.map((glob) => compileGlob(glob.replace(/\/+$/, '')));
  if (patterns.length === 0) return () => false;
  return (relative) => {
    if (relative === '') return false;
    const segments = relative.split('/');
    // The path itself or any directory above it.
    for (let end = segments.length; end > 0; end -= 1) {
      const prefix = segments.slice(0, end).join('/');
      if (patterns.some((pattern) => pattern.test(prefix))) return true;
    }
    return false;
  };
}
