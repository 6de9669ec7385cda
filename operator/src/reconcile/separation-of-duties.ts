// Separation of duties (#15.5, config.approvalSeparationOfDuties): whoever wrote a run's task
// may not answer its approvals. The chart's approval policy refuses such an answer when it is
// written, but it judges the run as stored then: a run made from a template (spec.templateRef)
// names the template's writer only once the operator has accepted it (status.template.writtenBy),
// and an answer written before that, or while no policy was enforced, passed. So the operator
// asks again when it is about to act on an answer, with everything the run records by then.
// A run that continues another (spec.continueFrom) starts from that run's task, final message
// and diff, so whoever wrote those (status.continuedFrom.writtenBy, continue-from-pin.ts) wrote
// this run's task as much as a template's writer, and is refused alike; while that record is
// missing, every answer is. `run` is the run with its effective spec (its template's fields).
// Names alone do not separate people: whoever may create pods in a namespace (Kubernetes `edit`,
// which run authors often hold) may run one as any ServiceAccount of it, so an answer from one of that namespace's
// ServiceAccounts may be the run's author speaking through it, and is refused too (the chart's
// policy refuses it alike: approval-policy.yaml). Pure.
import type { CodingRun } from '../api/index.ts';
import { APPROVER_ANNOTATION, CREATOR_ANNOTATION, TEMPLATE_WRITER_ANNOTATION, type ApprovalAnswer } from './approval-answer.ts';
import { cutUserName, quotedUserName, USER_NAME_MAX, userNameLength, userNameTooLong } from './user-name.ts';

/** Why `answer` may not act on `run` under separation of duties, or undefined when it may. */
export function separationOfDutiesRefusal(run: CodingRun, answer: ApprovalAnswer): string | undefined {
  const { user } = answer;
  if (!user)
    return (
      `Ignored the answer to approval ${answer.id}: it names no approver (annotation chamvi.dev/approver), and with separation of ` +
      "duties on, an answer must show it is not from the run's creator or its template's or source run's writer; answer with kubectl codingrun approve|deny"
    );
  // The records hold names cut to USER_NAME_MAX code points, and a longer name, cut, could be
  // a writer's or match nobody's: it is refused outright, as the chart's policy refuses it.
  const written = run.metadata.annotations?.[APPROVER_ANNOTATION] ?? user;
  if (userNameTooLong(written))
    return (
      `Ignored the answer to approval ${answer.id} by "${quotedUserName(user)}...": separation of duties is on, and ` +
      `the name is ${userNameLength(written)} characters long, over the ${USER_NAME_MAX} the operator records of the writers who may ` +
      'not answer, so it cannot tell whether this is one of them; answer as a user with a shorter name'
    );
  // Cut as the records are (a creator annotation is kept whole on the run), so the two compare alike.
  const named = (value: string | undefined) => value !== undefined && cutUserName(value) === user;
  const { namespace } = run.metadata;
  if (user.startsWith(serviceAccountPrefix(namespace)))
    return (
      `Ignored the answer to approval ${answer.id} by "${user}": separation of duties is on, and a ServiceAccount of the run's own ` +
      `namespace ${namespace} can be acted as by whoever may create pods there (Kubernetes edit), this run's creator too; approve as a person with ` +
      'ClusterRole chamvi-approver, or from a ServiceAccount of another namespace (docs/approvals.md)'
    );
  const annotations = run.metadata.annotations ?? {};
  if (named(annotations[CREATOR_ANNOTATION]))
    return `Ignored the answer to approval ${answer.id} by "${user}": separation of duties is on, and "${user}" created this run; ask another approver`;
  if (named(annotations[TEMPLATE_WRITER_ANNOTATION]) || named(run.status?.template?.writtenBy))
    return (
      `Ignored the answer to approval ${answer.id} by "${user}": separation of duties is on, and "${user}" wrote the CodingRunTemplate ` +
      'this run was made from; ask another approver'
    );
  const continued = run.status?.continuedFrom;
  // Who wrote the source is not recorded (a run accepted without the pin whose source is gone
  // now): any answer might be theirs, and none is acted on, as the chart's policy refuses them.
  const source = run.spec.continueFrom?.name;
  if (source && !continued)
    return (
      `Ignored the answer to approval ${answer.id} by "${user}": separation of duties is on, and this run continues CodingRun ` +
      `${source} (spec.continueFrom), whose writers the operator has not recorded (status.continuedFrom), and they may not answer; ` +
      'no answer is acted on until it has'
    );
  if (continued?.writtenBy?.some(named))
    return (
      `Ignored the answer to approval ${answer.id} by "${user}": separation of duties is on, and "${user}" wrote the task of ` +
      `CodingRun ${continued.name} this run continues from (spec.continueFrom), or of a run that one continued from; ask another approver`
    );
  return undefined;
}

/** How the API server names every ServiceAccount of `namespace` (request.userInfo.username). */
function serviceAccountPrefix(namespace: string): string {
  return `system:serviceaccount:${namespace}:`;
}
