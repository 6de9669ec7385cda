// Security #11.8: a sandbox's NetworkPolicy isolates it only where a CNI enforces NetworkPolicy.
// Where none does, or where the operator creates no policy (networkPolicy: false), a sandbox
// reaches Redis, cloud metadata, the API server, internal services and the internet. So a run
// starts only in a namespace where a probe showed enforcement, unless an admin explicitly
// accepts unisolated sandboxes. Pure: the probe (controller/isolation-probe.ts) only observes.
import type { OperatorConfig } from '../config/operator-config.ts';

/** What the probe last found in a namespace: 'unknown' until a probe has decided (or when it could not). */
export type IsolationVerdict = 'enforced' | 'unenforced' | 'unknown';

export interface IsolationView {
  verdict: IsolationVerdict;
  /** What the probe saw, in words, for the run's message: the target it reached, or why it could not decide. */
  detail?: string;
}

export type IsolationGate =
  /** The run may get a sandbox. */
  | { kind: 'open' }
  /** Not known yet: the run waits (Pending) while the probe runs. */
  | { kind: 'wait'; message: string }
  /** The run must not get a sandbox here: it fails with IsolationNotEnforced. */
  | { kind: 'refuse'; message: string };

/** While a run waits for the probe, look again at least this often (the probe also wakes it). */
export const ISOLATION_RECHECK_MS = 5_000;

const REACHES = "Redis (every run's state), the cloud metadata service, the API server, internal services and the internet";
const OPT_IN = 'or have a cluster admin accept that risk with allowUnisolatedSandboxes: true in the operator config';

type IsolationConfig = Pick<OperatorConfig, 'allowUnisolatedSandboxes' | 'networkPolicy'>;

/** Whether runs need a probe's verdict at all: not when the admin accepts unisolated sandboxes, nor when nothing could be probed. */
export function needsIsolationProbe(config: IsolationConfig): boolean {
  return !config.allowUnisolatedSandboxes && config.networkPolicy;
}

/** May a run in `namespace` get a sandbox, given what the probe found there? Unknown is not enforced: it waits. */
export function isolationGate(isolation: IsolationView | undefined, config: IsolationConfig, namespace: string): IsolationGate {
  if (config.allowUnisolatedSandboxes) return { kind: 'open' };
  if (!config.networkPolicy) {
    return {
      kind: 'refuse',
      message:
        `The operator creates no NetworkPolicy (config networkPolicy: false), so this run's sandbox would reach ${REACHES}. ` +
        `Set networkPolicy: true on a cluster that enforces NetworkPolicy, ${OPT_IN}; then create the run again.`,
    };
  }
  const verdict = isolation?.verdict ?? 'unknown';
  if (verdict === 'enforced') return { kind: 'open' };
  if (verdict === 'unenforced') {
    return {
      kind: 'refuse',
      message:
        `NetworkPolicy is not enforced in namespace ${namespace}${isolation?.detail ? `: ${isolation.detail}` : ''}. ` +
        `A sandbox here would reach ${REACHES}. Install a CNI that enforces NetworkPolicy (Calico, Cilium, ...), ${OPT_IN}; ` +
        'then create the run again.',
    };
  }
  return {
    kind: 'wait',
    message:
      `Waiting for a probe to show that NetworkPolicy is enforced in namespace ${namespace} before a sandbox starts` +
      `${isolation?.detail ? ` (${isolation.detail})` : ''}.`,
  };
}
