// sandboxPlacement: the config that puts sandbox pods (and the isolation probe, so its verdict
// is about the same nodes) on chosen nodes, with tolerations, a RuntimeClass and a PriorityClass.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { buildIsolationProbePod } from '../../operator/src/reconcile/isolation-probe-pod.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';

const placement = {
  nodeSelector: { 'chamvi.dev/node': 'real' },
  tolerations: [{ key: 'chamvi.dev/real-node', operator: 'Equal', value: 'true', effect: 'NoSchedule' }],
  runtimeClassName: 'gvisor',
  priorityClassName: 'sandboxes-low',
};

function parsedRun(sandbox: Record<string, unknown> = {}): ParsedCodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: 'fix', namespace: 'agents', uid: 'uid-1' },
    spec: codingRunSpec.parse({
      task: 'Fix it',
      repository: { url: 'https://github.com/acme/x' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
      sandbox,
    }),
  };
}

describe('sandboxPlacement', () => {
  it('places nothing by default: no nodeSelector, tolerations, runtimeClassName or priorityClassName', () => {
    const spec = buildSandboxPod(parsedRun(), loadOperatorConfig({}, {})).spec!;
    for (const field of ['nodeSelector', 'tolerations', 'runtimeClassName', 'priorityClassName'] as const) {
      expect(spec[field], field).toBeUndefined();
    }
  });

  it('puts the configured placement on the sandbox pod', () => {
    const spec = buildSandboxPod(parsedRun(), loadOperatorConfig({ sandboxPlacement: placement }, {})).spec!;
    expect(spec.nodeSelector).toEqual({ 'chamvi.dev/node': 'real' });
    expect(spec.tolerations).toEqual(placement.tolerations);
    expect(spec.runtimeClassName).toBe('gvisor');
    expect(spec.priorityClassName).toBe('sandboxes-low');
  });

  it("lets a run's own runtimeClassName win over the configured one", () => {
    const config = loadOperatorConfig({ sandboxPlacement: placement }, {});
    expect(buildSandboxPod(parsedRun({ runtimeClassName: 'kata' }), config).spec!.runtimeClassName).toBe('kata');
    expect(buildSandboxPod(parsedRun({ runtimeClassName: 'kata' }), loadOperatorConfig({}, {})).spec!.runtimeClassName).toBe('kata');
  });

  it('puts the same placement on the isolation probe pod, so it probes the nodes sandboxes run on', () => {
    const config = loadOperatorConfig({ sandboxPlacement: placement }, {});
    const spec = buildIsolationProbePod('agents', 'abc', config, 60).spec!;
    expect(spec).toMatchObject({
      nodeSelector: placement.nodeSelector,
      tolerations: placement.tolerations,
      runtimeClassName: 'gvisor',
      priorityClassName: 'sandboxes-low',
    });
  });

  it('does not share the config objects with the pod (a later edit of one cannot change the other)', () => {
    const config = loadOperatorConfig({ sandboxPlacement: placement }, {});
    const spec = buildSandboxPod(parsedRun(), config).spec!;
    spec.nodeSelector!.extra = 'x';
    spec.tolerations![0]!.value = 'changed';
    expect(config.sandboxPlacement.nodeSelector).toEqual({ 'chamvi.dev/node': 'real' });
    expect(config.sandboxPlacement.tolerations[0]!.value).toBe('true');
  });

  it.each([
    [{ nodeSelector: { 'bad key!': 'x' } }, /config key sandboxPlacement\.nodeSelector\.bad key!: Invalid key/],
    [{ nodeSelector: { pool: 'has space' } }, /config key sandboxPlacement\.nodeSelector\.pool: must be a label value/],
    [
      { tolerations: [{ key: 'a', operator: 'Exists', value: 'v' }] },
      /sandboxPlacement\.tolerations\.0: a toleration with operator Exists takes no value/,
    ],
    [
      { tolerations: [{ operator: 'Equal', value: 'v' }] },
      /sandboxPlacement\.tolerations\.0: a toleration without a key needs operator Exists/,
    ],
    [{ tolerations: [{ key: 'a', effect: 'NoRun' }] }, /config key sandboxPlacement\.tolerations\.0\.effect: /],
    [{ tolerations: [{ key: 'a', tolerationSecond: 5 }] }, /config key sandboxPlacement\.tolerations\.0: .*tolerationSecond/],
    [{ runtimeClassName: 'GVisor' }, /config key sandboxPlacement\.runtimeClassName: /],
    [{ priorityClass: 'x' }, /config key sandboxPlacement: .*priorityClass/],
  ])('refuses %j at start-up, naming the key', (bad, message) => {
    expect(() => loadOperatorConfig({ sandboxPlacement: bad }, {})).toThrow(message);
  });

  it('accepts a key-less Exists toleration (tolerate every taint), as Kubernetes does', () => {
    const config = loadOperatorConfig({ sandboxPlacement: { tolerations: [{ operator: 'Exists' }] } }, {});
    expect(buildSandboxPod(parsedRun(), config).spec!.tolerations).toEqual([{ operator: 'Exists' }]);
  });
});
