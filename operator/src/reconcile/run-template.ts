// spec.templateRef (#15.3): a CodingRun that names a CodingRunTemplate. Its effective spec is
// the template's spec with the run's own fields laid over it, by the schedule's merge
// (merge-run-spec.ts), and it is parsed and validated like a plain run's spec from there on.
//
// The template is read once, while the run is being accepted, and copied into
// status.template in the same status write that accepts it. From then on every reader (the
// reconciler, the workers, the egress proxy) merges with that copy, never with the template
// as it is now: a run runs what it was accepted with, and editing or deleting the template
// changes only runs created later. status is written by the operator only (the chart grants
// codingruns/status to no user role), like the Accepted condition that vouches for the copy.
// Pure.
import { isTerminal, REASONS, type CodingRun, type CodingRunSpecInput, type Reason } from '../api/index.ts';
import type { CodingRunTemplate } from '../api/coding-run-template.ts';
import { CREATOR_ANNOTATION } from './approval-answer.ts';
import { findCondition } from './conditions.ts';
import { mergeRunSpec } from './merge-run-spec.ts';
import { cutUserName } from './user-name.ts';

export type EffectiveSpecInput =
  { ok: true; spec: CodingRunSpecInput; template?: string } | { ok: false; refusal: { reason: Reason; message: string } };

const isAccepted = (run: CodingRun) => findCondition(run.status?.conditions, 'Accepted')?.status === 'True';

/** The name of the template to read for the run: only while it is being accepted and none is recorded yet. */
export function templateToRead(run: CodingRun): string | undefined {
  const name = run.spec.templateRef?.name;
  if (name === undefined || run.status?.template !== undefined || isAccepted(run)) return undefined;
  if (run.metadata.deletionTimestamp || isTerminal(run.status?.phase)) return undefined;
  return name;
}

/**
 * Whether this copy of a run is from before the write that accepted it, and so cannot give the
 * spec it runs: it names a template but holds none, and is not accepted yet. A run has jobs
 * only once the controller has accepted it, but a run given a warm pool pod is accepted in the
 * write made after its agent is queued: its first job may read it before (workers/live-run.ts).
 */
export function awaitsAcceptance(run: CodingRun): boolean {
  return run.spec.templateRef !== undefined && run.status?.template === undefined && !isAccepted(run) && !isTerminal(run.status?.phase);
}

/**
 * The run with the template it names recorded in its (in-memory) status, for decide() to
 * accept or refuse it with and write. `template` is what the API server returned for the
 * name templateToRead gave (undefined: not found); a run that needs none is returned as is.
 */
export function withTemplate(run: CodingRun, template: CodingRunTemplate | undefined): CodingRun {
  const name = templateToRead(run);
  if (name === undefined || template === undefined || template.metadata.name !== name) return run;
  const { uid, resourceVersion } = template.metadata;
  // Its writer, as the run-owners policy makes the template name them: the approval policy
  // refuses their answers (separation of duties), reading this copy, which only the operator writes.
  // Cut at code points, as the approver's name is read (user-name.ts).
  const creator = template.metadata.annotations?.[CREATOR_ANNOTATION];
  const writtenBy = creator === undefined ? undefined : cutUserName(creator);
  const recorded = {
    name,
    ...(uid ? { uid } : {}),
    ...(resourceVersion ? { resourceVersion } : {}),
    ...(writtenBy ? { writtenBy } : {}),
    spec: structuredClone(template.spec) as Record<string, unknown>,
  };
  return { ...run, status: { ...run.status, template: recorded } };
}

/** The spec the run runs, before defaults: its own spec, or its recorded template with its own fields laid over it. */
export function effectiveSpecInput(run: CodingRun): EffectiveSpecInput {
  const { templateRef, ...own } = run.spec;
  if (templateRef === undefined) return { ok: true, spec: run.spec };
  const recorded = run.status?.template;
  const namespace = run.metadata.namespace;
  if (recorded === undefined || recorded.name !== templateRef.name) {
    if (isAccepted(run)) {
      return {
        ok: false,
        refusal: {
          reason: REASONS.InvalidSpec,
          message:
            `status.template no longer holds the CodingRunTemplate ${templateRef.name} the run was accepted with ` +
            '(it is written by the operator only); create the run again',
        },
      };
    }
    return {
      ok: false,
      refusal: {
        reason: REASONS.TemplateNotFound,
        message:
          `CodingRunTemplate ${namespace}/${templateRef.name} named in spec.templateRef does not exist: create it in the run's ` +
          `namespace (kubectl get crt -n ${namespace} lists those there) and create the run again, or name another template`,
      },
    };
  }
  return {
    ok: true,
    spec: mergeRunSpec(recorded.spec, own as Record<string, unknown>) as CodingRunSpecInput,
    template: `${templateRef.name}${recorded.resourceVersion ? ` (resourceVersion ${recorded.resourceVersion})` : ''}`,
  };
}
