// The glob matcher shared by the toolbox (glob tool, protected paths) and the operator (which
// files of a clone spec.verify.protect covers): what it matches (the answers of the RegExp
// compiler it replaced, on ordinary globs), that a hostile glob costs no more than a short
// walk over the path, and that a glob naming no paths is refused where a run author writes it.
import { describe, expect, it } from 'vitest';
import { verifySpec } from '../../operator/src/api/verify-spec.ts';
import { compileGlob } from '../../sandbox-image/toolbox/contract/glob-pattern.ts';
import { InvalidGlobError } from '../../sandbox-image/toolbox/contract/invalid-glob-error.ts';
import { protectedPaths } from '../../sandbox-image/toolbox/contract/protected-paths.ts';

// Every row is what the RegExp compiler answered.
const ordinaryGlobs: Array<[string, string, boolean]> = [
  ['**/*.ts', 'a.ts', true],
  ['**/*.ts', 'a/b/c.ts', true],
  ['**/*.ts', 'a/b/c.tsx', false],
  ['src/*.ts', 'src/a.ts', true],
  ['src/*.ts', 'src/a/b.ts', false],
  ['src/**', 'src/a/b.ts', true],
  ['src/**', 'src', false],
  ['src/**', 'src/', true],
  ['**', '', true],
  ['**', 'a/b', true],
  ['*', 'a/b', false],
  ['*', '.hidden', true],
  ['**/*.json', '.hidden/config.json', true],
  ['*.md', 'docs/a.md', false],
  ['file?.[ch]', 'file1.c', true],
  ['file?.[ch]', 'file1.o', false],
  ['file?.c', 'file/.c', false],
  ['a.b', 'axb', false],
  ['a.b', 'a.b', true],
  ['[!a]', 'b', true],
  ['[!a]', 'a', false],
  ['[^a]', 'b', true],
  ['[a-c]x', 'bx', true],
  ['[a-c]x', 'dx', false],
  ['[a-]', '-', true],
  ['[-a]', '-', true],
  ['[a-b-c]', '-', true],
  ['[a-b-c]', 'c', true],
  ['a[/]b', 'a/b', true],
  ['a[!x]b', 'a/b', true],
  ['a[!]b', 'a/b', true],
  ['[a', '[a', true],
  ['x]', 'x]', true],
  ['{test,spec}/**', 'spec/a.js', true],
  ['{test,spec}/**', 'specs/a.js', false],
  ['a{b,{c,d}}e', 'ade', true],
  ['a{b,{c,d}}e', 'abde', false],
  ['{,x}y', 'y', true],
  ['{,x}y', 'xy', true],
  ['{}a', 'a', true],
  ['a}b', 'a}b', true],
  ['a,b', 'a,b', true],
  ['{a/b,c}/d', 'a/b/d', true],
  ['{**/x,y}', 'p/q/x', true],
  ['{**/x,y}', 'x', false],
  ['a**b', 'a/x/b', true],
  ['a/**b', 'a/x/yb', true],
  ['x**/y', 'x/y', true],
  ['x**/y', 'xq/r/y', true],
  ['***', 'a/b', true],
  ['**/**/x', 'x', true],
  ['**/**/x', 'a/b/x', true],
  ['**/x', 'a//x', false],
  ['(a|b)', '(a|b)', true],
  ['(a|b)', 'a', false],
  ['a+', 'aa', false],
  ['a+', 'a+', true],
  ['$x^', '$x^', true],
  ['a\\b', 'a\\b', true],
  ['[\\]', '\\', true],
  ['test', 'test', true],
  ['test', 'tests', false],
  ['test/', 'test/', true],
];

describe('compileGlob: what a glob matches', () => {
  it.each(ordinaryGlobs)('%j matches %j: %s', (glob, path, expected) => {
    expect(compileGlob(glob).test(path)).toBe(expected);
  });

  it.each<[string, string, string, boolean]>([
    ['** crosses a line break', 'test/**', 'test/a\nb.js', true],
    ['? takes one code point', 'a?b', 'a😀b', true],
    ['a class may hold ] first', '[]a]', ']', true],
  ])('%s (where the RegExp differed)', (_, glob, path, expected) => {
    expect(compileGlob(glob).test(path)).toBe(expected);
  });
});

describe('compileGlob with escapes (the glob tool): a backslash makes the next character literal', () => {
  it.each<[string, string, boolean]>([
    ['app/\\[id\\]/page.tsx', 'app/[id]/page.tsx', true],
    ['app/\\[id\\]/page.tsx', 'app/i/page.tsx', false],
    ['app/\\[id]/page.tsx', 'app/[id]/page.tsx', true],
    ['\\*.ts', '*.ts', true],
    ['\\*.ts', 'a.ts', false],
    ['a\\?', 'a?', true],
    ['a\\?', 'ab', false],
    ['\\{a,b\\}', '{a,b}', true],
    ['\\{a,b\\}', 'a', false],
    ['{a\\,b,c}', 'a,b', true],
    ['{a\\,b,c}', 'b', false],
    ['a\\\\b', 'a\\b', true],
    ['\\a', 'a', true],
    ['[\\]]', ']', true],
    ['[\\]a]', 'a', true],
    ['[\\!a]', '!', true],
    ['[\\!a]', 'b', false],
    ['[a\\-c]', '-', true],
    ['[a\\-c]', 'b', false],
    ['[!\\]]', ']', false],
    ['[!\\]]', 'x', true],
    ['\\[a', '[a', true],
    ['x\\😀', 'x😀', true],
  ])('%j matches %j: %s', (glob, path, expected) => {
    expect(compileGlob(glob, { escapes: true }).test(path)).toBe(expected);
  });

  it('means the same as without escapes for every glob with no backslash', () => {
    const withoutBackslash = ordinaryGlobs.filter(([glob]) => !glob.includes('\\'));
    expect(withoutBackslash.length).toBeGreaterThan(60);
    for (const [glob, path, expected] of withoutBackslash) {
      expect({ glob, path, matches: compileGlob(glob, { escapes: true }).test(path) }).toEqual({ glob, path, matches: expected });
    }
  });

  it('leaves a backslash literal without escapes, as spec.verify.protect always read it', () => {
    expect(compileGlob('app/\\[id\\]/page.tsx').test('app/[id]/page.tsx')).toBe(false);
    expect(protectedPaths(['a\\b'])('a\\b')).toBe(true);
  });

  it('refuses a trailing backslash that escapes nothing', () => {
    expect(() => compileGlob('src\\', { escapes: true })).toThrow(InvalidGlobError);
    expect(() => compileGlob('src\\', { escapes: true })).toThrow('ends with a \\ that escapes nothing');
  });
});

describe('compileGlob: a hostile glob', () => {
  const path = 'src/components/widgets/eeeeeeeeee.ts';

  // A backtracking RegExp took 25 s on 10 `**` and longer than anyone waited on these.
  it.each([
    ['60 asterisks', `${'*'.repeat(60)}X`, 'src/a/eeX'],
    ['stars between letters', `src/${'*e'.repeat(40)}X`, `src/${'e'.repeat(40)}X`],
    ['stars between letters across segments', `${'**e'.repeat(40)}X`, `${'e/'.repeat(39)}eX`],
    ['repeated directory spans', `${'**/'.repeat(40)}X`, 'a/b/X'],
    ['a glob tool pattern of 10,000 characters', `${'*'.repeat(9_999)}X`, 'a/X'],
  ])('answers at once: %s', (_, glob, matching) => {
    const matcher = compileGlob(glob);
    expect(matcher.test(path)).toBe(false);
    expect(matcher.test(matching)).toBe(true);
  });

  it('protects a whole clone with the longest globs a run may list', () => {
    const globs = Array.from({ length: 64 }, (_, index) => `${index % 2 === 0 ? '*' : '**e'.repeat(20)}${'*'.repeat(195)}X`);
    const isProtected = protectedPaths(globs);
    const files = Array.from({ length: 2_000 }, (_, index) => `src/eeee/deep${index}/eeeee/more/eeeeeeeeeeeeeeeeeeee${index}.ts`);
    expect(files.filter(isProtected)).toEqual([]);
    expect(isProtected('src/eeee/X')).toBe(true);
  });
});

describe('compileGlob: a glob that names no paths', () => {
  it.each([
    ['test/{unit,e2e', 'opens a { it never closes'],
    ['{a,{b}', 'opens a { it never closes'],
    ['[z-a]', 'has the range z-a written backwards'],
    ['src/[!9-0].ts', 'has the range 9-0 written backwards'],
  ])('%j is refused: %s', (glob, problem) => {
    expect(() => compileGlob(glob)).toThrow(InvalidGlobError);
    expect(() => compileGlob(glob)).toThrow(problem);
  });

  it('is refused in spec.verify.protect with a message that says what to fix', () => {
    const unclosed = verifySpec.safeParse({ command: 'true', protect: ['test/**', 'test/{unit'] });
    expect(unclosed.success).toBe(false);
    expect(unclosed.error?.issues).toEqual([
      expect.objectContaining({
        path: ['protect', 1],
        message: expect.stringContaining('the glob "test/{unit" opens a { it never closes: close the alternation'),
      }),
    ]);
    const backwards = verifySpec.safeParse({ command: 'true', protect: ['[z-a]'] });
    expect(backwards.error?.issues).toEqual([
      expect.objectContaining({ path: ['protect', 0], message: expect.stringContaining('range z-a written backwards') }),
    ]);
    expect(verifySpec.safeParse({ command: 'true', protect: ['test/{unit,e2e}/**', 'tests/[a-z]*.py', 'x/'] }).success).toBe(true);
  });
});
