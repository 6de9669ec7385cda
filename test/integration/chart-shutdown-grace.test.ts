// The operator's shutdown limit follows the pod's grace period: the chart sets one from the
// other, so a stopping operator lets its steps in flight finish for as long as the kubelet
// allows, and exits on its own (logging whether it cut steps) before the kubelet's SIGKILL.
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { shutdownTimings } from '../../operator/src/shutdown-sequence.ts';
import { chartDir, helm } from '../support/helm.ts';

interface EnvVar {
  name: string;
  value?: string;
}
interface PodSpec {
  terminationGracePeriodSeconds: number;
  containers: { name: string; env: EnvVar[] }[];
}

async function operatorPod(...args: string[]): Promise<PodSpec> {
  const result = await helm(['template', 'grace', chartDir, '--namespace', 'chamvi-system', ...args]);
  expect(result.stderr).toBe('');
  const deployment = parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as { kind?: string; spec?: { template: { spec: PodSpec } } } | null)
    .find((doc) => doc?.kind === 'Deployment');
  return deployment!.spec!.template.spec;
}

/** The operator's config as it loads in the pod: the env the chart gives the container. */
function operatorConfigIn(pod: PodSpec) {
  const env = Object.fromEntries(pod.containers[0]!.env.filter((v) => v.value !== undefined).map((v) => [v.name, v.value]));
  return loadOperatorConfig({}, env);
}

describe("the chart's grace period", () => {
  it('is 30 s by default, and the operator exits 5 s before it', async () => {
    const pod = await operatorPod();
    expect(pod.terminationGracePeriodSeconds).toBe(30);
    const limitMs = operatorConfigIn(pod).shutdownTimeoutSeconds * 1000;
    expect(shutdownTimings(limitMs)).toMatchObject({ exitMs: 25_000, jobsMs: 22_000 });
  });

  it('moves the operator shutdown limit with it when set', async () => {
    const pod = await operatorPod('--set', 'terminationGracePeriodSeconds=300');
    expect(pod.terminationGracePeriodSeconds).toBe(300);
    expect(operatorConfigIn(pod).shutdownTimeoutSeconds).toBe(295);
  });

  it('refuses a grace period too short to leave the operator any time', async () => {
    const refused = await helm(['template', 'grace', chartDir, '--set', 'terminationGracePeriodSeconds=5']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/terminationGracePeriodSeconds/);
  });

  it('does not let values set the limit apart from the grace period', async () => {
    const refused = await helm(['template', 'grace', chartDir, '--set', 'config.shutdownTimeoutSeconds=600']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/shutdownTimeoutSeconds/);
  });
});
