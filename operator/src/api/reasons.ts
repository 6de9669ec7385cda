// The status.reason vocabulary. Typed errors carry one of these; the reconciler and the
// workers map them to status in one place. Users and alerts match on them, so they are
// part of the API: add, never rename.

export const REASONS = {
  // Accepted condition
  Valid: 'Valid',
  Queued: 'Queued',
  // Failures
  InvalidSpec: 'InvalidSpec',
  RepoNotAllowed: 'RepoNotAllowed',
  SecretNotFound: 'SecretNotFound',
  /** Security #11.3: a Secret the run names lacks the label chamvi.dev/usable-by-runs: "true". */
  SecretNotAllowed: 'SecretNotAllowed',
  /** Security #11.3: spec.model.baseURL is not canonical or not in the operator's allowModelEndpoints. */
  ModelEndpointNotAllowed: 'ModelEndpointNotAllowed',
  /** Security #11.10: spec.sandbox.image is neither the operator's sandbox image nor in allowImages. */
  ImageNotAllowed: 'ImageNotAllowed',
  ConfigMapNotFound: 'ConfigMapNotFound',
  /** #15.3: spec.templateRef names a CodingRunTemplate that does not exist in the run's namespace when the run is accepted. */
  TemplateNotFound: 'TemplateNotFound',
  /**
   * spec.continueFrom's run was deleted and another created under its name after this run was
   * accepted (status.continuedFrom holds the uid it was accepted with): nothing of it is applied.
   */
  ContinueFromReplaced: 'ContinueFromReplaced',
  CloneFailed: 'CloneFailed',
  SetupFailed: 'SetupFailed',
  BudgetExceeded: 'BudgetExceeded',
  DeadlineExceeded: 'DeadlineExceeded',
  SandboxLost: 'SandboxLost',
  /**
   * The sandbox pod was not Ready within the operator's sandboxReadyTimeoutSeconds of the run's
   * start (an image that cannot be pulled, a pod no node takes): the run gives its slot up.
   */
  SandboxNotReady: 'SandboxNotReady',
  /**
   * Security #11.8: NetworkPolicy is not shown to be enforced in the run's namespace (or the
   * operator creates none), and the admin has not allowed unisolated sandboxes. Pending while
   * the probe runs; Failed once it shows no enforcement.
   */
  IsolationNotEnforced: 'IsolationNotEnforced',
  /** Security #11.14: a pod or NetworkPolicy the run does not own holds its sandbox's name; it is neither used nor deleted. */
  SandboxNameTaken: 'SandboxNameTaken',
  ModelAuthFailed: 'ModelAuthFailed',
  ModelUnavailable: 'ModelUnavailable',
  ModelRequestRejected: 'ModelRequestRejected',
  /** The endpoint answered, but not with a usable model response (garbage, too large, only broken tool calls). */
  ModelResponseInvalid: 'ModelResponseInvalid',
  ModelConfigurationInvalid: 'ModelConfigurationInvalid',
  ModelScriptInvalid: 'ModelScriptInvalid',
  /** The agent failed for a reason of its own (a bug or a broken sandbox); the message says which. */
  AgentFailed: 'AgentFailed',
  StateLost: 'StateLost',
  Deleted: 'Deleted',
  /**
   * The API server refused an object the run needs (its pod or NetworkPolicy) for a cause that
   * may clear: a ResourceQuota, an admission policy, missing RBAC, or a failure on its own side
   * (HTTP 5xx). The run stays Pending and tries again; the message quotes the API server and
   * says what to change.
   */
  SandboxRefused: 'SandboxRefused',
  /** The API server refused an object derived from the run as invalid: no retry can help, the run fails. */
  SandboxInvalid: 'SandboxInvalid',
  /** spec.verify.command failed (after every retry) and spec.verify.required is true; the diff is kept. */
  VerificationFailed: 'VerificationFailed',
  /**
   * #15.2: the run was applied again after its ttlSecondsAfterFinished deleted it (a GitOps
   * sync), with the same name and spec: it is not run again, and ends in the recorded phase.
   */
  AlreadyFinished: 'AlreadyFinished',
  /** Someone asked to stop the run (kubectl codingrun cancel): the annotation chamvi.dev/cancel. */
  Cancelled: 'Cancelled',
  /**
   * spec.publish: the branch or pull request could not be made (the forge refused the token, a
   * branch the operator did not make is in the way, the diff does not apply). The message quotes
   * the forge, never the token; the diff is kept.
   */
  PublishFailed: 'PublishFailed',
  // Success
  Completed: 'Completed',
} as const;

export type Reason = (typeof REASONS)[keyof typeof REASONS];

/**
 * Reasons of Accepted, SandboxReady and AwaitingApproval. (Ready, Reconciling, Stalled,
 * Succeeded and Failed carry the run's status.reason, or its phase while it has none.) Part
 * of the API like REASONS: `kubectl wait` and alerts match on them.
 */
export const CONDITION_REASONS = {
  /** SandboxReady=False while the pod is being created. */
  Provisioning: 'Provisioning',
  /** SandboxReady=False for a pod that reports no reason of its own. */
  PodNotReady: 'PodNotReady',
  PodReady: 'PodReady',
  /** SandboxReady=True for a run given a ready pod of a warm pool (docs/warm-pools.md). */
  WarmPodClaimed: 'WarmPodClaimed',
  /** SandboxReady=False once the run has ended (the pod is removed). */
  RunFinished: 'RunFinished',
  ToolCallNeedsApproval: 'ToolCallNeedsApproval',
  NoPendingCall: 'NoPendingCall',
} as const;

/**
 * Reasons of the Events recorded on a run (besides the status.reason of a phase change). Events
 * are for transitions; what each step did is in the run's transcript (record/), not an Event.
 */
export const EVENT_REASONS = {
  Accepted: 'Accepted',
  Provisioning: 'Provisioning',
  SandboxReady: 'SandboxReady',
  Prepared: 'Prepared',
  SetupDone: 'SetupDone',
  AwaitingApproval: 'AwaitingApproval',
  Approved: 'Approved',
  Denied: 'Denied',
  /** An approval whose sha256 is not the pending input's (Security #11.5): the call stays pending. */
  ApprovalRefused: 'ApprovalRefused',
  /** An approval annotation that answers another call, or cannot be read. */
  ApprovalIgnored: 'ApprovalIgnored',
  /** The run's diff could not be kept in its ConfigMap (the API server refused it); the status says why. */
  DiffNotStored: 'DiffNotStored',
  /** spec.verify.command exited 0. */
  VerificationPassed: 'VerificationPassed',
  /** spec.verify.command failed; the message says whether the model gets another try, the run fails, or it succeeds anyway. */
  VerificationFailed: 'VerificationFailed',
  /** A transcript entry the API server refused (a ResourceQuota, a policy): the run goes on without it. */
  TranscriptNotStored: 'TranscriptNotStored',
  /** spec.publish: the branch was pushed (or found pushed) and the pull request opened or updated. */
  Published: 'Published',
  /** spec.publish with approval.publish: denied (by a human or at the timeout); the run ends Succeeded without publishing. */
  PublishDenied: 'PublishDenied',
  /**
   * #15.2: the namespace's record of finished runs could not take this run's (the API server
   * refused it, or the ConfigMap is not one the operator keeps): the run is kept past its
   * ttlSecondsAfterFinished rather than deleted unrecorded, and tried again later.
   */
  FinishedRunNotRecorded: 'FinishedRunNotRecorded',
  /**
   * The run's sandbox pod ends the run before its budget would (a budget raised after the pod was
   * made: Kubernetes never raises a pod's activeDeadlineSeconds); the message says by when. Once.
   */
  TimeoutBeyondSandbox: 'TimeoutBeyondSandbox',
} as const;
