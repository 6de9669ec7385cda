// Security #11.3: the model endpoint is checked again where the model is built, right before
// its Secret is read and its first request is sent: the admission check ran earlier, against
// the config of that moment, and an admin may have removed the endpoint since.
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { isModelEndpointAllowed, type ModelEndpointConfig } from '../reconcile/model-endpoints.ts';
import type { ModelFactory } from './agent-dependencies.ts';

export function endpointCheckedModelFactory(factory: ModelFactory, config: ModelEndpointConfig): ModelFactory {
  return async (namespace, model, runUid) => {
    const decision = isModelEndpointAllowed(model, config);
    if (!decision.allowed) throw new RunFailure(REASONS.ModelEndpointNotAllowed, decision.message);
    return factory(namespace, model, runUid);
  };
}
