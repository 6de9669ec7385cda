// The operator's agent runtime (agent-runtime.ts startAgentRuntime) on a real Redis and nothing
// else real: no cluster, no sandbox, no model. For the toolbox tests of what its queue, workers
// and probes do with Redis; a test passes the run reads its jobs make, and a queue prefix of its
// own so that no two tests share a queue.
import { KubeConfig } from '@kubernetes/client-node';
import { localOperatorConfig } from '../../operator/src/cli/local/local-operator-config.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import { startAgentRuntime, type AgentRuntime } from '../../operator/src/workers/agent-runtime.ts';
import type { RunResources } from '../../operator/src/workers/run-resources.ts';
import type { TranscriptWriter } from '../../operator/src/workers/transcript-writer.ts';

const logger = {
  info() {},
  warn() {},
  error() {},
  child() {
    return logger;
  },
};

/** Every run a job reads is gone: the job ends without doing anything. */
const noRuns = { getRun: async () => undefined } as unknown as KubeGateway;

/** Started, its workers polling `redisUrl`; the caller closes it. */
export function startAgentRuntimeOnRedis(redisUrl: string, prefix: string, kube: KubeGateway = noRuns): AgentRuntime {
  return startAgentRuntime({
    config: localOperatorConfig(redisUrl, prefix),
    kubeConfig: new KubeConfig(),
    kube,
    events: new EventRecorder(kube, 'test', logger),
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    logger,
    sandboxFor: () => {
      throw new Error('no job gets as far as a sandbox here');
    },
    callingPolicy: DEFAULT_CALLING_POLICY,
    callingPolicyDependencies: createSystemCallingPolicyDependencies(),
    resources: {} as RunResources,
    transcript: { append: async () => undefined } satisfies TranscriptWriter,
  });
}
