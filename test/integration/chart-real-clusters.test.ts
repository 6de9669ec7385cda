// The chart's settings for real clusters, rendered by the real helm (#15.6): extraEnv, the
// operator's outbound proxy and CA bundle, an overridable pod security context (OpenShift),
// a PodDisruptionBudget only with more than one replica, kubeVersion, the ServiceMonitor
// option, and the admission policies on by default, rendered whatever helm's API versions say.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { chartDir, helm, templateKubeVersion } from '../support/helm.ts';

const RELEASE = 'real';
const template = (...args: string[]) => helm(['template', RELEASE, chartDir, '--namespace', 'chamvi-system', ...args]);

interface Manifest {
  kind: string;
  metadata: { name: string };
  [key: string]: any;
}
const manifests = async (...args: string[]): Promise<Manifest[]> => {
  const result = await template(...args);
  if (result.code !== 0) throw new Error(result.stderr);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);
};
const operatorPod = async (...args: string[]) => (await manifests(...args)).find((doc) => doc.kind === 'Deployment')!.spec.template.spec;
const envOf = (pod: any) => pod.containers[0].env as Array<{ name: string; value?: string; valueFrom?: object }>;

describe('the chart on real clusters', () => {
  it('declares the Kubernetes versions it needs, and helm refuses an older cluster', async () => {
    const chart = parseYaml(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as { kubeVersion?: string };
    expect(chart.kubeVersion).toBe('>=1.30.0-0');
    const old = await helm(['template', RELEASE, chartDir, '--kube-version', 'v1.29.4']);
    expect(old.code).not.toBe(0);
    expect(old.stderr).toContain('chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.4');
  });

  it('adds extraEnv after its own variables, values and valueFrom alike', async () => {
    const env = envOf(
      await operatorPod(
        '--set',
        'extraEnv[0].name=FOO',
        '--set',
        'extraEnv[0].value=bar',
        '--set',
        'extraEnv[1].name=TOKEN',
        '--set',
        'extraEnv[1].valueFrom.secretKeyRef.name=s',
        '--set',
        'extraEnv[1].valueFrom.secretKeyRef.key=k',
      ),
    );
    expect(env.slice(-2)).toEqual([
      { name: 'FOO', value: 'bar' },
      { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
    ]);
    expect(env.map((variable) => variable.name)).toContain('CHAMVI_STATE_KEY');
  });

  it('sets the outbound proxy for the operator, always bypassing the API server and cluster services', async () => {
    const env = envOf(await operatorPod('--set', 'proxy.httpsProxy=http://proxy.corp:3128', '--set', 'proxy.noProxy=.corp\\,10.0.0.0/8'));
    const value = (name: string) => env.find((variable) => variable.name === name)?.value;
    expect(value('HTTPS_PROXY')).toBe('http://proxy.corp:3128');
    expect(value('https_proxy')).toBe('http://proxy.corp:3128');
    expect(value('HTTP_PROXY')).toBeUndefined();
    expect(value('NO_PROXY')).toBe('$(KUBERNETES_SERVICE_HOST),.svc,.cluster.local,localhost,127.0.0.1,.corp,10.0.0.0/8');
    expect(value('no_proxy')).toBe(value('NO_PROXY'));
    expect(value('NODE_USE_ENV_PROXY')).toBe('1');
    // Kubernetes expands $(KUBERNETES_SERVICE_HOST) only from variables defined before it or from service variables: the latter here.
    const withoutProxy = envOf(await operatorPod());
    expect(withoutProxy.some((variable) => /PROXY/i.test(variable.name))).toBe(false);
  });

  it.each([
    ['configMap', { configMap: { name: 'corp-ca', items: [{ key: 'bundle.pem', path: 'ca.crt' }] } }],
    ['secret', { secret: { secretName: 'corp-ca', items: [{ key: 'bundle.pem', path: 'ca.crt' }] } }],
  ])('mounts a CA bundle from a %s and names it in NODE_EXTRA_CA_CERTS', async (kind, source) => {
    const pod = await operatorPod('--set', `caBundle.${kind}.name=corp-ca`, '--set', `caBundle.${kind}.key=bundle.pem`);
    expect(pod.volumes).toContainEqual({ name: 'ca-bundle', ...source });
    expect(pod.containers[0].volumeMounts).toContainEqual({ name: 'ca-bundle', mountPath: '/etc/chamvi-ca', readOnly: true });
    expect(envOf(pod)).toContainEqual({ name: 'NODE_EXTRA_CA_CERTS', value: '/etc/chamvi-ca/ca.crt' });
    const plain = await operatorPod();
    expect(envOf(plain).some((variable) => variable.name === 'NODE_EXTRA_CA_CERTS')).toBe(false);
    expect(plain.volumes.some((volume: { name: string }) => volume.name === 'ca-bundle')).toBe(false);
  });

  it('refuses a CA bundle from both a ConfigMap and a Secret', async () => {
    const result = await template('--set', 'caBundle.configMap.name=a', '--set', 'caBundle.secret.name=b');
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('caBundle: set configMap.name or secret.name, not both');
  });

  it('refuses a proxy that is not an http(s) URL', async () => {
    const result = await template('--set', 'proxy.httpsProxy=proxy.corp:3128');
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/proxy/);
  });

  it('lets OpenShift drop the fixed UID, GID and fsGroup, keeping the rest of the pod security context', async () => {
    const defaults = await operatorPod();
    expect(defaults.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const openshift = await operatorPod(
      '--set',
      'podSecurityContext.runAsUser=null',
      '--set',
      'podSecurityContext.runAsGroup=null',
      '--set',
      'podSecurityContext.fsGroup=null',
    );
    expect(openshift.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(openshift.containers[0].securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    const container = await operatorPod('--set', 'containerSecurityContext.readOnlyRootFilesystem=false');
    expect(container.containers[0].securityContext.readOnlyRootFilesystem).toBe(false);
  });

  it('creates a PodDisruptionBudget only with more than one replica', async () => {
    const pdbs = async (...args: string[]) => (await manifests(...args)).filter((doc) => doc.kind === 'PodDisruptionBudget');
    expect(await pdbs()).toHaveLength(1);
    expect(await pdbs('--set', 'replicaCount=1')).toEqual([]);
    expect(await pdbs('--set', 'replicaCount=3', '--set', 'podDisruptionBudget.enabled=false')).toEqual([]);
  });

  it('creates a ServiceMonitor when asked, with the labels Prometheus selects on', async () => {
    expect((await manifests()).some((doc) => doc.kind === 'ServiceMonitor')).toBe(false);
    const monitor = (
      await manifests('--set', 'metrics.serviceMonitor.enabled=true', '--set', 'metrics.serviceMonitor.labels.release=prom')
    ).find((doc) => doc.kind === 'ServiceMonitor')!;
    expect(monitor.metadata).toMatchObject({ labels: { release: 'prom' } });
    expect(monitor.spec.endpoints).toEqual([expect.objectContaining({ port: 'http-metrics', path: '/metrics' })]);
  });

  it('has both admission policies on by default, rendered by helm template without --api-versions as with them', async () => {
    const kinds = async (...args: string[]) => (await manifests(...args)).map((doc) => doc.kind);
    expect(await kinds()).toEqual(expect.arrayContaining(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']));
    // Two policies: admissionPolicy (allowRepo and the specs) and approvalPolicy (#15.5, who answers); each has its switch.
    const policies = async (...args: string[]) =>
      (await manifests(...args)).filter((doc) => doc.kind === 'ValidatingAdmissionPolicy').map((doc) => doc.metadata.name as string);
    // The third, the fence on the operator's own writes (operator-write-policy.yaml), has no switch.
    expect(await policies('--set', 'admissionPolicy.enabled=false')).toEqual([
      expect.stringMatching(/-approvals$/),
      expect.stringMatching(/-operator-writes$/),
    ]);
    expect(await policies('--set', 'admissionPolicy.enabled=false', '--set', 'approvalPolicy.enabled=false')).toEqual([
      expect.stringMatching(/-operator-writes$/),
    ]);
    // Only the version flag, no API versions: what `helm template | kubectl apply` and kustomize's
    // helmCharts render. Chart.yaml's kubeVersion (1.30+) already means ValidatingAdmissionPolicy v1.
    const [versionFlag, version] = templateKubeVersion();
    const bare = async (...args: string[]) => {
      const result = await helm(['template', RELEASE, chartDir, '--namespace', 'chamvi-system', versionFlag!, version!, ...args]);
      expect(result.code, result.stderr).toBe(0);
      return parseAllDocuments(result.stdout)
        .map((doc) => doc.toJS() as Manifest | null)
        .filter((doc): doc is Manifest => doc?.kind === 'ValidatingAdmissionPolicy' || doc?.kind === 'ValidatingAdmissionPolicyBinding')
        .map((doc) => `${doc.kind} ${doc.metadata.name.replace(`${RELEASE}-chamvi-operator-`, '')}`)
        .sort();
    };
    expect(await bare()).toEqual([
      'ValidatingAdmissionPolicy allow-repo',
      'ValidatingAdmissionPolicy approvals',
      'ValidatingAdmissionPolicy operator-writes',
      'ValidatingAdmissionPolicyBinding allow-repo',
      'ValidatingAdmissionPolicyBinding approvals',
      'ValidatingAdmissionPolicyBinding operator-writes',
    ]);
    expect(await bare('--set', 'approvalPolicy.separationOfDuties=true')).toEqual(
      expect.arrayContaining(['ValidatingAdmissionPolicy run-owners', 'ValidatingAdmissionPolicyBinding run-owners']),
    );
  });
});
