// Security #11.3: the model endpoint is checked again where the model is built, right before
// its Secret is read and its first request is sent: the admission check ran earlier, against
// the config of that moment, and an admin may have removed the endpoint since, from the
// cluster's list or from the namespace's (chamvi.dev/allow-model-endpoints: narrowed after a
// leaked key, it stopped no run already admitted).
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { isModelEndpointAllowed, type ModelEndpointConfig } from '../reconcile/model-endpoints.ts';
import type { NamespacePolicyReader } from '../kube/namespace-policy-reader.ts';
import { narrowedListRefusal } from '../reconcile/namespace-policy.ts';
import type { ModelFactory } from './agent-dependencies.ts';

export function endpointCheckedModelFactory(
  factory: ModelFactory,
  config: ModelEndpointConfig,
  namespacePolicies?: NamespacePolicyReader,
): ModelFactory {
  return async (namespace, model, runUid) => {
    const decision = isModelEndpointAllowed(model, config);
    if (!decision.allowed) throw new RunFailure(REASONS.ModelEndpointNotAllowed, decision.message);
    const narrowed = namespacePolicies ? (await namespacePolicies.policyOf(namespace)).allowModelEndpoints : undefined;
    if (narrowed !== undefined) {
      const team = isModelEndpointAllowed(model, { allowModelEndpoints: narrowed });
      if (!team.allowed)
        throw new RunFailure(REASONS.ModelEndpointNotAllowed, narrowedListRefusal(namespace, 'allowModelEndpoints', team.message));
    }
    return factory(namespace, model, runUid);
  };
}
