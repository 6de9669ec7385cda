// spec.publish in the worker (issue #14): the result of a Succeeded run becomes a branch and a
// pull request on its forge. Three entries, each small:
//  - startPublish, from the finalize job once the diff is kept: parks the run for a human
//    (approval.publish; publish-wait.ts shows the wait) or hands it to the publish job;
//  - answerPublishApproval, from the resume job: an approve hands it to the publish job, a deny
//    ends the run Succeeded without publishing, saying why;
//  - runPublishJob: clone the starting commit, apply the run's full diff (its ConfigMap, checked
//    against the digest taken at finalize, which is also what an approver approved), commit,
//    push, open or update the pull request, and end the run Succeeded with status.result.published.
// What to do is decided by publish/ (pure) after looking at the forge first, so a retried job
// or a restarted operator finds its own commit and pull request and does nothing twice.
// Failures end the run Failed/PublishFailed (job-failure.ts) with the diff kept; the token is
// in no message (git's output and the forge's answers are scrubbed of it). The state is saved
// only over one still in Redis (save-if-present.ts): a run ended meanwhile (its stop deleted the
// state) is let go, neither parked for a human nor handed to the publish job.
import { repositoryAllowedNow } from './repository-allowed-now.ts';
import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { EVENT_REASONS, REASONS, RunFailure, isTerminal, type CodingRun, type ParsedCodingRun, type Published } from '../api/index.ts';
import { FAILURE_MESSAGES } from '../api/failure-messages.ts';
import { readCancelRequest } from '../reconcile/cancel-request.ts';
import { repositoryUrlParts } from '../reconcile/canonical-repository-url.ts';
import { countDiff, keptDiffResult, storedKeptDiff, type KeptDiff } from '../reconcile/kept-diff.ts';
import { notUtf8DiffMessage } from '../reconcile/not-utf8-diff.ts';
import { parseSpec } from '../reconcile/validate-run.ts';
import type { ApprovalAnswer } from '../reconcile/run-agent.ts';
import { finishStatus, recordAnsweredApproval, recordProgress, runningAfterStepStatus } from '../reconcile/run-status-transitions.ts';
import {
  boundText,
  MAX_RECORDED_APPROVALS,
  MAX_RECORDED_STEPS,
  resumeKey,
  type TranscriptApproval,
  type TranscriptEntry,
} from '../record/transcript-entry.ts';
import { createForge } from '../publish/create-forge.ts';
import { decidePullRequest, decidePush, pullRequestBase } from '../publish/decide-publish.ts';
import { ForgeError } from '../publish/errors/forge-error.ts';
import type { CreatedPullRequest } from '../publish/forge.ts';
import { forgeFor, type ForgeEntry } from '../publish/forge-for-host.ts';
import type { ForgeKind } from '../publish/forge-kinds.ts';
import { bodySha256, publishApprovalInput } from '../publish/publish-approval-input.ts';
import { planPublish } from '../publish/publish-plan.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { answeredApproval, answeredApprovalView, answeredBy } from './answered-approval.ts';
import { diffSha } from '../reconcile/diff-config-map.ts';
import { forgetRun } from './forget-run.ts';
import { InvalidGitTokenError } from './errors/invalid-git-token-error.ts';
import { cloneRepository, gitEnvironment, isCloneFailure, PACK_SLACK_BYTES } from './git-clone.ts';
import { readGitToken } from './git-token.ts';
import { handOn } from './hand-on.ts';
import { CancelRequestedError } from './errors/cancel-requested-error.ts';
import { liveRun, runToActOn, runToActOnOf, throwIfPutOff } from './live-run.ts';
import { commitDiff, lookUpRemote, pushBranch, type PublishClone } from './publish-git.ts';
import { runRefOf } from './run-ref.ts';
import { saveOrLetGo, type LetGo } from './save-if-present.ts';
import { observeFinished } from './run-metrics.ts';
import type { RunState } from './run-state.ts';
import { progressOf, PUBLISH_APPROVAL_ID, showPublishWait } from './publish-wait.ts';
import { finishedResult } from './verify-work.ts';
import { protectedChangeIn } from './protected-change-check.ts';
import { protectedChangePublishRefusal, unreadDiffPublishRefusal } from './protected-paths-changed.ts';

/** The operator's publish settings, as the workers get them. */
export interface PublishPolicy {
  author: { name: string; email: string };
  forges: readonly ForgeEntry[];
  /** Injected for tests; default the global fetch. */
  fetch?: typeof fetch;
}

export const DEFAULT_PUBLISH_POLICY: PublishPolicy = {
  author: { name: 'chamvi-operator', email: 'chamvi-operator@users.noreply.chamvi.dev' },
  forges: [],
};

const publishFailed = (detail: string) => new RunFailure(REASONS.PublishFailed, `Publishing failed: ${detail}`);
/** A run ended (its stop deleted the state) before a publish approval was shown: no human is asked. */
const ENDED_BEFORE_WAIT: LetGo = { why: 'the run ended before its publish approval was shown: nothing is published and the run is let go' };
/** A run ended (its stop deleted the state) before it was handed to the publish job: nothing is pushed. */
const ENDED_BEFORE_PUBLISH: LetGo = {
  why: 'the run ended before it was handed to the publish job: nothing is published and the run is let go',
};

/**
 * The publish plan, its body made for `forge` (the kind the repository's host is, when known):
 * GitHub and Gitea get the author's body as written, GitLab (or a forge not known) without
 * quick actions. Planned at finalize from the spec's URL and at publish from the checked one: a
 * host that changed kind in between (publish.forges edited) gives another body, whose sha256
 * is then not the approved one, and the run fails PublishFailed.
 */
function planFor(
  run: ParsedCodingRun,
  state: RunState,
  summary: string,
  diff: Pick<KeptDiff, 'filesChanged' | 'insertions' | 'deletions'>,
  forge: ForgeKind | undefined,
) {
  return planPublish({
    forge,
    namespace: run.metadata.namespace,
    name: run.metadata.name,
    uid: run.metadata.uid,
    task: run.spec.task,
    publish: run.spec.publish!,
    summary,
    ...diff,
    steps: state.step,
    totalTokens: state.usage.totalTokens ?? 0,
  });
}

/**
 * Throws PublishFailed when the diff changes spec.verify.protect paths (or git cannot read it to
 * tell): they are restored before each check and shown to the approver as unchanged
 * (docs/verify.md), so such a change was never graded. The finalize job fails such a run
 * already; checked again at each entry, since the publish job pushes the ConfigMap's diff.
 */
async function refuseProtectedChange(deps: AgentDependencies, run: ParsedCodingRun, diff: string): Promise<void> {
  const change = await protectedChangeIn(deps, run, diff, false);
  if (!change) return;
  throw publishFailed('failed' in change ? unreadDiffPublishRefusal(change.failed) : protectedChangePublishRefusal(change.paths));
}

/**
 * For the finalize job of a Succeeded run: whether publishing takes the run from here (true), or
 * there is nothing to publish (false: no spec.publish, or no change). Throws PublishFailed when
 * the change cannot be published whole and exactly (cut at 1 MiB, or not UTF-8 text), or changes
 * spec.verify.protect paths.
 */
export async function startPublish(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  kept: KeptDiff,
  summary: string,
): Promise<boolean> {
  if (!run.spec.publish || kept.diff === '') return false;
  if (kept.truncated)
    throw publishFailed(
      'the change is larger than the 1 MiB the operator keeps, so it is not known whole and was not pushed; split the task into smaller runs',
    );
  if (kept.notUtf8) throw publishFailed(notUtf8DiffMessage('it cannot push the change exactly and pushed nothing'));
  if (!kept.configMap) throw publishFailed(`the full diff could not be kept (${kept.notStored ?? 'no ConfigMap'}), so nothing was pushed`);
  await refuseProtectedChange(deps, run, kept.diff);
  const result = finishedResult(kept, summary, state);
  // Planned from the summary as status keeps it (cut at 16 KiB) and from the diff's counts as
  // the operator counts them, as the publish job plans: the body the approver is shown is the
  // body posted, which that job checks by its sha256. Counted again here, from the text: the
  // approved body must not rest on every maker of a KeptDiff having counted it so.
  const counted: KeptDiff = { ...kept, ...countDiff(kept.diff) };
  const parts = repositoryUrlParts(run.spec.repository.url);
  const policy = deps.publishPolicy ?? DEFAULT_PUBLISH_POLICY;
  const plan = planFor(run, state, result.summary, counted, parts && forgeFor(parts, policy.forges)?.kind);
  if (!plan.ok) throw publishFailed(plan.message);
  const sha256 = diffSha(kept.diff);
  const body = plan.plan.pullRequest?.body;
  state.publish = { diffSha256: sha256, ...(body !== undefined ? { bodySha256: bodySha256(body) } : {}) };
  const ref = runRefOf(run);
  if (run.spec.approval.publish) {
    state.stage = 'waiting';
    state.pendingApproval = {
      id: PUBLISH_APPROVAL_ID,
      toolCallId: PUBLISH_APPROVAL_ID,
      toolName: PUBLISH_APPROVAL_ID,
      input: publishApprovalInput(run, plan.plan, counted, sha256),
      requestedAt: deps.now().toISOString(),
      results: [],
      remaining: [],
    };
    if (!(await saveOrLetGo(deps, ref, state, ENDED_BEFORE_WAIT))) return true;
    await showPublishWait(deps, run, state, result);
    return true;
  }
  // The diff in status while the push is under way: what is being published is visible.
  // Written before the state is saved: a finalize that fails in between is redone and
  // writes it again (the publish job's final write keeps it, its summary too).
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status) => {
    status.result = result;
    return status;
  });
  if (!outcome.written) return forgetRun(deps, ref).then(() => true);
  state.stage = 'publishing';
  if (!(await saveOrLetGo(deps, ref, state, ENDED_BEFORE_PUBLISH))) return true;
  await deps.queue.publish(ref);
  return true;
}

/**
 * For the resume job: a human (or the timeout) answered the publish approval; the digest was
 * checked already. The answer is recorded like a tool call's (answered-approval.ts): who gave
 * it, in status.approvals, in the transcript and in the Event. The status is written before
 * the state leaves 'waiting': a try that fails in between is redone whole by the job's retry,
 * which finds the approval still pending.
 */
export async function answerPublishApproval(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  answer: ApprovalAnswer,
): Promise<void> {
  const pending = state.pendingApproval!;
  const ref = runRefOf(run);
  const now = deps.now();
  const approval = answeredApproval(pending, answer, now);
  state.approvalWaitMs = (state.approvalWaitMs ?? 0) + Math.max(0, now.getTime() - Date.parse(pending.requestedAt));
  delete state.pendingApproval;
  const generation = run.metadata.generation ?? 0;
  await recordPublishAnswer(deps, run, state, approval);
  if (answer.decision === 'approve') {
    const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status) =>
      runningAfterStepStatus(recordAnsweredApproval(status, answeredApprovalView(approval)), progressOf(state), generation, now),
    );
    if (!outcome.written) return forgetRun(deps, ref);
    state.stage = 'publishing';
    // The run may have ended since the write above (a cancel's ending), its stop deleting the state.
    if (!(await saveOrLetGo(deps, ref, state, ENDED_BEFORE_PUBLISH))) return;
    await deps.events.record(outcome.run, {
      type: 'Normal',
      reason: EVENT_REASONS.Approved,
      message: `publishing approved${answeredBy(approval)}`,
    });
    await deps.queue.publish(ref);
    return;
  }
  const why = answer.reason?.trim() || 'no reason given';
  const message =
    `Finished in ${state.step} step(s); not published: publishing was denied (${why}). ` +
    `The diff is kept${run.status?.result?.diffConfigMap ? ` in ConfigMap ${run.status.result.diffConfigMap}` : ''}.`;
  // The run ends with this write, and its state is dropped after it: nothing is saved before.
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status) => {
    recordProgress(status, progressOf(state));
    recordAnsweredApproval(status, answeredApprovalView(approval));
    if (status.result) delete status.result.published;
    return finishStatus(status, 'Succeeded', REASONS.Completed, message, generation, now);
  });
  if (outcome.written) {
    await deps.events.record(outcome.run, {
      type: 'Normal',
      reason: EVENT_REASONS.PublishDenied,
      message: `publishing denied${answeredBy(approval)}: ${why}`,
    });
    await deps.events.record(outcome.run, { type: 'Normal', reason: REASONS.Completed, message });
    observeFinished(deps, outcome.run, 'Succeeded', REASONS.Completed);
  }
  await forgetRun(deps, ref);
}

/**
 * The publish answer's transcript entry, written before the status: a try that fails after it
 * is redone and writes the same entry again, harmlessly. Keyed like a resumed call's answer,
 * with call number 0, which no call's approval has (they count from 1). None past the
 * transcript's bounds, where its cut entry says answers are no longer recorded (status.approvals
 * and the Event still name the user). The record is worth less than the run: a refusal is only logged.
 */
async function recordPublishAnswer(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  approval: TranscriptApproval,
): Promise<void> {
  if (state.step > MAX_RECORDED_STEPS || (state.recordedApprovals ?? 0) >= MAX_RECORDED_APPROVALS) return;
  const entry: TranscriptEntry = {
    key: resumeKey(state.step, approval.id),
    kind: 'approval',
    step: state.step,
    at: deps.now().toISOString(),
    approval: approval.reason ? { ...approval, reason: boundText(approval.reason, 1024).text } : approval,
  };
  await deps.transcript.append(run, [entry]).catch((error: unknown) => {
    deps.logger.warn(
      { err: error instanceof Error ? error.message : String(error) },
      'could not record the publish answer in the transcript',
    );
  });
}

/** The publish job: push, open or update the pull request, end the run Succeeded with what was published. */
export async function runPublishJob(deps: AgentDependencies, ref: RunRef): Promise<void> {
  const state = await deps.states.load(ref);
  if (!state) throw new RunFailure(REASONS.StateLost, FAILURE_MESSAGES.stateGone);
  if (state.stage !== 'publishing' || !state.publish) {
    await handOn(deps, ref, state);
    return;
  }
  // A run with a cancel requested, or whose spec no longer parses, is not published, nor let
  // go: the controller ends it keeping its diff against the commit its state names, and the job
  // is put off meanwhile (live-run.ts runToActOn), before it reads the push token or clones with
  // it. Returned instead, the job was done with, so a cancel withdrawn then left the state in
  // `publishing` with no job, and the run ended Failed StateLost.
  const found = await runToActOn(deps, ref);
  throwIfPutOff(found, PUBLISH_HELD);
  if ('ended' in found) {
    await forgetRun(deps, ref);
    return;
  }
  const { run } = found;
  const done = await publish(deps, run, state, state.publish, () => stillPublishing(deps, ref));
  if ('stopped' in done) {
    // Stopped (a cancel, its deadline, its spec refused, its deletion) while this job ran: what
    // the forge already has is said in an Event; the rest is not done.
    const fresh = await (deps.getRunFresh ?? deps.getRun)(ref.namespace, ref.name);
    if (fresh && fresh.metadata.uid === ref.uid && done.pushed) {
      await deps.events.record(fresh, {
        type: 'Warning',
        reason: EVENT_REASONS.Published,
        message: `Pushed branch ${done.pushed} (no pull request opened): the run ${whyStopped(fresh)} while it was published`,
      });
    }
    deps.logger.info({ pushed: done.pushed ?? null }, 'publishing stopped: the run ended while it was published');
    // A run ended (finished, deleted, gone) is let go. One only asked to cancel, or whose spec
    // no longer parses, is not ended yet: the controller ends it, keeping its diff against the
    // commit its state names, and then stops its agent, state and all; the job is put off
    // meanwhile, as at its start, so that a cancel withdrawn lets its next try open the pull
    // request (the forge is looked at first: the branch pushed is found, not pushed twice).
    const afterwards = runToActOnOf(fresh, ref);
    if ('ended' in afterwards) {
      await forgetRun(deps, ref);
      return;
    }
    // A run that reads as wanted again had its cancel withdrawn since stillPublishing looked:
    // put off all the same, the next try goes on.
    if ('run' in afterwards) throw new CancelRequestedError(PUBLISH_HELD);
    throwIfPutOff(afterwards, PUBLISH_HELD);
    return;
  }
  const { published, kept, labelsNotAdded } = done;
  const now = deps.now();
  const where = published.pullRequest ? `pull request ${published.pullRequest.url}` : `branch ${published.branch}`;
  const unlabelled = labelsNotAdded ? ` Its labels were not added: ${labelsNotAdded}` : '';
  const message = `Finished in ${state.step} step(s): ${kept.filesChanged} file(s) changed; published as ${where} (commit ${published.commit.slice(0, 12)}).${unlabelled}`;
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status, current) => {
    recordProgress(status, progressOf(state));
    status.result = { ...(status.result ?? keptDiffResult(kept, '')), ...(state.revision ? { revision: state.revision } : {}), published };
    return finishStatus(status, 'Succeeded', REASONS.Completed, message, current.metadata.generation ?? 0, now);
  });
  if (outcome.written) {
    await deps.events.record(outcome.run, {
      type: 'Normal',
      reason: EVENT_REASONS.Published,
      message: `Published ${published.branch} as ${where}`,
    });
    if (labelsNotAdded)
      await deps.events.record(outcome.run, {
        type: 'Warning',
        reason: EVENT_REASONS.Published,
        message: `The labels of ${where} were not added: ${labelsNotAdded}`,
      });
    await deps.events.record(outcome.run, { type: 'Normal', reason: REASONS.Completed, message });
    observeFinished(deps, outcome.run, 'Succeeded', REASONS.Completed);
  } else if (outcome.run) {
    // Ended as the pull request was opened: its status is final, the Event says what exists.
    await deps.events.record(outcome.run, {
      type: 'Warning',
      reason: EVENT_REASONS.Published,
      message: `Published ${published.branch} as ${where}, but the run had ended ${outcome.run.status?.phase ?? ''} meanwhile`,
    });
  }
  await forgetRun(deps, ref);
}

const PUBLISH_HELD = 'push the branch or open the pull request';

/**
 * Why the run stopped being published, for the Event on a branch pushed without its pull
 * request, from a fresh copy of the same run: each check explicit, since a run being deleted
 * is neither finished nor cancelled and its spec still parses.
 */
function whyStopped(run: CodingRun): string {
  const phase = run.status?.phase;
  if (isTerminal(phase)) return `ended ${phase}`;
  if (run.metadata.deletionTimestamp) return 'was deleted';
  if (readCancelRequest(run)) return 'was cancelled';
  if (!parseSpec(run).ok) return 'had its spec refused by this operator';
  // stillPublishing saw a cancel that this read no longer shows.
  return 'had a cancel requested (since withdrawn)';
}

/**
 * Whether the run is still to be published: not ended, its spec still parsing, and no cancel
 * asked for. Read fresh before each step the forge keeps (the push, the pull request): the
 * controller ends a run that is cancelled, past its deadline or refused (InvalidSpec) without
 * waiting for this job, which it cannot stop.
 */
async function stillPublishing(deps: AgentDependencies, ref: RunRef): Promise<boolean> {
  const run = await liveRun({ getRun: deps.getRunFresh ?? deps.getRun }, ref);
  return run !== undefined && readCancelRequest(run) === undefined;
}

/**
 * What publish did: all of it (and, when the forge took the pull request but not its labels,
 * why), or (the run ended meanwhile) the branch it had pushed, if any.
 */
type PublishDone = { published: Published; kept: KeptDiff; labelsNotAdded?: string } | { stopped: true; pushed?: string };

async function publish(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  approved: NonNullable<RunState['publish']>,
  stillWanted: () => Promise<boolean>,
): Promise<PublishDone> {
  const policy = deps.publishPolicy ?? DEFAULT_PUBLISH_POLICY;
  const { spec } = run;
  // Security #11.2: checked again now (the namespace's list too: an approval may have waited
  // for days), and git gets the checked string.
  const repository = await repositoryAllowedNow(deps, run.metadata.namespace, spec.repository.url);
  if (!repository.allowed) throw publishFailed(repository.message);
  const parts = repositoryUrlParts(repository.url)!;
  const secretRef = spec.publish!.credentialsSecretRef ?? spec.repository.credentialsSecretRef;
  if (!secretRef) throw publishFailed('no token: set spec.publish.credentialsSecretRef to a Secret holding one that may push');
  const field = spec.publish!.credentialsSecretRef ? 'spec.publish.credentialsSecretRef' : 'spec.repository.credentialsSecretRef';
  // A key that holds no token fails PublishFailed, as every publishing failure does, naming the key and never its value.
  const token = await readGitToken(deps.resources, run.metadata.namespace, { ...secretRef, field }).catch((error: unknown) => {
    throw InvalidGitTokenError.isInstance(error) ? publishFailed(error.message) : error;
  });
  if (!token) throw publishFailed(`Secret ${secretRef.name} has no key ${secretRef.key} (or is gone); put the push token there`);
  if (!state.revision) throw publishFailed('the run recorded no starting commit to publish on');
  // The run's full diff as kept, and only the one approved (or taken at finalize): a ConfigMap
  // changed since by anyone who may write ConfigMaps in the namespace is not pushed.
  const stored = await deps.resources.readDiff(run);
  if (!stored || diffSha(stored.diff) !== approved.diffSha256) {
    throw publishFailed(
      "the run's diff ConfigMap is gone or changed since the run ended, so what would be pushed is not what the run made (or what was approved)",
    );
  }
  const kept = storedKeptDiff(stored);
  // Before the clone: the diff as it would be committed, not only as finalize judged it.
  await refuseProtectedChange(deps, run, stored.diff);
  const planned = planFor(run, state, run.status?.result?.summary ?? state.finalText ?? '', kept, forgeFor(parts, policy.forges)?.kind);
  if (!planned.ok) throw publishFailed(planned.message);
  const plan = planned.plan;
  // The body as planned when the run ended (what an approver approved) or none: planned again
  // here from the run's status, which anyone who may write it can change meanwhile.
  const body = plan.pullRequest?.body;
  if (approved.bodySha256 !== undefined && (body === undefined || bodySha256(body) !== approved.bodySha256)) {
    throw publishFailed(
      "the pull request's body planned now is not the one planned when the run ended (what an approver approved: its sha256 is not bodySha256), " +
        'so nothing was pushed (status.result.summary was changed since, or an operator upgrade renders the body otherwise); ' +
        'create the run again to publish the change',
    );
  }
  let dir: string;
  try {
    dir = await cloneRepository({
      url: repository.url,
      revision: state.revision,
      token,
      maxCheckoutBytes: deps.clonePolicy.maxCheckoutBytes,
      maxCheckoutFiles: deps.clonePolicy.maxCheckoutFiles,
      maxGitMemoryBytes: deps.clonePolicy.maxGitMemoryBytes,
      launch: deps.launch,
    });
  } catch (error) {
    if (isCloneFailure(error)) throw publishFailed(error.message);
    throw error;
  }
  try {
    const clone: PublishClone = {
      dir,
      env: await gitEnvironment(parts, token, dirname(dir)),
      token,
      launch: deps.launch,
      maxFetchBytes: deps.clonePolicy.maxCheckoutBytes + PACK_SLACK_BYTES,
      maxGitMemoryBytes: deps.clonePolicy.maxGitMemoryBytes,
    };
    const commit = await commitDiff(clone, {
      diff: stored.diff,
      message: plan.commitMessage,
      author: policy.author,
      date: run.metadata.creationTimestamp ?? new Date(state.startedAt).toISOString(),
    });
    const remote = await lookUpRemote(clone, plan.branch, commit, spec.repository.revision);
    // Against the ref the clone took, when the state recorded it: a ref that takes the name since is refused.
    const baseDecision = pullRequestBase(plan, spec.repository.revision, remote.revisionRef, state.revisionRef);
    if (!baseDecision.ok) throw publishFailed(baseDecision.message);
    const namedBase = baseDecision.base;
    const location = forgeFor(parts, policy.forges);
    const forge = location
      ? createForge(location.kind, {
          apiURL: location.apiURL,
          repository: location.repository,
          token,
          ...(policy.fetch ? { fetch: policy.fetch } : {}),
        })
      : undefined;
    // The remote's HEAD, read in the lookup above, is the default branch; the forge is asked
    // only when git did not say, and before the push: the default branch is never moved,
    // whichever way it was learnt, and when neither can tell, no existing branch is.
    const defaultBranch = remote.defaultBranch ?? (forge ? await forge.defaultBranch() : undefined);
    const push = decidePush({
      branch: plan.branch,
      commit,
      run: `${run.metadata.namespace}/${run.metadata.name}`,
      uid: run.metadata.uid,
      remote: remote.branch,
      // The revision as named too, whatever it names (a tag's name may be a branch's as well):
      // protecting one too many only refuses a move.
      protectedBranches: [defaultBranch, namedBase, spec.repository.revision].filter((branch) => branch !== undefined),
      defaultBranchUnknown: defaultBranch === undefined,
    });
    if (push.action === 'refuse') throw publishFailed(push.message);
    if (push.action !== 'none' && !(await stillWanted())) return { stopped: true };
    if (push.action === 'create') await pushBranch(clone, commit, plan.branch);
    if (push.action === 'move') await pushBranch(clone, commit, plan.branch, push.from);
    deps.logger.info({ branch: plan.branch, commit, push: push.action }, 'published branch');
    const published: Published = { branch: plan.branch, commit };
    if (!plan.pullRequest) return { published, kept };
    if (!forge) {
      throw publishFailed(
        `branch ${plan.branch} was pushed, but no forge API is known for ${parts.host}${parts.port ? `:${parts.port}` : ''}, so no pull request was opened; ` +
          'ask an admin to add it to the operator config publish.forges (kind github, gitlab or gitea)',
      );
    }
    // With a forge, the default branch is known by now: git said it, or the forge did above.
    const base = namedBase ?? defaultBranch!;
    const wanted = { title: plan.pullRequest.title, body: plan.pullRequest.body, draft: plan.pullRequest.draft };
    const existing = await forge.findOpenPullRequest(plan.branch, base);
    const decision = decidePullRequest(existing, wanted);
    if (decision.action !== 'keep' && !(await stillWanted())) return { stopped: true, pushed: plan.branch };
    const pullRequest: CreatedPullRequest =
      decision.action === 'keep'
        ? decision.pullRequest
        : decision.action === 'update'
          ? await forge.updatePullRequest(decision.number, wanted)
          : await forge.createPullRequest({ ...wanted, branch: plan.branch, base, labels: plan.pullRequest.labels });
    deps.logger.info({ branch: plan.branch, pullRequest: pullRequest.url, action: decision.action }, 'published pull request');
    return {
      published: { ...published, pullRequest: { url: pullRequest.url, number: pullRequest.number } },
      kept,
      ...(pullRequest.labelsNotAdded ? { labelsNotAdded: pullRequest.labelsNotAdded } : {}),
    };
  } catch (error) {
    if (ForgeError.isInstance(error)) throw publishFailed(`the forge answered: ${error.message}`);
    throw error;
  } finally {
    await rm(dirname(dir), { recursive: true, force: true });
  }
}
