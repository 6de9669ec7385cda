// What the real API server says to a write a test makes through a client of the operator's own
// (the egress proxy's, holding a token of its ServiceAccount): taken, or refused with the code
// and message an admission policy or RBAC gave. And the wait for a policy just applied, which
// the API server enforces a moment later.
import { apiRefusal } from '../../operator/src/kube/api-errors.ts';

export interface ApiRefusal {
  code: number;
  message: string;
}

/** Undefined when the API server took the write, else its refusal; any other failure is thrown. */
export async function refusalOf(write: () => Promise<unknown>): Promise<ApiRefusal | undefined> {
  try {
    await write();
    return undefined;
  } catch (error) {
    const refusal = apiRefusal(error);
    if (!refusal) throw error;
    return refusal;
  }
}

export interface PolicyEnforcement {
  /** What the refusal's message holds once the policy is enforced. */
  refused: string;
  /** Epoch milliseconds after which to give up. */
  deadline: number;
  /** The policy, for the error: "the egress proxy status policy". */
  policy: string;
  /** What the error says when the last probe was taken. */
  taken: string;
}

/** Probes until the policy refuses the probe, or throws saying what the last probe met. */
export async function untilPolicyRefuses(probe: () => Promise<ApiRefusal | undefined>, enforcement: PolicyEnforcement): Promise<void> {
  for (;;) {
    const refusal = await probe();
    if (refusal?.message.includes(enforcement.refused)) return;
    if (Date.now() > enforcement.deadline)
      throw new Error(`${enforcement.policy} is not enforced: ${refusal?.message ?? enforcement.taken}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
