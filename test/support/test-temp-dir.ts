// A temp directory that belongs to one test: made under the system's temp dir and removed
// when the test ends, pass or fail, so test runs leave nothing behind on a machine that runs
// them again and again.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/** Call inside a test (`it`). */
export function testTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
