// RunResources for local mode: the API key, the git token and the model script come from
// the objects in the manifest (and the API key variable), held by the in-memory gateway;
// the full diff is kept there as the same ConfigMap the operator would write, so the
// plugin prints it the way `kubectl codingrun diff` does.
import { isSecretUsableByRuns, secretNotUsableMessage } from '../../reconcile/secret-opt-in.ts';
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';
import { buildDiffConfigMap, decodeDiff } from '../../reconcile/diff-config-map.ts';
import { diffConfigMapName } from '../../reconcile/names.ts';
import type { RunResources } from '../../workers/run-resources.ts';
import type { MemoryKubeGateway } from './memory-kube-gateway.ts';

export function memoryRunResources(gateway: MemoryKubeGateway): RunResources {
  return {
    async secretValue(namespace, name, key) {
      // Security #11.3: the same opt-in as on a cluster (run-resources.ts), so a file that runs here runs there.
      const labels = gateway.secretLabelsOf(namespace, name);
      if (labels !== undefined && !isSecretUsableByRuns(labels))
        throw new RunFailure(REASONS.SecretNotAllowed, secretNotUsableMessage(namespace, name, 'the run'));
      return gateway.secretValue(namespace, name, key);
    },
    async configMapValue(namespace, name, key) {
      return gateway.configMap(namespace, name)?.data?.[key];
    },
    async readDiff(run) {
      const configMap = gateway.configMap(run.metadata.namespace, diffConfigMapName(run));
      const diff = configMap ? decodeDiff(configMap) : undefined;
      return configMap && diff !== undefined ? { configMap: configMap.metadata!.name!, diff } : undefined;
    },
    async readDiffConfigMap(namespace, name) {
      return gateway.configMap(namespace, name);
    },
    async writeDiff(run, diff) {
      const configMap = buildDiffConfigMap(run, diff);
      gateway.putConfigMap(configMap);
      return configMap.metadata!.name!;
    },
  };
}
