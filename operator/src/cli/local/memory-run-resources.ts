// RunResources for local mode: the API key, the git token and the model script come from
// the objects in the manifest (and the API key variable), held by the in-memory gateway;
// the full diff is kept there as the same ConfigMap the operator would write, so the
// plugin prints it the way `kubectl codingrun diff` does.
import { diffConfigMap, type RunResources } from '../../workers/run-resources.ts';
import type { MemoryKubeGateway } from './memory-kube-gateway.ts';

export function memoryRunResources(gateway: MemoryKubeGateway): RunResources {
  return {
    async secretValue(namespace, name, key) {
      return gateway.secretValue(namespace, name, key);
    },
    async configMapValue(namespace, name, key) {
      return gateway.configMap(namespace, name)?.data?.[key];
    },
    async writeDiff(run, diff) {
      const configMap = diffConfigMap(run, diff);
      gateway.putConfigMap(configMap);
      return configMap.metadata!.name!;
    },
  };
}
