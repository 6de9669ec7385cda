// The status.message of each way a run fails that more than one part of the operator
// reports (the controller and the workers, or several jobs): written once here, so a run
// that fails for the same reason says the same thing whoever noticed. Each says what
// happened and what to do. Messages particular to one check stay beside it (validate-run,
// stop-conditions, the provider errors).

/** A size in MiB with one decimal, as the state messages give it (0.1 rather than 0 for a small state). */
function mebibytes(bytes: number): string {
  return (Math.ceil((bytes / 1_048_576) * 10) / 10).toFixed(1);
}

const STATE_LOST_HINT = 'create the run again, and give Redis AOF persistence so a restart keeps runs.';

export const FAILURE_MESSAGES = {
  /** StateLost: a job or the controller found no state in Redis for a started run. */
  stateGone: `The run's working state is gone from Redis (was Redis restarted without persistence?); ${STATE_LOST_HINT}`,
  /** BudgetExceeded: the run's conversation grew past what a replica saves (workers/run-state.ts); sizes in bytes as stored. */
  stateTooLarge: (bytes: number, max: number) =>
    `The run's saved conversation reached ${mebibytes(bytes)} MiB, over the ${mebibytes(max)} MiB the operator keeps for one run; ` +
    'lower spec.model.contextWindow so that older turns are summarised sooner, or ask the model for smaller tool results.',
  /** BudgetExceeded: saving the run's state would take its namespace's saved states past the operator's budget (workers/run-state.ts). */
  namespaceStateBudget: (namespace: string, heldByOthers: number, bytes: number, budget: number) =>
    `The runs of namespace ${namespace} keep ${mebibytes(heldByOthers)} MiB of saved state in Redis, and this run's ${mebibytes(bytes)} MiB ` +
    `would take them over the operator's namespaceMaxStateBytes of ${mebibytes(budget)} MiB (${budget} bytes), which keeps one namespace ` +
    "from filling the Redis every run shares; run fewer of the namespace's runs at once or lower their spec.model.contextWindow, " +
    "or have the admin raise config.namespaceMaxStateBytes (and Redis's maxmemory with it).",
  /** StateLost: the state is there but no job is left to move the run on. */
  noJobLeft: `No job is left in Redis to continue the run (was Redis restarted without persistence?); ${STATE_LOST_HINT}`,
  /** StateLost (Security #11.1): the state in Redis is not what the operator wrote. */
  stateInvalid: (detail: string) =>
    `the run's state in Redis failed validation: ${detail}; was Redis written by something other than the operator? ` +
    'Nothing in that state was acted on. Create the run again, and check who can reach Redis (it needs a password; ' +
    'every operator replica needs the same stateKey).',
  /** CloneFailed: git could not fetch the repository, or it is too large (detail from git-clone.ts, token scrubbed). */
  cloneFailed: (detail: string) => `${detail}; check spec.repository.url, revision and credentials`,
  /** SetupFailed: spec.sandbox.setup did not exit 0. */
  setupFailed: (why: string, output: string) => `spec.sandbox.setup ${why}: ${output}`,
  /** DeadlineExceeded, noticed by a worker while the model had not answered yet. */
  deadlineWhileWaitingForModel:
    'The run reached spec.budget.timeout while waiting for the model to answer; the partial diff is kept. Raise the timeout or narrow the task, and check the model endpoint if it hangs.',
  /** DeadlineExceeded, noticed by the controller (after the agent's grace). */
  deadlineAtController: (timeout: string) =>
    `The run did not finish within its budget.timeout of ${timeout}; raise spec.budget.timeout for a longer task.`,
  /** DeadlineExceeded: the pod's activeDeadlineSeconds ended it; `limit` is that limit, when known (it may be older than the timeout). */
  deadlineAtPod: (timeout: string, limit?: string) =>
    `The sandbox pod reached its activeDeadlineSeconds (${limit ? `${limit}, set when the pod was made; ` : ''}budget.timeout ${timeout}).`,
  /**
   * DeadlineExceeded, by the controller just before the sandbox pod's own limit, which came before
   * the budget's (a budget raised after the pod was made: Kubernetes never raises a pod's limit).
   */
  deadlineAtSandboxLimit: (podName: string, limit: string, timeout: string) =>
    `The run reached the ${limit} limit of its sandbox pod ${podName} (activeDeadlineSeconds, fixed when the pod was made: ` +
    `Kubernetes cannot extend it) before its budget.timeout of ${timeout}. Create a new run (spec.continueFrom) for more time.`,
  /** InvalidSpec: spec.continueFrom names no run in the namespace (found so as the run is accepted, or by the prepare job). */
  continueFromMissing: (sourceName: string, namespace: string) =>
    `spec.continueFrom names CodingRun ${sourceName}, which does not exist in namespace ${namespace}; ` +
    "name a finished run in this run's own namespace.",
  /** SandboxLost: the pod ended or went away before the run did. */
  sandboxLost: (podName: string, why: string) => `Sandbox pod ${podName} ${why} before the run ended; create the run again.`,
  /** SandboxNotReady: the pod was not Ready in time; `state` says what it was doing. */
  sandboxNotReady: (podName: string, seconds: number, state: string) =>
    `Sandbox pod ${podName} was not Ready within ${seconds}s of the run's start (operator sandboxReadyTimeoutSeconds): ${state} ` +
    "Check the image and the pod's Events (kubectl describe pod), then create the run again.",
  /** AgentFailed: the controller saw the run's last job fail for good. */
  agentStopped: (failedReason: string) =>
    `The agent stopped: its last job failed for good (${failedReason.slice(0, 1024)}); create the run again.`,
  /** AgentFailed or SandboxLost: a job failed on every attempt BullMQ gave it. */
  jobFailed: (jobName: string, attempts: number, detail: string, forbidden: boolean) =>
    `The ${jobName} job failed ${attempts} times: ${detail}` +
    (forbidden ? " The operator's ServiceAccount is forbidden to do this: give it the chart's RBAC (see docs/operations.md)." : ''),
} as const;
