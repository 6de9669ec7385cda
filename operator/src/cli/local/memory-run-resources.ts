// RunResources for local mode: the API key, the git token and the model script come from
// the objects in the manifest (and the API key variable), held by the in-memory gateway;
// the full diff is kept there as the same ConfigMap the operator would write, so the
// plugin prints it the way `kubectl codingrun diff` does, under the operator's rule that no
// snapshot replaces a final diff and a final write always stores its own (reconcile/diff-write.ts).
import { isSecretUsableByRuns, secretNotUsableMessage } from '../../reconcile/secret-opt-in.ts';
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';
import { buildDiffConfigMap, decodeDiff, diffKindOf } from '../../reconcile/diff-config-map.ts';
import { decideDiffWrite } from '../../reconcile/diff-write.ts';
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
      return configMap && diff !== undefined ? { configMap: configMap.metadata!.name!, diff, kind: diffKindOf(configMap) } : undefined;
    },
    async readDiffConfigMap(namespace, name) {
      return gateway.configMap(namespace, name);
    },
    // Always under the derived name: here nothing but the run writes there (it hashes the run's uid).
    async writeDiff(run, diff, { kind }) {
      const configMap = buildDiffConfigMap(run, diff, kind);
      const name = configMap.metadata!.name!;
      const found = gateway.configMap(run.metadata.namespace, name);
      if (found && decideDiffWrite(found, kind).action === 'refuse') return { outcome: 'refused', configMap: name };
      gateway.putConfigMap(configMap);
      return { outcome: 'written', configMap: name };
    },
  };
}
