// Security #11.6 and #11.14: the names the operator derives for a run are the run's alone (a
// hash of its uid), stay DNS labels, and a name or a label is never taken for ownership.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { buildDiffConfigMap } from '../../operator/src/reconcile/diff-config-map.ts';
import { diffConfigMapName, networkPolicyName, runNameLabel, runPodName, sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { controllingRunName, isOwnedByRun, whyNotOwned } from '../../operator/src/reconcile/ownership.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const run = (name: string, uid: string) => ({ metadata: { name, uid } });

describe('security #11.6 derived names are collision-free', () => {
  it('gives two runs whose long names share the cut prefix different names (the old scheme cut the name and hashed the name)', () => {
    const long = 'a'.repeat(70);
    const a = run(`${long}x`, '0b6c2f7e-1111-4a4a-9a9a-000000000001');
    const b = run(`${long}y`, '0b6c2f7e-1111-4a4a-9a9a-000000000002');
    for (const derive of [sandboxPodName, networkPolicyName, diffConfigMapName]) {
      expect(derive(a)).not.toBe(derive(b));
      expect(derive(a).length).toBeLessThanOrEqual(63);
      expect(derive(a)).toMatch(DNS_LABEL);
    }
  });

  it("gives a run named like another run's derived prefix a different name", () => {
    // Under the old scheme, `<prefix>-<hash of name>` was reachable by naming a run so.
    const victim = run('b'.repeat(80), 'uid-victim');
    const victimPod = sandboxPodName(victim);
    const attacker = run(victimPod.replace(/-sandbox$/, ''), 'uid-attacker');
    expect(sandboxPodName(attacker)).not.toBe(victimPod);
    expect(diffConfigMapName(attacker)).not.toBe(diffConfigMapName(victim));
  });

  it('gives a re-created run of the same name (a new uid) new names', () => {
    expect(sandboxPodName(run('fix', 'uid-1'))).not.toBe(sandboxPodName(run('fix', 'uid-2')));
  });

  it('is deterministic and readable: a prefix of the run name, 16 hex digits of the uid hash, the kind', () => {
    const name = sandboxPodName(run('fix-login', 'uid-1'));
    expect(name).toBe(sandboxPodName(run('fix-login', 'uid-1')));
    expect(name).toMatch(/^fix-login-[0-9a-f]{16}-sandbox$/);
    expect(diffConfigMapName(run('fix-login', 'uid-1'))).toMatch(/^fix-login-[0-9a-f]{16}-diff$/);
  });

  it('stays a DNS label (a hostname) for a run name with dots or a cut ending in a dash', () => {
    expect(sandboxPodName(run('release.v1.2', 'u'))).toMatch(DNS_LABEL);
    const cutAtDash = `${'c'.repeat(36)}-${'d'.repeat(30)}`;
    expect(sandboxPodName(run(cutAtDash, 'u'))).toMatch(DNS_LABEL);
    expect(sandboxPodName(run(cutAtDash, 'u'))).not.toMatch(/--/);
  });

  it('refuses to derive a name without a uid', () => {
    expect(() => sandboxPodName(run('fix', ''))).toThrow(/uid/);
  });
});

describe('security #11.14 ownership is the controller ownerReference, not a name or a label', () => {
  const ours = run('fix', 'uid-1');
  const labels = { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run': 'fix', 'chamvi.dev/run-uid': 'uid-1' };
  const controller = (uid: string, kind = 'CodingRun') => ({ apiVersion: 'chamvi.dev/v1alpha1', kind, name: 'fix', uid, controller: true });

  it.each([
    ["the operator's labels and the run as controller", { labels, ownerReferences: [controller('uid-1')] }, true],
    ["the operator's labels but no ownerReference", { labels }, false],
    ['the run as a non-controlling owner only', { labels, ownerReferences: [{ ...controller('uid-1'), controller: false }] }, false],
    ['another run as controller', { labels, ownerReferences: [controller('uid-2')] }, false],
    ["another kind with the run's uid as controller", { labels, ownerReferences: [controller('uid-1', 'Deployment')] }, false],
    [
      "the run as controller but not the operator's labels",
      { labels: { 'chamvi.dev/run-uid': 'uid-1' }, ownerReferences: [controller('uid-1')] },
      false,
    ],
  ])('%s → owned: %s', (_, metadata, owned) => {
    expect(isOwnedByRun({ metadata }, ours)).toBe(owned);
  });

  it('says what makes an object foreign', () => {
    expect(whyNotOwned({ metadata: { labels } }, ours)).toBe('it has no controller ownerReference');
    expect(whyNotOwned({ metadata: { labels, ownerReferences: [controller('uid-2')] } }, ours)).toContain('uid-2, not this run (uid-1)');
  });
});

describe('the chamvi.dev/run label of a run with a long name (#13.9)', () => {
  const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
  const long = `a-run-with-a-long-name-${'x'.repeat(60)}`;

  it('is the name itself when it fits a label value', () => {
    expect(runNameLabel('fix-login-bug')).toBe('fix-login-bug');
    expect(runNameLabel('x'.repeat(63))).toBe('x'.repeat(63));
  });

  it.each([long, `${'a.'.repeat(100)}b`, `${'y'.repeat(46)}-${'z'.repeat(100)}`])('is a valid label value of at most 63 for %s', (name) => {
    const value = runNameLabel(name);
    expect(value.length).toBeLessThanOrEqual(63);
    expect(value).toMatch(LABEL_VALUE);
  });

  it('keeps two long names that share their first 63 characters apart', () => {
    expect(runNameLabel(`${long}-1`)).not.toBe(runNameLabel(`${long}-2`));
  });

  it('is what the pod, the NetworkPolicy and the diff ConfigMap carry, and the controller ownerReference names the whole run', () => {
    const spec = codingRunSpec.parse({
      task: 't',
      repository: { url: 'https://github.com/acme/x' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
    });
    const parsed = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: long, namespace: 'agents', uid: 'uid-long' },
      spec,
    } as ParsedCodingRun;
    const config = loadOperatorConfig({}, {});
    for (const object of [buildSandboxPod(parsed, config), buildDiffConfigMap(parsed, 'diff')]) {
      expect(object.metadata!.labels!['chamvi.dev/run']).toBe(runNameLabel(long));
      expect(controllingRunName(object)).toBe(long);
    }
  });
});

describe('runPodName', () => {
  it("names the pod in status (a claimed warm pool pod) before the run's derived sandbox pod name", () => {
    const fresh = run('r', 'uid-1');
    expect(runPodName(fresh)).toBe(sandboxPodName(fresh));
    expect(runPodName({ ...fresh, status: {} })).toBe(sandboxPodName(fresh));
    expect(runPodName({ ...fresh, status: { podName: 'pool-abc' } })).toBe('pool-abc');
  });
});
