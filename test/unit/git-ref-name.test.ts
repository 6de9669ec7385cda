// The ref-name check shared by spec.repository.revision and spec.publish's branch and base
// (api/git-ref-name.ts): what git check-ref-format accepts, narrowed to printable ASCII and to
// names git cannot read as an option or a forced refspec. Every name the check accepts is asked
// of real git too, so the table cannot drift from git's rules in the direction that matters.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { codingRunSpec } from '../../operator/src/api/coding-run-spec.ts';
import { isRefName, REF_NAME_PATTERN, REF_NAME_RULES, refNameProblem } from '../../operator/src/api/git-ref-name.ts';
import { branchNameProblem, isBranchName } from '../../operator/src/api/publish-spec.ts';
import { renderedBranchProblem } from '../../operator/src/publish/publish-plan.ts';

/** git check-ref-format's answer (a NUL cannot even reach git: the spawn refuses it). */
const gitAccepts = (name: string) => !name.includes('\0') && spawnSync('git', ['check-ref-format', '--allow-onelevel', name]).status === 0;

const run = (revision: string) =>
  codingRunSpec.safeParse({
    task: 't',
    repository: { url: 'https://github.com/acme/webapp.git', revision },
    model: { provider: 'scripted', scriptRef: { name: 's' } },
  });

const ACCEPTED = [
  'main',
  'v1.2.3',
  'feature/x',
  'refs/pull/12/head',
  'refs/heads/main',
  'HEAD',
  'release-2024.10',
  'a'.repeat(40),
  '4f1c2e9',
  '0123456789abcdef0123456789abcdef01234567', // a SHA-1 commit id
  '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', // a SHA-256 commit id
  'x.lockfile/y',
  'a.b/c.d',
  'x@y',
  'a'.repeat(255),
];

// [name, why] — the first group is git's own refusals, the second the spec's narrowing.
const REFUSED: Array<[string, string]> = [
  ['main:refs/heads/planted', 'a refspec (":")'],
  ['+refs/*:refs/*', 'a forced refspec'],
  ['refs/heads/*:refs/replace/*', 'a glob refspec'],
  ['refs/heads/*', 'a glob'],
  ['a?b', '"?"'],
  ['a[b', '"["'],
  ['a\\b', 'a backslash'],
  ['a^b', '"^"'],
  ['a~1', '"~"'],
  ['a b', 'a space'],
  ['main\u0000', 'NUL'],
  ['main\u0001x', 'a control character'],
  ['main\t', 'a tab'],
  ['main\u007f', 'DEL'],
  ['refs/heads/../x', '".."'],
  ['a..b', '".."'],
  ['a@{1}', '"@{"'],
  ['@', '"@" alone'],
  ['a//b', '"//"'],
  ['/a', 'a leading "/"'],
  ['a/', 'a trailing "/"'],
  ['a.', 'a trailing "."'],
  ['.a', 'a part starting with "."'],
  ['a/.b', 'a part starting with "."'],
  ['a.lock', 'a part ending with ".lock"'],
  ['team.lock/x', 'a part ending with ".lock"'],
  ['', 'empty'],
  ['a'.repeat(256), 'too long'],
  // Valid to git, refused by the spec:
  ['-x', 'an option'],
  ['--upload-pack=touch /tmp/x', 'an option'],
  ['+main', 'a forced refspec'],
  ['main\u00a0', 'a no-break space (non-ASCII)'],
  ['mаin', 'a Cyrillic "а" (non-ASCII)'],
];

describe('git ref names (spec.repository.revision, publish branches)', () => {
  it.each(ACCEPTED)('accepts %s, as git check-ref-format does', (name) => {
    expect(refNameProblem(name)).toBeUndefined();
    expect(gitAccepts(name)).toBe(true);
    expect(run(name).success).toBe(true);
  });

  it.each(REFUSED)('refuses %j (%s), in the schema too', (name) => {
    expect(refNameProblem(name)).toMatch(/^must be a git ref name/);
    const parsed = run(name);
    expect(parsed.success).toBe(false);
    expect(parsed.error!.issues.map((issue) => issue.path.join('.'))).toContain('repository.revision');
    if (name.length > 0 && name.length <= 255) {
      expect(parsed.error!.issues.map((issue) => issue.message).join('\n')).toMatch(/must be a git ref name/);
    }
  });

  it('is stricter than git, never looser: every refusal git makes, the check makes', () => {
    const gitRefusals = REFUSED.filter(([name]) => name !== '' && !gitAccepts(name));
    expect(gitRefusals.length).toBeGreaterThan(20); // the control: git refuses most of the table
    for (const [name] of gitRefusals) expect(isRefName(name)).toBe(false);
  });

  it('reads the same in the pattern and the rules the CRD gets: ASCII ranges, and CEL for each rule', () => {
    expect(REF_NAME_PATTERN).not.toMatch(/\\[sSdwWbB]/);
    for (const rule of REF_NAME_RULES) {
      expect(rule.rule).toMatch(/self/);
      expect(rule.message).toMatch(/^must be a git ref name/);
    }
  });
});

describe('publish branch names share the ref-name rules', () => {
  it.each([
    ['team.lock/x', 'a part ending with ".lock"'],
    ['a/.b', 'a part starting with "."'],
    ['a@{1}', '"@{"'],
  ])('refuses %j (%s), as a name and as a template', (name) => {
    expect(isBranchName(name)).toBe(false);
    const parsed = codingRunSpec.safeParse({
      task: 't',
      repository: { url: 'https://x/y.git', credentialsSecretRef: { name: 's' } },
      model: { provider: 'scripted', scriptRef: { name: 'c' } },
      publish: { branch: name.replace('x', '{run}') },
    });
    expect(parsed.success).toBe(false);
  });

  it('renders the branch for the run and says what is wrong with it', () => {
    expect(renderedBranchProblem('chamvi/{run}', 'team', 'fix-1')).toBeUndefined();
    expect(renderedBranchProblem('chamvi/{run}', 'team', 'fix.lock')).toMatch(
      /^spec\.publish\.branch renders to "chamvi\/fix\.lock" for this run, which must be a git ref name: no part .* ".lock"; change the template$/,
    );
    expect(renderedBranchProblem('{namespace}/{run}', 'team', 'r'.repeat(253))).toMatch(/at most 255 characters/);
    expect(branchNameProblem('refs/heads/x')).toMatch(/not a full ref/);
  });
});
