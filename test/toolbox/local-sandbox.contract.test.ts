// Runs the shared Sandbox contract for both local modes: one toolbox process per call, and one
// kept serve session.
import { createLocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { describeSandboxContract } from '../support/sandbox-contract.ts';

for (const mode of ['call', 'serve'] as const) {
  describeSandboxContract(`local process (${mode})`, async (options) => {
    const sandbox = await createLocalSandbox({
      mode,
      ...(options?.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}),
    });
    return { sandbox, cleanup: async () => undefined };
  });
}
