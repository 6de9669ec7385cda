// Issue #12: what a run may ask to reach is bounded by the admin's allowEgress, decided once at
// acceptance (InvalidSpec naming the host), and the pattern grammar refuses IP literals.
import { describe, expect, it } from 'vitest';
import { EGRESS_PATTERN } from '../../operator/src/api/egress-pattern.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { parseHostPattern, patternCovers, patternMatches } from '../../operator/src/egress/host-pattern.ts';
import { isEgressAllowed } from '../../operator/src/reconcile/allow-egress.ts';
import { parseSpec, validateRun } from '../../operator/src/reconcile/validate-run.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

describe('egress host patterns', () => {
  it.each([
    'registry.npmjs.org',
    '*.pythonhosted.org',
    'proxy.golang.org:443',
    '*',
    '*:8443',
    'registry.test:4873',
    'internal',
    'a-b.c0.io',
  ])('accepts %s', (pattern) => expect(EGRESS_PATTERN.test(pattern)).toBe(true));

  it.each([
    ['an IPv4 literal', '10.0.0.1'],
    ['an IPv4 literal with a port', '169.254.169.254:80'],
    ['a decimal IPv4 literal', '2130706433'],
    ['a hex IPv4 literal', '0x7f.1'],
    ['an IPv6 literal', '[::1]:443'],
    ['upper case (not canonical)', 'Registry.npmjs.org'],
    ['a wildcard inside a label', 'reg*.npmjs.org'],
    ['a wildcard in the middle', 'a.*.org'],
    ['a scheme', 'https://registry.npmjs.org'],
    ['a path', 'registry.npmjs.org/foo'],
    ['port 0', 'registry.npmjs.org:0'],
    ['port 65536', 'registry.npmjs.org:65536'],
    ['a trailing dot', 'registry.npmjs.org.'],
    ['an empty label', 'registry..org'],
    ['a space', 'registry npmjs.org'],
  ])('refuses %s', (_why, pattern) => expect(EGRESS_PATTERN.test(pattern)).toBe(false));

  it.each([
    ['registry.npmjs.org', 'registry.npmjs.org', 443, true],
    ['registry.npmjs.org', 'registry.npmjs.org', 80, true],
    ['registry.npmjs.org', 'registry.npmjs.org', 22, false],
    ['registry.npmjs.org', 'evil-registry.npmjs.org', 443, false],
    ['registry.npmjs.org', 'registry.npmjs.org.evil.io', 443, false],
    ['*.pythonhosted.org', 'files.pythonhosted.org', 443, true],
    ['*.pythonhosted.org', 'a.b.pythonhosted.org', 443, true],
    ['*.pythonhosted.org', 'pythonhosted.org', 443, false],
    ['*.pythonhosted.org', 'evilpythonhosted.org', 443, false],
    ['proxy.golang.org:8443', 'proxy.golang.org', 8443, true],
    ['proxy.golang.org:8443', 'proxy.golang.org', 443, false],
    ['*', 'anything.example', 443, true],
    ['*', 'anything.example', 25, false],
    ['*:25', 'mail.example', 25, true],
  ] as const)('%s opens %s:%d: %s', (pattern, host, port, expected) => {
    expect(patternMatches(parseHostPattern(pattern)!, host, port)).toBe(expected);
  });

  it.each([
    ['*', 'registry.npmjs.org', true],
    ['*', '*', true],
    ['*', '*:22', false],
    ['*.npmjs.org', 'registry.npmjs.org', true],
    ['*.npmjs.org', '*.npmjs.org', true],
    ['*.npmjs.org', '*.a.npmjs.org', true],
    ['*.npmjs.org', 'npmjs.org', false],
    ['*.npmjs.org', '*', false],
    ['registry.npmjs.org', 'registry.npmjs.org:443', true],
    ['registry.npmjs.org:443', 'registry.npmjs.org', false],
    ['registry.npmjs.org', '*.registry.npmjs.org', false],
  ] as const)('admin %s covers run %s: %s', (outer, inner, expected) => {
    expect(patternCovers(parseHostPattern(outer)!, parseHostPattern(inner)!)).toBe(expected);
  });
});

describe('isEgressAllowed (spec.sandbox.egress.allow within allowEgress)', () => {
  const admin = ['registry.npmjs.org', '*.pythonhosted.org', 'registry.test:4873'];

  it.each([
    [[], [], true],
    [[], ['registry.npmjs.org'], false],
    [admin, [], true],
    [admin, ['registry.npmjs.org'], true],
    [admin, ['files.pythonhosted.org', 'registry.test:4873'], true],
    [admin, ['registry.test'], false],
    [admin, ['*'], false],
    [['*'], ['*', 'x.io:443'], true],
  ] as const)('allowEgress %j, run %j: %s', (allowEgress, requested, expected) => {
    expect(isEgressAllowed(requested, allowEgress).allowed).toBe(expected);
  });

  it('names the host a run asks for beyond allowEgress, and the list it is bounded by', () => {
    const decision = isEgressAllowed(['registry.npmjs.org', 'evil.example'], admin);
    expect(decision).toMatchObject({ allowed: false });
    const { message } = decision as { message: string };
    expect(message).toContain('"evil.example"');
    expect(message).toContain('allowEgress');
    expect(message).toContain('registry.npmjs.org, *.pythonhosted.org');
  });

  it('says allowEgress is empty when it is', () => {
    expect(isEgressAllowed(['registry.npmjs.org'], [])).toMatchObject({ message: expect.stringContaining('allowEgress is empty') });
  });
});

describe('validateRun with egress', () => {
  const found = { secrets: {}, configMaps: { script: ['script.json'] }, secretLabels: {} };
  const validate = (allow: string[], config: Record<string, unknown>) => {
    const run = codingRunFixture({ spec: { sandbox: { egress: { allow } } } });
    const parsed = parseSpec(run);
    if (!parsed.ok) throw new Error(parsed.refusal.message);
    return validateRun(run, parsed.spec, loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], ...config }, {}), found);
  };
  const proxy = { egressKey: 'k'.repeat(32), egressProxy: { host: '10.96.0.50' } };

  it('refuses a host beyond allowEgress as InvalidSpec naming the host', () => {
    expect(validate(['evil.example'], { ...proxy, allowEgress: ['registry.npmjs.org'] })).toEqual({
      reason: 'InvalidSpec',
      message: expect.stringContaining('"evil.example"'),
    });
  });

  it('refuses egress when the operator has no proxy, naming what is missing', () => {
    expect(validate(['registry.npmjs.org'], { allowEgress: ['registry.npmjs.org'] })).toEqual({
      reason: 'InvalidSpec',
      message: expect.stringContaining('egressKey and egressProxy.service unset'),
    });
  });

  it('accepts a run within allowEgress when a proxy is configured, and a run without egress anywhere', () => {
    expect(validate(['registry.npmjs.org'], { ...proxy, allowEgress: ['registry.npmjs.org'] })).toBeUndefined();
    expect(validate([], {})).toBeUndefined();
  });

  it('parseSpec refuses an IP literal in the run as InvalidSpec (the operator re-checks what the CRD checks)', () => {
    const parsed = parseSpec(codingRunFixture({ spec: { sandbox: { egress: { allow: ['169.254.169.254'] } } } }));
    expect(parsed).toMatchObject({ ok: false, refusal: { reason: 'InvalidSpec', message: expect.stringContaining('egress') } });
  });
});
