// The admitted sandbox pod against what the operator builds: the operator's own pods (fresh,
// custom image, egress, a claimed warm pool pod, each with what the API server adds at
// admission) pass; every kind of credential a mutating webhook or sidecar injector adds is
// named, and the message says what was added and what to change.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import {
  describeAddition,
  podAdditions,
  podChangedMessage,
  sandboxPodShape,
  type PodAddition,
} from '../../operator/src/reconcile/admitted-pod.ts';
import { EGRESS_ENV_NAMES } from '../../operator/src/reconcile/sandbox-egress.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { claimPatch, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { withIrsa } from '../support/irsa-webhook.ts';

const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1', allowEgress: ['registry.npmjs.org'] }, {});
/** The egress proxy as the reconciler builds a pod with it (an address resolved); the workers' config has none. */
const egressConfig = loadOperatorConfig(
  {
    sandboxImage: 'chamvi/sandbox:1',
    allowEgress: ['registry.npmjs.org'],
    egressKey: 'k'.repeat(32),
    egressProxy: { host: 'proxy.chamvi-system.svc', address: '10.96.0.50' },
  },
  {},
);

/** The run fix in agents, parsed as the reconciler parses it, with `sandbox` as its spec.sandbox. */
function parsedRun(sandbox: Record<string, unknown> = {}): ParsedCodingRun {
  const run = codingRunFixture({ spec: { sandbox } });
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}

const plainRun = parsedRun({ env: [{ name: 'CI', value: 'true' }] });
const customRun = parsedRun({ image: 'acme/builder:2' });
const egressRun = parsedRun({ egress: { allow: ['registry.npmjs.org'] } });

/** What the API server adds to any pod at admission (defaults, the ServiceAccount admission with no token). */
function admitted(pod: V1Pod): V1Pod {
  const copy = structuredClone(pod);
  const spec = copy.spec!;
  Object.assign(spec, {
    dnsPolicy: 'ClusterFirst',
    schedulerName: 'default-scheduler',
    serviceAccountName: 'default',
    serviceAccount: 'default',
    imagePullSecrets: [{ name: 'registry' }],
    tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
    priority: 0,
    preemptionPolicy: 'PreemptLowerPriority',
  });
  for (const container of [...spec.containers, ...(spec.initContainers ?? [])]) {
    Object.assign(container, { terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' });
  }
  for (const volume of spec.volumes ?? []) if (volume.emptyDir) volume.emptyDir = { ...volume.emptyDir };
  return copy;
}

/** Applies the claim's JSON Patch as the API server would (add, remove, test on JSON pointers). */
function applyPatch(pod: V1Pod, patch: object[]): V1Pod {
  const copy = structuredClone(pod) as unknown as Record<string, unknown>;
  for (const { op, path, value } of patch as Array<{ op: string; path: string; value?: unknown }>) {
    const keys = path
      .split('/')
      .slice(1)
      .map((key) => key.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = keys.pop()!;
    let parent = copy;
    for (const key of keys) parent = (parent[key] ??= {}) as Record<string, unknown>;
    if (op === 'add') parent[last] = value;
    else if (op === 'remove') delete parent[last];
  }
  return copy as V1Pod;
}

function claimedPoolPod(): V1Pod {
  const pool: WarmPoolConfig = { name: 'fast', namespace: 'agents', size: 1 };
  const made = admitted(warmPoolPod(pool, config, plainRun));
  made.metadata = { ...made.metadata, name: 'fast-warm-abcde', uid: 'pod-uid' };
  const run = parsedRun();
  return applyPatch(made, claimPatch(run, pool, 600, 'pod-uid'));
}

/** Each injection, applied to the operator's own admitted pod. */
const injected = (change: (pod: V1Pod) => void, base: V1Pod = admitted(buildSandboxPod(plainRun, config))): V1Pod => {
  const copy = structuredClone(base);
  change(copy);
  return copy;
};
const sandbox = (pod: V1Pod) => pod.spec!.containers[0]!;

const additions = (pod: V1Pod, run: ParsedCodingRun = plainRun, checkConfig = config) =>
  podAdditions(pod, sandboxPodShape(run, checkConfig)).map(({ kind, name, container }) => ({
    kind,
    name,
    ...(container ? { container } : {}),
  }));

describe('the admitted sandbox pod: what the operator builds passes', () => {
  const upgraded = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:2' }, {});
  const cases: Array<{ name: string; pod: V1Pod; run: ParsedCodingRun; checkConfig?: typeof config }> = [
    { name: 'a run pod, with its own env, as built', pod: buildSandboxPod(plainRun, config), run: plainRun },
    { name: 'a run pod as the API server admits it', pod: admitted(buildSandboxPod(plainRun, config)), run: plainRun },
    { name: 'a custom-image pod (init container and tools volume)', pod: admitted(buildSandboxPod(customRun, config)), run: customRun },
    {
      name: 'an egress pod built with the proxy address, checked with a config that has none',
      pod: admitted(buildSandboxPod(egressRun, egressConfig)),
      run: egressRun,
    },
    { name: 'a claimed warm pool pod', pod: claimedPoolPod(), run: parsedRun() },
    {
      // The run names the image an upgrade later made the default: its pod got the custom-image parts, its shape now would not.
      name: 'a custom-image pod whose image an operator upgrade has since made the default',
      pod: admitted(buildSandboxPod(parsedRun({ image: 'chamvi/sandbox:2' }), config)),
      run: parsedRun({ image: 'chamvi/sandbox:2' }),
      checkConfig: upgraded,
    },
  ];
  it.each(cases)('$name', ({ pod, run, checkConfig }) => {
    expect(additions(pod, run, checkConfig)).toEqual([]);
  });

  it('allows the egress variables because the run asks for egress, and only then', () => {
    const egressPod = admitted(buildSandboxPod(egressRun, egressConfig));
    expect(sandbox(egressPod).env!.map((variable) => variable.name)).toEqual(expect.arrayContaining([...EGRESS_ENV_NAMES]));
    const plainWithProxy = injected((pod) => sandbox(pod).env!.push({ name: 'HTTPS_PROXY', value: 'http://elsewhere:3128' }));
    expect(additions(plainWithProxy)).toEqual([{ kind: 'env', name: 'HTTPS_PROXY', container: 'sandbox' }]);
  });
});

describe('the admitted sandbox pod: what a webhook adds is refused', () => {
  const cases: Array<{ name: string; pod: V1Pod; added: Array<Pick<PodAddition, 'kind' | 'name' | 'container'>> }> = [
    {
      name: 'EKS IRSA: a projected token, its mount and the AWS variables',
      pod: withIrsa(admitted(buildSandboxPod(plainRun, config))),
      added: [
        { kind: 'volume', name: 'aws-iam-token' },
        { kind: 'env', name: 'AWS_STS_REGIONAL_ENDPOINTS', container: 'sandbox' },
        { kind: 'env', name: 'AWS_ROLE_ARN', container: 'sandbox' },
        { kind: 'env', name: 'AWS_WEB_IDENTITY_TOKEN_FILE', container: 'sandbox' },
        { kind: 'volumeMount', name: 'aws-iam-token', container: 'sandbox' },
      ],
    },
    {
      name: 'a service-account token projected under the name of an operator volume',
      pod: injected((pod) => {
        pod.spec!.volumes![2] = { name: 'tmp', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } };
      }),
      added: [{ kind: 'volume', name: 'tmp' }],
    },
    {
      name: 'a Secret volume',
      pod: injected((pod) => pod.spec!.volumes!.push({ name: 'creds', secret: { secretName: 'cloud' } })),
      added: [{ kind: 'volume', name: 'creds' }],
    },
    {
      name: 'a ConfigMap volume',
      pod: injected((pod) => pod.spec!.volumes!.push({ name: 'cfg', configMap: { name: 'kubeconfig' } })),
      added: [{ kind: 'volume', name: 'cfg' }],
    },
    {
      name: 'a CSI volume (secrets-store)',
      pod: injected((pod) => pod.spec!.volumes!.push({ name: 'vault', csi: { driver: 'secrets-store.csi.k8s.io' } })),
      added: [{ kind: 'volume', name: 'vault' }],
    },
    {
      name: 'a hostPath volume',
      pod: injected((pod) => pod.spec!.volumes!.push({ name: 'host', hostPath: { path: '/var/lib/kubelet' } })),
      added: [{ kind: 'volume', name: 'host' }],
    },
    {
      name: 'a variable the operator does not set',
      pod: injected((pod) => sandbox(pod).env!.push({ name: 'AZURE_CLIENT_ID', value: '0000' })),
      added: [{ kind: 'env', name: 'AZURE_CLIENT_ID', container: 'sandbox' }],
    },
    {
      name: "a variable of the operator's read from a Secret",
      pod: injected((pod) => {
        sandbox(pod).env![2] = { name: 'HOME', valueFrom: { secretKeyRef: { name: 'cloud', key: 'token' } } };
      }),
      added: [{ kind: 'env', name: 'HOME', container: 'sandbox' }],
    },
    {
      name: 'envFrom a Secret',
      pod: injected((pod) => {
        sandbox(pod).envFrom = [{ secretRef: { name: 'cloud' } }];
      }),
      added: [{ kind: 'envFrom', name: 'Secret cloud', container: 'sandbox' }],
    },
    {
      name: 'an operator volume mounted where the operator does not mount it',
      pod: injected((pod) => sandbox(pod).volumeMounts!.push({ name: 'tmp', mountPath: '/var/run/secrets/tokens' })),
      added: [{ kind: 'volumeMount', name: 'tmp', container: 'sandbox' }],
    },
    {
      name: 'a volume device',
      pod: injected((pod) => {
        sandbox(pod).volumeDevices = [{ name: 'disk', devicePath: '/dev/xvda' }];
      }),
      added: [{ kind: 'volumeDevice', name: 'disk', container: 'sandbox' }],
    },
    {
      name: 'a sidecar container',
      pod: injected((pod) => pod.spec!.containers.push({ name: 'istio-proxy', image: 'istio/proxyv2' })),
      added: [{ kind: 'container', name: 'istio-proxy' }],
    },
    {
      name: 'an init container',
      pod: injected((pod) => {
        pod.spec!.initContainers = [{ name: 'vault-agent-init', image: 'hashicorp/vault' }];
      }),
      added: [{ kind: 'initContainer', name: 'vault-agent-init' }],
    },
    {
      name: "a variable in the custom image's init container",
      pod: injected(
        (pod) => {
          pod.spec!.initContainers![0]!.env = [{ name: 'AWS_ROLE_ARN', value: 'arn' }];
        },
        admitted(buildSandboxPod(customRun, config)),
      ),
      added: [{ kind: 'env', name: 'AWS_ROLE_ARN', container: 'chamvi-tools' }],
    },
    {
      name: 'an ephemeral container',
      pod: injected((pod) => {
        pod.spec!.ephemeralContainers = [{ name: 'debugger-x1', image: 'busybox' }];
      }),
      added: [{ kind: 'ephemeralContainer', name: 'debugger-x1' }],
    },
    {
      name: 'automountServiceAccountToken set true',
      pod: injected((pod) => {
        pod.spec!.automountServiceAccountToken = true;
      }),
      added: [{ kind: 'automountServiceAccountToken', name: 'true' }],
    },
    {
      name: 'automountServiceAccountToken removed',
      pod: injected((pod) => {
        delete pod.spec!.automountServiceAccountToken;
      }),
      added: [{ kind: 'automountServiceAccountToken', name: 'unset' }],
    },
  ];
  it.each(cases)('$name', ({ pod, added }) => {
    expect(additions(pod)).toEqual(added);
  });

  it("allows the custom-image init container in any run's pod, but not mounting its volume elsewhere", () => {
    // The custom-image parts are the operator's whichever image the run has: a pod made before
    // an upgrade that changed config.sandboxImage carries them rightly.
    const base = admitted(buildSandboxPod(plainRun, config));
    const withTools = admitted(buildSandboxPod(customRun, config));
    expect(additions({ ...base, spec: { ...base.spec!, initContainers: withTools.spec!.initContainers } })).toEqual([]);
    const tools = withTools.spec!.initContainers![0]!;
    const moved = { ...tools, volumeMounts: [{ name: 'chamvi-tools', mountPath: '/home/chamvi/.aws' }] };
    expect(additions({ ...base, spec: { ...base.spec!, initContainers: [moved] } })).toEqual([
      { kind: 'volumeMount', name: 'chamvi-tools', container: 'chamvi-tools' },
    ]);
  });
});

describe('the message of a refused pod', () => {
  const shape = sandboxPodShape(plainRun, config);
  const where = { namespace: 'agents', name: 'fix-sandbox' };

  it('names what IRSA added and says which annotation to remove, or which pods to exclude from the webhook', () => {
    const added = podAdditions(withIrsa(admitted(buildSandboxPod(plainRun, config))), shape);
    const message = podChangedMessage(where, added, shape);
    expect(message).toContain('agents/fix-sandbox');
    expect(message).toContain('volume aws-iam-token (projected: service-account token, audience sts.amazonaws.com)');
    expect(message).toContain('env AWS_ROLE_ARN in container sandbox');
    expect(message).toContain('volume mount aws-iam-token at /var/run/secrets/eks.amazonaws.com/serviceaccount in container sandbox');
    expect(message).toContain("remove the eks.amazonaws.com/role-arn annotation from the namespace's default ServiceAccount");
    expect(message).toContain('exclude pods labelled app.kubernetes.io/name=chamvi-sandbox from the webhook');
  });

  it('leaves the IRSA advice out for another webhook, and names at most eight additions', () => {
    const sidecars = injected((pod) => {
      for (let index = 0; index < 10; index += 1) pod.spec!.containers.push({ name: `sidecar-${index}`, image: 'mesh/proxy' });
    });
    const message = podChangedMessage(where, podAdditions(sidecars, shape), shape);
    expect(message).not.toContain('eks.amazonaws.com');
    expect(message).toContain('container sidecar-7 (mesh/proxy) and 2 more');
    expect(message).not.toContain('sidecar-8');
  });

  it('describes each kind of volume by what it reads', () => {
    const describe = (volume: object) =>
      podAdditions(
        injected((pod) => pod.spec!.volumes!.push(volume as never)),
        shape,
      ).map(describeAddition);
    expect(describe({ name: 'a', secret: { secretName: 'cloud' } })).toEqual(['volume a (Secret cloud)']);
    expect(describe({ name: 'b', hostPath: { path: '/etc' } })).toEqual(['volume b (hostPath /etc)']);
    expect(describe({ name: 'c', csi: { driver: 'secrets-store.csi.k8s.io' } })).toEqual([
      'volume c (CSI driver secrets-store.csi.k8s.io)',
    ]);
  });
});
