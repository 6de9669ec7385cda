// Which RuntimeClass a run may name (reconcile/allow-runtime-class.ts): the admin's sandboxing
// runtime, a warm pool's, or one listed; never another that would step out of it.
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { isRuntimeClassAllowed } from '../../operator/src/reconcile/allow-runtime-class.ts';

const gvisor = loadOperatorConfig(
  {
    sandboxPlacement: { runtimeClassName: 'gvisor' },
    warmPools: [{ name: 'kata', namespace: 'agents', size: 1, runtimeClassName: 'kata' }],
    allowRuntimeClasses: ['kata-qemu'],
  },
  {},
);

describe('isRuntimeClassAllowed', () => {
  it.each([
    ['none named: the admin default', undefined, true],
    ["the admin's sandboxing runtime", 'gvisor', true],
    ["a warm pool's of the run's namespace", 'kata', true],
    ['one in allowRuntimeClasses', 'kata-qemu', true],
    ['runc, out of gvisor', 'runc', false],
    ['any other class the cluster has', 'nvidia', false],
  ])('%s: %s', (_, name, allowed) => {
    expect(isRuntimeClassAllowed(name, gvisor, 'agents').allowed).toBe(allowed);
  });

  it("does not take a warm pool's class in another namespace: a pool on runc in one team is not runc for every team", () => {
    expect(isRuntimeClassAllowed('kata', gvisor, 'team-b').allowed).toBe(false);
    expect(isRuntimeClassAllowed('kata-qemu', gvisor, 'team-b').allowed).toBe(true);
  });

  it('says what is allowed and what to do', () => {
    const refused = isRuntimeClassAllowed('runc', gvisor, 'agents');
    expect(refused.allowed ? '' : refused.message).toBe(
      'spec.sandbox.runtimeClassName "runc" is not allowed (allowed: gvisor, kata, kata-qemu); ' +
        "leave it out for the operator's sandbox runtime, name an allowed one, or ask an admin to add it to allowRuntimeClasses",
    );
  });
});
