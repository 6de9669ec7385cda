// spec.verify on a real API server: kubectl explain describes it, the parse fills defaults, bad
// protect globs and timeouts are refused at `kubectl apply` naming the field, and the grader
// cannot be changed once the run exists.
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import { createNamespace, kubectl } from '../support/cluster.ts';

const NAMESPACE = 'verify-crd-test';

const run = (name: string, verify: Record<string, unknown> | undefined) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace: NAMESPACE },
  spec: {
    task: 'Fix it',
    repository: { url: 'https://github.com/acme/webapp.git' },
    model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } },
    ...(verify ? { verify } : {}),
  },
});

const apply = (manifest: object) => kubectl(['apply', '-f', '-'], { input: stringify(manifest) });

beforeAll(async () => {
  await createNamespace(NAMESPACE, { restricted: true });
});

describe('spec.verify on a real API server', () => {
  it('is described by kubectl explain', async () => {
    let result = await kubectl(['explain', 'codingrun.spec.verify']);
    for (let attempt = 0; attempt < 30 && !result.stdout.includes('protect'); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      result = await kubectl(['explain', 'codingrun.spec.verify']);
    }
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/command\s+<string> -required-/);
    expect(result.stdout).toContain('VerificationFailed');
    const status = await kubectl(['explain', 'codingrun.status.result.verification']);
    expect(status.stdout).toMatch(/outputTail\s+<string> -required-/);
  });

  it("is stored as written, and every reader's parse fills its defaults (#15.3: no server-side defaults)", async () => {
    expect((await apply(run('defaults', { command: 'npm test' }))).code).toBe(0);
    const result = await kubectl(['get', 'crun', 'defaults', '-n', NAMESPACE, '-o', 'json']);
    const stored = JSON.parse(result.stdout) as CodingRun;
    expect(stored.spec.verify).toEqual({ command: 'npm test' });
    const parsed = parseSpec(stored);
    expect(parsed.ok && parsed.spec.verify).toEqual({ command: 'npm test', timeout: '10m', required: true, retries: 0, protect: [] });
  });

  it.each([
    [
      'an absolute protect glob',
      { command: 'true', protect: ['/etc/passwd'] },
      /spec\.verify\.protect\[0\]: Invalid value: "\/etc\/passwd"/,
    ],
    [
      'a protect glob that leaves the repository',
      { command: 'true', protect: ['test/../../x'] },
      /spec\.verify\.protect\[0\]: Invalid value.*\.\. segment/,
    ],
    [
      'a protect glob with a ./ segment',
      { command: 'true', protect: ['./test/**'] },
      /spec\.verify\.protect\[0\]: Invalid value.*without \. segments/,
    ],
    [
      'a protect glob naming .git (never restored)',
      { command: 'true', protect: ['test/**', '.git/**'] },
      /spec\.verify\.protect\[1\]: Invalid value.*may not name \.git/,
    ],
    [
      'a protect glob naming .git under a leading **/',
      { command: 'true', protect: ['**/.git/hooks/*'] },
      /protect\[0\]: Invalid value.*may not name \.git/,
    ],
    ['a timeout past 30m', { command: 'true', timeout: '31m' }, /spec\.verify\.timeout: Invalid value.*at most 30m/],
    ['a zero timeout', { command: 'true', timeout: '0s' }, /spec\.verify\.timeout: Invalid value.*timeout must be at least 1ms/],
    ['too many retries', { command: 'true', retries: 11 }, /spec\.verify\.retries: Invalid value: 11/],
    ['an empty command', { command: '' }, /spec\.verify\.command: Invalid value: ""/],
  ])('refuses %s and names the field', async (_, verify, message) => {
    const result = await apply(run('refused', verify));
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
  });

  it('accepts globs that do not name .git, wildcards that could match it and a leading **/ included', async () => {
    const result = await apply(
      run('git-free-globs', { command: 'true', protect: ['**/*.py', 'test/**', '.github/**', '.gitignore', '*.md', '*', '.g*'] }),
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('refuses to change or drop the grader of an existing run', async () => {
    expect((await apply(run('fixed-grader', { command: 'npm test', protect: ['test/**'] }))).code).toBe(0);
    const loosened = await apply(run('fixed-grader', { command: 'npm test', protect: [] }));
    expect(loosened.code).not.toBe(0);
    expect(loosened.stderr).toMatch(/spec\.verify: Forbidden: spec\.verify cannot change after the run is created/);
    const dropped = await apply(run('fixed-grader', undefined));
    expect(dropped.code).not.toBe(0);
    expect(dropped.stderr).toMatch(/spec\.verify cannot change/);
  });

  it('refuses to add a grader to a run created without one', async () => {
    expect((await apply(run('no-grader', undefined))).code).toBe(0);
    const added = await apply(run('no-grader', { command: 'true' }));
    expect(added.code).not.toBe(0);
    expect(added.stderr).toMatch(/spec\.verify cannot change/);
  });
});
