// Runs the real operator (operator/src/main.ts) as a child process for integration and
// e2e tests, with its JSON log lines collected so tests can wait for what it says.
import { fileURLToPath } from 'node:url';
import { LoggedProcess, type LogLine } from './logged-process.ts';
import { operatorNodeFlags } from './operator-node-flags.ts';

const mainPath = fileURLToPath(new URL('../../operator/src/main.ts', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Security #11.1: the key that seals run state in Redis, the same for every operator a test
 * starts (as the chart's Secret gives every replica one), so a run survives an operator
 * killed and replaced, or moving to another replica.
 */
export const TEST_STATE_KEY = 'chamvi-test-state-key-0123456789abcdef0123456789abcdef';

export interface OperatorProcessOptions {
  kubeconfig: string;
  env?: Record<string, string>;
  /** A built operator bundle to run with plain node, as the image does; default main.ts through tsx. */
  entry?: string;
  /** More flags for the operator's node, e.g. `--cpu-prof` for a profile (benchmarks only). */
  nodeArgs?: readonly string[];
}

export type { LogLine };

export class OperatorProcess extends LoggedProcess {
  constructor(options: OperatorProcessOptions) {
    super(
      'operator',
      [...operatorNodeFlags(), ...(options.nodeArgs ?? []), ...(options.entry ? [options.entry] : ['--import', 'tsx', mainPath])],
      {
        cwd: repoRoot,
        // The dev cluster (kwok) enforces no NetworkPolicy, so every test operator opts in to
        // unisolated sandboxes (security #11.8); a test of the refusal sets it back to 'false'.
        env: {
          ...process.env,
          KUBECONFIG: options.kubeconfig,
          CHAMVI_HTTP_PORT: '0',
          LOG_LEVEL: 'debug',
          CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'true',
          CHAMVI_STATE_KEY: TEST_STATE_KEY,
          ...options.env,
        },
      },
    );
  }
}

/** Polls `check` until it returns a value (not undefined) or the time runs out. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 30_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
