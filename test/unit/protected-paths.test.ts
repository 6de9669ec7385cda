// spec.verify.protect: which root-relative paths a glob list protects (the toolbox refuses
// file-tool edits of them and prunes them before a verification; the operator picks them from
// its clone), and which globs the API refuses. Table tests of the pure matcher and rules.
import { describe, expect, it } from 'vitest';
import { protectGlobRules } from '../../operator/src/api/protect-glob.ts';
import { verifySpec, VERIFY_TIMEOUT_MAX_MS } from '../../operator/src/api/verify-spec.ts';
import { BASH_MAX_TIMEOUT_MS } from '../../sandbox-image/toolbox/contract/limits.ts';
import { protectedPaths } from '../../sandbox-image/toolbox/contract/protected-paths.ts';

describe('protectedPaths', () => {
  it.each<[string[], string, boolean]>([
    [['test/**'], 'test/a.test.js', true],
    [['test/**'], 'test/unit/deep/b.test.js', true],
    // The directory itself is not (its entries are): the restore replaces a symlinked test/ anyway.
    [['test/**'], 'test', false],
    [['test/**'], 'src/test/a.js', false],
    [['test/**'], 'testing/a.js', false],
    // A glob protects what lies under what it matches.
    [['test'], 'test/unit/a.js', true],
    [['test/'], 'test/unit/a.js', true],
    [['package.json'], 'package.json', true],
    [['package.json'], 'sub/package.json', false],
    [['**/package.json'], 'sub/package.json', true],
    [['**/*.test.js'], 'src/deep/x.test.js', true],
    [['**/*.test.js'], 'x.test.js', true],
    [['**/*.test.js'], 'src/x.js', false],
    [['*.md'], 'README.md', true],
    [['*.md'], 'docs/guide.md', false],
    [['{test,spec}/**'], 'spec/a.js', true],
    [['tests/[ab].py'], 'tests/a.py', true],
    [['tests/[ab].py'], 'tests/c.py', false],
    [['conftest.py', 'tests/**'], 'conftest.py', true],
    [[], 'test/a.js', false],
    // The root itself is never protected (it is not a path a tool writes).
    [['**'], '', false],
    [['**'], 'anything/at/all', true],
  ])('%j protects %j: %s', (globs, path, expected) => {
    expect(protectedPaths(globs)(path)).toBe(expected);
  });
});

describe('protect glob rules (the CRD refuses the same globs with CEL)', () => {
  const refused = (glob: string) => protectGlobRules.some((rule) => !rule.holds(glob));
  it.each([
    ['test/**', false],
    ['package.json', false],
    ['test/', false],
    ['..', true],
    ['../x', true],
    ['test/../../x', true],
    ['test/..', true],
    ['./test/**', true],
    ['test/./a', true],
    ['test//a', true],
    ['.', true],
  ])('%j is refused: %s', (glob, expected) => {
    expect(refused(glob)).toBe(expected);
  });

  // The workspace's .git is never pruned or restored, so a glob naming it would protect nothing.
  // A wildcard that could also match .git protects the other paths it matches, as it always did.
  it.each([
    ['.git', true],
    ['.git/', true],
    ['.git/**', true],
    ['.git/config', true],
    ['.git/hooks/*', true],
    ['**/.git/**', true],
    ['**/**/.git', true],
    ['.g*', false],
    ['.git*', false],
    ['.*', false],
    ['*', false],
    ['**', false],
    ['*/test/**', false],
    ['test/**', false],
    ['**/*.py', false],
    ['**/conftest.py', false],
    ['*.md', false],
    ['.github/**', false],
    ['.gitignore', false],
    ['.gitmodules', false],
    ['src/.git/**', false],
  ])('%j names .git: %s', (glob, expected) => {
    expect(refused(glob)).toBe(expected);
    expect(verifySpec.safeParse({ command: 'true', protect: [glob] }).success).toBe(!expected);
  });

  it('says why a glob naming .git is refused, and where to read more', () => {
    const parsed = verifySpec.safeParse({ command: 'make gen-check', protect: ['.git/**'] });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((issue) => issue.message)).toEqual([expect.stringMatching(/may not name \.git.*docs\/verify\.md/)]);
  });

  it('refuses an absolute glob and a control character through the schema', () => {
    expect(verifySpec.safeParse({ command: 'true', protect: ['/etc/passwd'] }).success).toBe(false);
    expect(verifySpec.safeParse({ command: 'true', protect: ['test\n/**'] }).success).toBe(false);
    expect(verifySpec.safeParse({ command: 'true', protect: ['test/**'] }).success).toBe(true);
  });

  it('bounds the timeout by the longest command the bash tool runs', () => {
    expect(VERIFY_TIMEOUT_MAX_MS).toBe(BASH_MAX_TIMEOUT_MS);
    expect(verifySpec.safeParse({ command: 'true', timeout: '30m' }).success).toBe(true);
    expect(verifySpec.safeParse({ command: 'true', timeout: '31m' }).success).toBe(false);
  });

  it('refuses a timeout under 1ms, as the other durations, with the message the API server gives', () => {
    expect(verifySpec.safeParse({ command: 'true', timeout: '1ms' }).success).toBe(true);
    for (const timeout of ['0s', '0h0m', '0.0001s']) {
      const result = verifySpec.safeParse({ command: 'true', timeout });
      expect(result.error?.issues).toEqual([expect.objectContaining({ path: ['timeout'], message: 'timeout must be at least 1ms' })]);
    }
  });

  it('fills its defaults', () => {
    expect(verifySpec.parse({ command: 'npm test' })).toEqual({
      command: 'npm test',
      timeout: '10m',
      required: true,
      retries: 0,
      protect: [],
    });
  });
});
