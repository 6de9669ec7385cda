// The CodingRun status: what the operator observed and did. Users read it with kubectl;
// the operator writes it in one place (the reconciler) and bounds every free-text field
// before writing, so the limits below are a second line of defence, not the first.
import { z } from 'zod';
import { condition } from './kubernetes-names.ts';
import { verificationStatus } from './verification-status.ts';
import { COMMIT_ID } from './commit-id.ts';

export const PHASES = ['Pending', 'Provisioning', 'Running', 'WaitingForApproval', 'Succeeded', 'Failed', 'Cancelled'] as const;
export type Phase = (typeof PHASES)[number];

export const TERMINAL_PHASES: ReadonlySet<Phase> = new Set(['Succeeded', 'Failed', 'Cancelled']);
export const isTerminal = (phase: Phase | undefined): boolean => phase !== undefined && TERMINAL_PHASES.has(phase);

/**
 * Condition types (API.md, docs/gitops.md). Accepted, SandboxReady and AwaitingApproval say how
 * far the run got; Ready, Reconciling, Stalled, Succeeded and Failed are what Argo CD, Flux,
 * kstatus and `kubectl wait` read (reconcile/phase-conditions.ts).
 */
export const CONDITION_TYPES = [
  'Accepted',
  'SandboxReady',
  'AwaitingApproval',
  'Ready',
  'Reconciling',
  'Stalled',
  'Succeeded',
  'Failed',
] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

/** Status bounds: everything the operator writes is cut to these first. */
export const LIMITS = {
  message: 4096,
  /**
   * Security #11.5: the whole input of a call waiting for approval, never a cut. In status
   * because it is there only while the run waits (a few writes per approval), it must be
   * shown to whoever may answer (the run's own RBAC), and a ConfigMap would be a second
   * object to write, own and check; bounded like result.diff so the run object stays small
   * in etcd, in the operator's cache and in every watch event. A larger call is denied.
   */
  pendingApprovalInput: 65_536,
  summary: 16_384,
  diff: 65_536,
  fullDiff: 1_048_576,
} as const;

const terminalList = [...TERMINAL_PHASES].map((phase) => `'${phase}'`).join(', ');
const finishedRunRule = {
  rule:
    `!has(oldSelf.phase) || !(oldSelf.phase in [${terminalList}]) || ` +
    "(has(self.phase) && self.phase == oldSelf.phase && (has(self.reason) ? self.reason : '') == (has(oldSelf.reason) ? oldSelf.reason : ''))",
  message: 'the phase and reason of a finished run cannot change; create a new CodingRun to run the task again',
};

const count = (description: string) => z.number().int().min(0).describe(description);
const timestamp = (description: string) => z.string().meta({ format: 'date-time' }).describe(description);

export const usageStatus = z
  .object({
    inputTokens: count('Input (prompt) tokens the provider reported, summed over all model calls.'),
    outputTokens: count('Output (completion) tokens the provider reported.'),
    cacheReadTokens: count('Input tokens the provider served from its prompt cache (part of inputTokens).'),
    reasoningTokens: count('Reasoning tokens the provider reported (part of outputTokens).'),
    totalTokens: count('Total tokens the provider reported.'),
    complete: z
      .boolean()
      .describe(
        "False when some model call reported no usage, or figures that are not token counts: its missing figures are the operator's own estimate of what was sent and received, so the totals are approximate.",
      ),
  })
  .describe('Token usage as reported by the provider, including compaction calls. Never money.');

export const pendingApprovalStatus = z
  .object({
    id: z.string().min(1).max(128).describe('Id to answer with; an answer with another id is ignored.'),
    toolName: z.string().min(1).max(128).describe('The tool the model wants to call.'),
    input: z
      .string()
      .max(LIMITS.pendingApprovalInput)
      .describe('The whole input of the call as JSON (never cut: a call whose input exceeds 64 KiB is denied instead of waiting).'),
    inputBytes: count('Size of input in UTF-8 bytes.').optional(),
    inputSha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional()
      .describe(
        "sha256 (hex) of input's UTF-8 bytes. An approval names it; the operator runs the call only when it matches the input it runs.",
      ),
    requestedAt: timestamp('When the call started waiting.'),
  })
  .describe('The tool call waiting for a human, present only in phase WaitingForApproval. Answer with kubectl codingrun approve|deny.');

/** Answered approvals status.approvals keeps, the latest; the transcript keeps every one. */
export const APPROVALS_KEPT = 20;

export const answeredApprovalStatus = z
  .object({
    id: z.string().min(1).max(128).describe('The approval id (status.pendingApproval.id while it waited).'),
    toolName: z.string().min(1).max(128).describe('The tool whose call was answered.'),
    decision: z.enum(['approve', 'deny']).describe('approve ran the call; deny sent the model a tool error with the reason.'),
    user: z
      .string()
      .max(512)
      .optional()
      .describe(
        "Who answered: the chamvi.dev/approver annotation of the answer. With the chart's approval policy installed the API " +
          "server refuses any other name than the requesting user's, so this is who sent it. Absent for a timeout.",
      ),
    timedOut: z.boolean().optional().describe('True when nobody answered within spec.approval.timeout and the operator denied the call.'),
    reason: z.string().max(1024).optional().describe("The answer's reason (a deny's is sent to the model)."),
    requestedAt: timestamp('When the call started waiting.'),
    answeredAt: timestamp('When the answer was acted on.'),
  })
  .describe('One answered approval.');

/** Where a run's kept diff comes from (status.result.diffSource). */
export const DIFF_SOURCES = ['final', 'snapshot', 'none'] as const;
export type DiffSource = (typeof DIFF_SOURCES)[number];

export const publishedStatus = z
  .object({
    branch: z.string().max(255).describe('The branch the change was pushed to.'),
    commit: z.string().regex(COMMIT_ID).describe("The commit pushed (full SHA): the run's full diff on status.result.revision."),
    pullRequest: z
      .object({
        url: z.string().max(2048).describe('Web address of the pull request (merge request on GitLab).'),
        number: z.number().int().min(0).describe('Its number (the iid on GitLab).'),
      })
      .optional()
      .describe('The pull request opened or updated; absent without spec.publish.pullRequest.'),
  })
  .describe('Where spec.publish put the result. Absent when the run published nothing (no change, a denied approval, a failure).');

export const resultStatus = z
  .object({
    summary: z.string().max(LIMITS.summary).describe("The agent's final answer, bounded to 16 KiB."),
    summaryTruncated: z
      .boolean()
      .optional()
      .describe("True when summary is only the beginning of the agent's final answer, which was longer than 16 KiB."),
    diff: z.string().max(LIMITS.diff).describe('The change the run made as a unified diff, bounded to 64 KiB.'),
    diffTruncated: z
      .boolean()
      .describe(
        'True when diff is only the beginning of the change. diffConfigMap holds the whole diff up to 1 MiB; a larger change ' +
          "is kept there cut at 1 MiB, and the run's message says so.",
      ),
    diffNotUtf8: z
      .boolean()
      .optional()
      .describe(
        'True when the change holds bytes that are not UTF-8 text (a file in another encoding): the diff shows them as U+FFFD, ' +
          'so it is not the change exactly, and neither spec.publish nor spec.continueFrom uses it.',
      ),
    diffConfigMap: z
      .string()
      .max(253)
      .optional()
      .describe('ConfigMap holding the full diff (up to 1 MiB). kubectl codingrun diff prints it.'),
    diffSha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional()
      .describe(
        'sha256 (hex) of the full diff kept in diffConfigMap. Whoever reads the ConfigMap (kubectl codingrun diff, publish, ' +
          'continueFrom, an eval) checks it: anyone who may edit ConfigMaps in the namespace could change that copy.',
      ),
    revision: z
      .string()
      .regex(COMMIT_ID)
      .optional()
      .describe(
        'The commit the run cloned (full SHA), which diff is against. A run with spec.continueFrom naming this run starts from it.',
      ),
    filesChanged: count(
      "Files the diff touches, counted by the operator from the diff it keeps (never the sandbox's own git count); of its " +
        "first 1 MiB only when the change was larger (the run's message says so).",
    ),
    insertions: count('Lines added, counted as filesChanged is.'),
    deletions: count('Lines removed, counted as filesChanged is.'),
    diffSource: z
      .enum(DIFF_SOURCES)
      .optional()
      .describe(
        'Where the diff was taken: final (from the sandbox as the run ended), snapshot (the last one taken after a step that ' +
          'changed files, because the sandbox was gone), or none (no change was ever seen).',
      ),
    published: publishedStatus.optional(),
    verification: verificationStatus.optional(),
  })
  .describe('What the run produced. Also kept for failed runs that got as far as taking a diff.');

/** Most distinct host:port entries status.egress.hosts keeps; later ones are only counted. */
export const EGRESS_HOSTS_MAX = 32;

export const egressHostStatus = z
  .object({
    host: z.string().max(255).describe('Host name the sandbox asked for.'),
    port: z.number().int().min(0).max(65535).describe('Port it asked for.'),
    allowed: count('Connections to it the proxy let through.'),
    denied: count('Connections to it the proxy refused.'),
    rule: z.string().max(64).optional().describe('The rule of the last refusal, such as not-on-run-list or private-address.'),
  })
  .describe('Connections to one host:port.');

export const egressStatus = z
  .object({
    connections: count('Connections (CONNECT tunnels and plain HTTP requests) the sandbox made through the egress proxy.'),
    allowed: count('Connections the proxy let through.'),
    denied: count('Connections the proxy refused.'),
    bytesSent: count('Bytes the sandbox sent out through allowed connections.'),
    bytesReceived: count('Bytes the sandbox received through allowed connections.'),
    hosts: z
      .array(egressHostStatus)
      .max(EGRESS_HOSTS_MAX)
      .describe(`Distinct hosts asked for, the first ${EGRESS_HOSTS_MAX}; later hosts are counted above but not listed.`),
    hostsTruncated: z.boolean().describe('True when more distinct hosts were asked for than hosts lists.'),
  })
  .describe('What the sandbox did on the network, recorded by the egress proxy (spec.sandbox.egress).');

/**
 * The phases of a run that status.timings times, in the order a run goes through them. A
 * sandbox is either a fresh pod (PodScheduled, PodReady) or one claimed from a warm pool
 * (SandboxClaimed); Setup is there only when spec.sandbox.setup is set.
 */
export const TIMING_PHASES = [
  'Queued',
  'PodScheduled',
  'PodReady',
  'SandboxClaimed',
  'Clone',
  'Import',
  'Setup',
  'FirstModelCall',
  'FirstToolCall',
  'Finalize',
] as const;
export type TimingPhase = (typeof TIMING_PHASES)[number];

export const runTiming = z
  .object({
    phase: z
      .enum(TIMING_PHASES)
      .describe(
        'Queued (created until admitted), PodScheduled (pod created until bound to a node), PodReady (bound until Ready), ' +
          'SandboxClaimed (a warm pod claimed for the run), Clone (git clone in the operator), Import (the tree into the sandbox), ' +
          'Setup (spec.sandbox.setup), FirstModelCall, FirstToolCall, Finalize (diff taken until the terminal status).',
      ),
    start: z
      .string()
      .meta({ format: 'date-time' })
      .describe('When the phase started, RFC 3339 with milliseconds (Queued starts at metadata.creationTimestamp: whole seconds).'),
    durationMs: count('How long the phase took, in milliseconds.'),
  })
  .describe('One timed phase of the run.');

/** What holds a queued run back (reconcile/fair-admission.ts), named in status.queue.heldBy. */
export const HELD_BY = ['ClusterSlots', 'NamespaceActiveRuns', 'NamespaceTokenBudget'] as const;

export const queueStatus = z
  .object({
    heldBy: z
      .enum(HELD_BY)
      .describe(
        "The limit the run waits for: ClusterSlots (the operator's maxActiveRuns), NamespaceActiveRuns (the namespace's " +
          'chamvi.dev/max-active-runs annotation) or NamespaceTokenBudget (its chamvi.dev/tokens-per-day, spent for today).',
      ),
    position: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        'With heldBy ClusterSlots: the place of the run in the order the next free slots go (1 is next). Namespaces take ' +
          'turns (round-robin), so it can move as runs of other namespaces arrive. The run each namespace serves next has ' +
          'its place written as slots free; the runs behind it, at least every 30 seconds.',
      ),
  })
  .describe('Present while the run waits in phase Pending with reason Queued: what holds it and its place in the queue.');

export const admissionStatus = z
  .object({
    sequence: z
      .number()
      .int()
      .min(1)
      .describe('Order of admission among the runs the operator knows: one more than the last admitted run it sees.'),
    time: timestamp('When the run was given a sandbox slot.'),
  })
  .describe('When the run left the queue for a sandbox slot; namespaces take turns, from the one after the last admitted run.');

/**
 * Longest user name recorded (status.template.writtenBy, status.continuedFrom.writtenBy), in code
 * points as the CRD's maxLength counts them; reconcile/user-name.ts cuts names to it, so what the
 * operator writes always fits. Here and not there because api/ imports nothing above it.
 */
export const USER_NAME_MAX = 512;

/**
 * spec.templateRef: the template as the operator read it when it accepted the run. The run's
 * effective spec is this spec with the run's own fields laid over it (reconcile/run-template.ts),
 * for the operator, its workers and the egress proxy alike; a later edit of the template
 * changes nothing here. Its fields are the template's and are validated, merged, by the
 * operator's run schema, so the CRD keeps them as written.
 */
export const templateStatus = z
  .object({
    name: z.string().max(253).describe('The CodingRunTemplate named in spec.templateRef.'),
    uid: z.string().max(64).optional().describe('Its uid when it was read.'),
    resourceVersion: z.string().max(64).optional().describe('Its resourceVersion when it was read: the version the run runs.'),
    writtenBy: z
      .string()
      .max(USER_NAME_MAX)
      .optional()
      .describe(
        "Who last wrote the template's spec (its chamvi.dev/created-by) when it was read. With separation of duties, they may not " +
          "answer the run's approvals: they wrote its task.",
      ),
    spec: z
      .looseObject({})
      .meta({ 'x-kubernetes-preserve-unknown-fields': true })
      .describe("The template's spec when the run was accepted. The run's own fields override it."),
  })
  .describe(
    'The CodingRunTemplate the run was accepted with (spec.templateRef), copied when the operator accepted the run, so that a later ' +
      'edit of the template does not change a run already accepted.',
  );

/** Most writers status.continuedFrom.writtenBy names: a longer chain of continued runs is refused at acceptance. */
export const CONTINUED_FROM_WRITERS_MAX = 16;

/**
 * spec.continueFrom, pinned when the operator accepted the run (reconcile/continue-from-pin.ts):
 * the prepare job starts only from the run of this uid. A name alone would let anyone who may
 * create runs in the namespace delete the source and create another under its name in between,
 * and the run would continue from content nobody chose.
 */
export const continuedFromStatus = z
  .object({
    name: z.string().max(253).describe('The CodingRun spec.continueFrom names.'),
    uid: z.string().min(1).max(64).describe('Its metadata.uid when this run was accepted: the only run it starts from.'),
    writtenBy: z
      .array(z.string().min(1).max(USER_NAME_MAX).describe('A user name, as request.userInfo.username gave it.'))
      .max(CONTINUED_FROM_WRITERS_MAX)
      .optional()
      .describe(
        "Who wrote what this run starts from, when it was accepted: the source run's creator (chamvi.dev/created-by), the writer " +
          "of its CodingRunTemplate, and this list of the source's own, for a chain of continued runs. The source's task and " +
          "final message are this run's first prompt and its diff is this run's workspace, so with separation of duties they " +
          "may not answer this run's approvals. Absent when the source names none.",
      ),
  })
  .describe(
    'The run spec.continueFrom named, as the operator found it when it accepted this run. The run starts only from that run: ' +
      'one deleted and created again under the name since fails it ContinueFromReplaced, nothing of it applied. ' +
      'Absent for a run without continueFrom. One accepted without it (by an operator from before this field) gets it at a ' +
      'later look, the run of that name as found then, once that run has finished; while it has none, with separation of ' +
      'duties no answer to its approvals is acted on.',
  );

/** Most containers (init containers included) status.admittedPod records: the builders make two. */
export const ADMITTED_IMAGES_MAX = 16;
/** Longest image reference status.admittedPod records (allow-images.ts reads no longer one as an image). */
export const ADMITTED_IMAGE_MAX_LENGTH = 1024;

/**
 * The sandbox pod's images as the API server admitted it: the answer to the operator's create
 * (or claim) of the pod, mutating webhooks' rewrites in (a verifying webhook pins a digest,
 * and may spell the reference its own way). The workers exec only into a pod whose images are
 * still these (reconcile/admitted-pod.ts), so a spec change that leaves the images alone
 * (Kueue removing its scheduling gate, an in-place resize) is not taken for an image patch.
 */
export const admittedPodStatus = z
  .object({
    uid: z.string().min(1).max(64).describe("The pod's metadata.uid: the record holds for this pod only."),
    images: z
      .array(
        z
          .object({
            container: z
              .string()
              .min(1)
              .max(63)
              .describe('The container or init container; `<init container>@ran` for what the kubelet reported it ran.'),
            image: z
              .string()
              .min(1)
              .max(ADMITTED_IMAGE_MAX_LENGTH)
              .describe('Its image as admitted; for an `@ran` entry, `repository@sha256:...` as the kubelet reported it.'),
          })
          .describe('One container and its image.'),
      )
      .max(ADMITTED_IMAGES_MAX)
      .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['container'] })
      .describe(
        'Each container and init container of the pod, with its image as the API server admitted it. An entry named ' +
          "`<init container>@ran` (no container's name: those never hold an `@`) is the image the kubelet first reported that " +
          "init container ran under the operator's sandbox image repository (its imageID), kept so a copy of the image " +
          'pulled later under another name does not refuse the pod.',
      ),
  })
  .describe(
    "The images of the sandbox pod (podName) as the API server admitted it, admission webhooks' changes in, recorded by the " +
      'operator from its answer to the create or warm pool claim. The workers run nothing in the pod once a container has ' +
      'another image than recorded here, nor when a recorded image is not the one the operator built the pod with (a digest ' +
      'pinned at admission and the registry spelled out are the same image). Absent for a run given its pod by an operator ' +
      'from before this field, or whose pod had been changed since admission when the operator first saw it.',
  );

export const codingRunStatus = z
  .object({
    phase: z
      .enum(PHASES)
      .optional()
      .describe('Where the run is: Pending, Provisioning, Running, WaitingForApproval, or the terminal Succeeded, Failed, Cancelled.'),
    reason: z
      .string()
      .max(128)
      .optional()
      .describe(
        'Machine-readable cause of Failed or Cancelled, such as RepoNotAllowed, SecretNotFound, BudgetExceeded, DeadlineExceeded, SandboxLost.',
      ),
    message: z.string().max(LIMITS.message).optional().describe('One human sentence: what happened and what to do.'),
    observedGeneration: z.number().int().min(0).optional().describe('The .metadata.generation this status was computed from.'),
    conditions: z
      .array(condition)
      .max(16)
      .optional()
      .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] })
      .describe(
        'Accepted, SandboxReady and AwaitingApproval; Ready (True once Succeeded), Reconciling (True until the run ends), and, ' +
          'once it ends, Succeeded or Stalled and Failed (a failed or cancelled run). docs/gitops.md says what tools read.',
      ),
    podName: z.string().max(253).optional().describe('Name of the sandbox pod.'),
    admittedPod: admittedPodStatus.optional(),
    startTime: timestamp('When the run was accepted.').optional(),
    completionTime: timestamp('When the run reached a terminal phase.').optional(),
    steps: count('Model calls made so far: a step is one model call and its tool calls.').optional(),
    toolCalls: count('Tool calls executed, including those that returned a tool error.').optional(),
    usage: usageStatus.optional(),
    pendingApproval: pendingApprovalStatus.optional(),
    approvals: z
      .array(answeredApprovalStatus)
      .max(APPROVALS_KEPT)
      .optional()
      .describe(
        `Who approved or denied the run's gated calls, the latest ${APPROVALS_KEPT}, oldest first; ` +
          'kubectl codingrun logs shows every one from the transcript.',
      ),
    approvalWaitSeconds: count(
      'Seconds the run has spent in WaitingForApproval, summed over its answered approvals. Human time: not counted against ' +
        'spec.budget.timeout (each wait is bounded by spec.approval.timeout instead).',
    ).optional(),
    result: resultStatus.optional(),
    egress: egressStatus.optional(),
    timings: z
      .array(runTiming)
      .max(TIMING_PHASES.length)
      .optional()
      .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['phase'] })
      .describe(
        'How long each phase of the run took, in the order the run went through them, each added as the run leaves the phase. ' +
          'The same figures are the histogram chamvi_run_phase_duration_seconds{phase}.',
      ),
    queue: queueStatus.optional(),
    admission: admissionStatus.optional(),
    template: templateStatus.optional(),
    continuedFrom: continuedFromStatus.optional(),
  })
  // The operator never moves a finished run (its writers check the phase and send the
  // resourceVersion); this makes the API server refuse it from any writer, including one
  // that patches blindly. A transition rule: it compares the new status with the old.
  .meta({ 'x-kubernetes-validations': [finishedRunRule] })
  .describe('What the operator observed and did. Written by the operator only.');

export type CodingRunStatus = z.output<typeof codingRunStatus>;
export type Usage = z.output<typeof usageStatus>;
export type AdmittedPodStatus = z.output<typeof admittedPodStatus>;
export type PendingApproval = z.output<typeof pendingApprovalStatus>;
export type AnsweredApproval = z.output<typeof answeredApprovalStatus>;
export type RunResult = z.output<typeof resultStatus>;
export type Published = z.output<typeof publishedStatus>;
export type EgressStatus = z.output<typeof egressStatus>;
export type RunTiming = z.output<typeof runTiming>;
export type Condition = z.output<typeof condition>;
export type TemplateStatus = z.output<typeof templateStatus>;
export type ContinuedFromStatus = z.output<typeof continuedFromStatus>;
export type HeldBy = (typeof HELD_BY)[number];
