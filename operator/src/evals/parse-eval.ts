// The operator's own check of an eval's spec: the zod schema (defaults filled) and every
// cross-field rule's predicate, so an eval that reached the cluster without the CRD's CEL (a
// CRD installed without validation, or edited) is refused with the same message. Pure.
import { EVAL_LIMITS, codingEvalSpec, graderRules, taskRules, type CodingEval, type CodingEvalSpec } from '../api/coding-eval.ts';

export type ParsedEval = { ok: true; spec: CodingEvalSpec } | { ok: false; problem: string };

export function parseEvalSpec(evaluation: Pick<CodingEval, 'spec'>): ParsedEval {
  const parsed = codingEvalSpec.safeParse(evaluation.spec);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { ok: false, problem: `spec.${issue.path.join('.')}: ${issue.message}` };
  }
  const spec = parsed.data;
  for (const [index, task] of spec.tasks.entries()) {
    for (const rule of taskRules)
      if (!rule.holds(task)) return { ok: false, problem: `spec.tasks[${index}] (${task.name}): ${rule.message}` };
    for (const [graderIndex, grader] of task.graders.entries())
      for (const rule of graderRules)
        if (!rule.holds(grader)) return { ok: false, problem: `spec.tasks[${index}].graders[${graderIndex}]: ${rule.message}` };
  }
  const runs = spec.tasks.length * spec.models.length * spec.attempts;
  if (runs > EVAL_LIMITS.runs)
    return { ok: false, problem: `tasks × models × attempts is ${runs} runs, more than ${EVAL_LIMITS.runs}; split the eval` };
  if (spec.passAtK.some((k) => k > spec.attempts)) return { ok: false, problem: 'every passAtK k must be at most attempts' };
  for (const [what, names] of [
    ['task', spec.tasks.map((task) => task.name)],
    ['model', spec.models.map((model) => model.name)],
  ] as const)
    if (new Set(names).size !== names.length) return { ok: false, problem: `${what} names must be distinct` };
  return { ok: true, spec };
}
