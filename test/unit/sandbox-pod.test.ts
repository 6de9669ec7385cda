// The sandbox pod carries every promise of SECURITY.md; each field that keeps one is checked.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { DEFAULT_RESOURCES, buildSandboxPod, sandboxActiveDeadlineSeconds } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {});

/** The run fix in agents (uid-1), parsed as the reconciler parses it; `spec` overrides its spec. */
function parsedRun(spec: Record<string, unknown> = {}): ParsedCodingRun {
  const run = codingRunFixture({ spec });
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}

describe('buildSandboxPod', () => {
  const pod = buildSandboxPod(parsedRun({ budget: { timeout: '90s' }, sandbox: { env: [{ name: 'CI', value: 'true' }] } }), config);
  const container = pod.spec!.containers[0]!;

  it('has a deterministic name, the run as controlling owner, and run labels', () => {
    expect(pod.metadata!.name).toBe(sandboxPodName({ metadata: { name: 'fix', uid: 'uid-1' } }));
    expect(pod.metadata!.name).toMatch(/^fix-[0-9a-f]{16}-sandbox$/);
    expect(pod.metadata!.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'CodingRun', name: 'fix', uid: 'uid-1', controller: true }),
    ]);
    expect(pod.metadata!.labels).toMatchObject({ 'chamvi.dev/run': 'fix', 'chamvi.dev/run-uid': 'uid-1' });
  });

  it('gets no service-account token, no secrets and no service links', () => {
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
    expect(pod.spec!.enableServiceLinks).toBe(false);
    expect(JSON.stringify(pod)).not.toMatch(/secretKeyRef|secretRef|"secret"/);
    expect(container.env!.every((variable) => typeof variable.value === 'string')).toBe(true);
  });

  it('runs as non-root with a read-only root filesystem, no privilege escalation and no capabilities', () => {
    expect(pod.spec!.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toEqual(
      expect.objectContaining({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
      }),
    );
  });

  it('writes only to size-limited emptyDirs for workspace, home and tmp', () => {
    expect(pod.spec!.volumes!.map((volume) => [volume.name, volume.emptyDir?.sizeLimit])).toEqual([
      ['workspace', '10Gi'],
      ['home', '1Gi'],
      ['tmp', '1Gi'],
    ]);
    expect(container.volumeMounts!.map((mount) => mount.mountPath)).toEqual(['/workspace', '/home/chamvi', '/tmp']);
  });

  it('has resource limits including ephemeral storage, and user limits win', () => {
    expect(container.resources!.limits).toMatchObject({ cpu: '2', memory: '4Gi', 'ephemeral-storage': '12Gi' });
    const custom = buildSandboxPod(parsedRun({ sandbox: { resources: { limits: { memory: '8Gi' } } } }), config);
    expect(custom.spec!.containers[0]!.resources!.limits).toMatchObject({ memory: '8Gi', cpu: '2' });
  });

  it('never pairs a default with a user value the API server would refuse (a request above its limit)', () => {
    const resources = (sandbox: object) =>
      buildSandboxPod(parsedRun({ sandbox: { resources: sandbox } }), config).spec!.containers[0]!.resources!;
    // A limit under the default request: the request follows it down, as Kubernetes defaults a request to its limit.
    expect(resources({ limits: { memory: '256Mi', cpu: '100m' } })).toEqual({
      requests: { cpu: '100m', memory: '256Mi', 'ephemeral-storage': '1Gi' },
      limits: { cpu: '100m', memory: '256Mi', 'ephemeral-storage': '12Gi' },
    });
    // A request over the default limit: the limit follows it up.
    expect(resources({ requests: { cpu: 4, 'ephemeral-storage': '0.02Ti' } })).toEqual({
      requests: { cpu: '4', memory: '512Mi', 'ephemeral-storage': '0.02Ti' },
      limits: { cpu: '4', memory: '4Gi', 'ephemeral-storage': '0.02Ti' },
    });
    // Values on both sides are the user's, as given (an inconsistent pair is the API server's to refuse).
    expect(resources({ requests: { memory: '1G' }, limits: { memory: '1Gi' } })).toMatchObject({
      requests: { memory: '1G' },
      limits: { memory: '1Gi' },
    });
    // Defaults within the user's side stay.
    expect(resources({ limits: { memory: '1e9' } }).requests).toMatchObject({ memory: '512Mi' });
  });

  // A zero limit is no limit: the kubelet sets none, and a quota counts the pod as 0. The schema
  // refuses one; a run stored before, or a parse skipped, still gets the defaults instead.
  it('never gives a pod a limit of zero, nor a request lowered to one', () => {
    const stored = parsedRun();
    const withResources = (resources: object) => ({ ...stored, spec: { ...stored.spec, sandbox: { ...stored.spec.sandbox, resources } } });
    const resources = (sandbox: object) => buildSandboxPod(withResources(sandbox), config).spec!.containers[0]!.resources!;
    expect(resources({ limits: { cpu: '0', memory: 0, 'ephemeral-storage': '0Gi' } })).toEqual(DEFAULT_RESOURCES);
    // A request set beside a zero limit takes the limit up with it, as beside no limit.
    expect(resources({ requests: { cpu: '3' }, limits: { cpu: '0.0' } })).toMatchObject({ requests: { cpu: '3' }, limits: { cpu: '3' } });
  });

  it('ends itself at the budget timeout through activeDeadlineSeconds', () => {
    expect(pod.spec!.activeDeadlineSeconds).toBe(90 + 2 * config.deadlineGraceSeconds);
    expect(pod.spec!.restartPolicy).toBe('Never');
  });

  it('never asks for an activeDeadlineSeconds under 1, which the API server refuses, even with no grace', () => {
    const noGrace = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1', deadlineGraceSeconds: 0 }, {});
    expect(sandboxActiveDeadlineSeconds(parsedRun({ budget: { timeout: '1ms' } }), noGrace)).toBe(1);
    // A zero timeout the schema now refuses (a run stored before, or a parse skipped) still gets a pod the API server takes.
    const stored = parsedRun();
    const zero = { ...stored, spec: { ...stored.spec, budget: { ...stored.spec.budget, timeout: '0s' } } };
    expect(sandboxActiveDeadlineSeconds(zero, noGrace)).toBe(1);
    expect(buildSandboxPod(zero, noGrace).spec!.activeDeadlineSeconds).toBe(1);
  });

  it("leaves the pod alive through a publish approval's wait, however long the agent took", () => {
    // The agent may use all of budget.timeout; the approver then has approval.timeout to answer.
    const waiting = buildSandboxPod(parsedRun({ budget: { timeout: '30m' }, approval: { publish: true, timeout: '24h' } }), config);
    expect(waiting.spec!.activeDeadlineSeconds).toBe(30 * 60 + 24 * 3600 + 2 * config.deadlineGraceSeconds);
  });

  it("bounds a run's human time by the operator's maxApprovalWaitSeconds, not maxSteps × approval.timeout", () => {
    // One wait per step of 1000, a week each, was 607 392 120 s (19 years) of a maxActiveRuns slot and a node.
    const longest = parsedRun({
      budget: { maxSteps: 1000, timeout: '720h' },
      approval: { tools: ['bash'], publish: true, timeout: '168h' },
    });
    const week = 7 * 24 * 3600;
    expect(config.maxApprovalWaitSeconds).toBe(week);
    expect(buildSandboxPod(longest, config).spec!.activeDeadlineSeconds).toBe(720 * 3600 + week + 2 * config.deadlineGraceSeconds);
    // An admin's bound, lower or higher, is what the pod allows; at its largest within what the API server takes (2^31 - 1 s).
    const tighter = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1', maxApprovalWaitSeconds: 3600 }, {});
    expect(buildSandboxPod(longest, tighter).spec!.activeDeadlineSeconds).toBe(720 * 3600 + 3600 + 2 * config.deadlineGraceSeconds);
    const widest = loadOperatorConfig(
      { sandboxImage: 'chamvi/sandbox:1', maxApprovalWaitSeconds: 30 * 24 * 3600, deadlineGraceSeconds: 3600 },
      {},
    );
    expect(buildSandboxPod(longest, widest).spec!.activeDeadlineSeconds).toBeLessThanOrEqual(2 ** 31 - 1);
    expect(() => loadOperatorConfig({ maxApprovalWaitSeconds: 30 * 24 * 3600 + 1 }, {})).toThrow(/config key maxApprovalWaitSeconds/);
  });

  it('allows the whole bound however few steps, as one step parks once per gated call (up to 64)', () => {
    // maxSteps 10 × approval.timeout 1h allowed 10.5 h; four calls a step answered after 45 minutes are 30 h.
    const gated = parsedRun({ budget: { maxSteps: 10, timeout: '30m' }, approval: { tools: ['bash', 'edit_file'], timeout: '1h' } });
    expect(buildSandboxPod(gated, config).spec!.activeDeadlineSeconds).toBe(
      30 * 60 + config.maxApprovalWaitSeconds + 2 * config.deadlineGraceSeconds,
    );
  });

  it("lets the run's variables replace HOME and TMPDIR, and never the toolbox's CHAMVI_* settings", () => {
    const stored = parsedRun();
    // As a run that reached the operator without the schema's refusal of CHAMVI_* names would have it.
    const env = [
      { name: 'HOME', value: '/workspace/.home' },
      { name: 'TMPDIR', value: '/workspace/.tmp' },
      { name: 'CHAMVI_WORKSPACE', value: '/' },
      { name: 'CHAMVI_HOME', value: '/workspace/.c' },
    ];
    const overriding = { ...stored, spec: { ...stored.spec, sandbox: { ...stored.spec.sandbox, env } } };
    const variables = buildSandboxPod(overriding, config).spec!.containers[0]!.env!;
    // A later duplicate wins in the container: what counts is the last entry of each name.
    const last = (name: string) => variables.findLast((variable) => variable.name === name)?.value;
    expect(last('HOME')).toBe('/workspace/.home');
    expect(last('TMPDIR')).toBe('/workspace/.tmp');
    expect(last('CHAMVI_WORKSPACE')).toBe('/workspace');
    expect(last('CHAMVI_HOME')).toBe('/home/chamvi/.chamvi');
  });

  it('escapes every $ so that the container gets the value as written, not $(NAME) expanded or $$ collapsed', () => {
    const run = parsedRun({
      sandbox: {
        env: [
          { name: 'A', value: 'a$$b' },
          { name: 'B', value: '$(HOME)/x' },
          { name: 'C', value: '$' },
        ],
      },
    });
    const variables = buildSandboxPod(run, config).spec!.containers[0]!.env!;
    expect(variables.filter((variable) => ['A', 'B', 'C'].includes(variable.name))).toEqual([
      { name: 'A', value: 'a$$$$b' },
      { name: 'B', value: '$$(HOME)/x' },
      { name: 'C', value: '$$' },
    ]);
  });

  it('passes plain env values and points the toolbox at the workspace', () => {
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'CI', value: 'true' },
        { name: 'CHAMVI_WORKSPACE', value: '/workspace' },
      ]),
    );
  });

  it("keeps the default image's entrypoint (tini reaps background jobs) and only idles on node", () => {
    expect(container.command).toBeUndefined();
    expect(container.args!.slice(0, 2)).toEqual(['/usr/local/bin/node', '-e']);
  });

  it('sets runtimeClassName only when asked', () => {
    expect(pod.spec!.runtimeClassName).toBeUndefined();
    expect(buildSandboxPod(parsedRun({ sandbox: { runtimeClassName: 'gvisor' } }), config).spec!.runtimeClassName).toBe('gvisor');
  });

  it('copies node and the toolbox into a custom image with an init container', () => {
    const custom = buildSandboxPod(parsedRun({ sandbox: { image: 'python:3.12' } }), config);
    const init = custom.spec!.initContainers![0]!;
    expect(init.image).toBe('chamvi/sandbox:1');
    expect(init.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    expect(custom.spec!.containers[0]!.image).toBe('python:3.12');
    expect(custom.spec!.containers[0]!.command![0]).toBe('/opt/chamvi/node');
    expect(custom.spec!.volumes!.map((volume) => volume.name)).toContain('chamvi-tools');
  });
});
