// A CodingRun created on the test cluster only to own the sandbox pods an integration test
// builds for it with the operator's own builders: the garbage collector deletes a pod whose
// owner does not exist. No operator acts on it.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { codingRunSpec, type CodingRun, type ParsedCodingRun } from '../../operator/src/api/index.ts';

/** Creates run `name` in `namespace` (a scripted model, acme/webapp; `spec` overrides) and returns it as the API server holds it, parsed. */
export async function createPodOwnerRun(
  kubeConfig: KubeConfig,
  namespace: string,
  name: string,
  spec: Record<string, unknown> = {},
): Promise<ParsedCodingRun> {
  const body = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace },
    spec: {
      task: 'Fix it.',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
      ...spec,
    },
  };
  const run = (await kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'chamvi.dev',
    version: 'v1alpha1',
    namespace,
    plural: 'codingruns',
    body,
  })) as CodingRun;
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}
