// decideEval: the eval's runs and graded attempts in, the runs to create and the whole status
// out. Plain data, an injected clock, no cluster.
import { describe, expect, it } from 'vitest';
import type { AttemptStatus, CodingEval } from '../../operator/src/api/coding-eval.ts';
import type { CodingRun } from '../../operator/src/api/coding-run.ts';
import { decideEval, hasEnded, refusedAttempt, refusedEval } from '../../operator/src/evals/decide-eval.ts';
import { attemptLabels, attemptRun, plannedAttempts } from '../../operator/src/evals/eval-matrix.ts';
import { parseEvalSpec } from '../../operator/src/evals/parse-eval.ts';

const NOW = new Date('2026-11-30T12:00:00Z');

const evaluation = (status?: CodingEval['status']): CodingEval => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingEval',
  metadata: { name: 'cmp', namespace: 'team', uid: 'uid-1', generation: 1 },
  spec: {
    tasks: [
      {
        name: 'fix',
        task: 'Fix the bug.',
        repository: { url: 'https://example.com/r.git' },
        tools: { allow: ['read_file', 'edit_file', 'bash'] },
        graders: [{ type: 'not-used-tool', tool: 'bash' }],
      },
    ],
    models: [
      { name: 'a', model: { provider: 'scripted', scriptRef: { name: 'a' } } },
      { name: 'b', model: { provider: 'scripted', scriptRef: { name: 'b' } } },
    ],
    attempts: 3,
    passAtK: [1, 2],
    parallelism: 2,
  },
  ...(status ? { status } : {}),
});

const spec = () => {
  const parsed = parseEvalSpec(evaluation());
  if (!parsed.ok) throw new Error(parsed.problem);
  return parsed.spec;
};

const runOf = (model: string, attempt: number, phase?: string): CodingRun => {
  const planned = plannedAttempts(spec()).find((p) => p.model.name === model && p.attempt === attempt)!;
  const manifest = attemptRun(evaluation(), spec(), planned);
  return {
    ...manifest,
    metadata: { ...manifest.metadata, uid: `run-${model}-${attempt}`, labels: attemptLabels(evaluation(), planned) },
    ...(phase ? { status: { phase } } : {}),
  } as unknown as CodingRun;
};

const attempt = (model: string, n: number, passed: boolean, tokens: number, failure?: string): AttemptStatus => ({
  run: `r-${model}-${n}`,
  task: 'fix',
  model,
  attempt: n,
  phase: failure && !failure.startsWith('grader:') ? 'Failed' : 'Succeeded',
  passed,
  ...(failure ? { failure } : {}),
  totalTokens: tokens,
  durationSeconds: 10 * n,
});

describe('decideEval', () => {
  it('creates the first runs up to parallelism, in task, model, attempt order', () => {
    const decision = decideEval(evaluation(), spec(), [], [], NOW);
    expect(decision.create.map((p) => `${p.model.name}/${p.attempt}`)).toEqual(['a/1', 'a/2']);
    expect(decision.status).toMatchObject({ phase: 'Running', planned: 6, created: 2, graded: 0, startTime: NOW.toISOString() });
    expect(decision.events.map((event) => event.reason)).toEqual(['RunsCreated']);
  });

  it('creates nothing while parallelism runs are active, and the next one as one finishes', () => {
    expect(decideEval(evaluation(), spec(), [runOf('a', 1, 'Running'), runOf('a', 2)], [], NOW).create).toEqual([]);
    const next = decideEval(
      evaluation(),
      spec(),
      [runOf('a', 1, 'Succeeded'), runOf('a', 2, 'Running')],
      [attempt('a', 1, true, 100)],
      NOW,
    );
    expect(next.create.map((p) => `${p.model.name}/${p.attempt}`)).toEqual(['a/3']);
  });

  it('counts an unlabelled run as nothing, and makes again a run deleted before it was graded', () => {
    const stray = { ...runOf('a', 1, 'Running'), metadata: { ...runOf('a', 1).metadata, labels: {} } } as CodingRun;
    expect(decideEval(evaluation(), spec(), [stray], [], NOW).create.map((p) => p.attempt)).toEqual([1, 2]);
  });

  it('creates nothing for an attempt whose run is being deleted, and counts that run as no longer active', () => {
    const going = runOf('a', 1, 'Running');
    going.metadata = { ...going.metadata, generation: 2, deletionTimestamp: NOW.toISOString() };
    const decision = decideEval(evaluation(), spec(), [going], [], NOW);
    expect(decision.create.map((p) => `${p.model.name}/${p.attempt}`)).toEqual(['a/2', 'a/3']);
    expect(decision.status.attempts).toEqual([]);
  });

  it('sums up per task × model: attempts, passes, pass rate, pass@k, tokens, duration, failures by reason', () => {
    const graded = [
      attempt('a', 1, true, 100),
      attempt('a', 2, false, 300, 'grader:not-used-tool bash'),
      attempt('a', 3, true, 200),
      attempt('b', 1, false, 1000, 'VerificationFailed'),
      attempt('b', 2, false, 900, 'VerificationFailed'),
      attempt('b', 3, false, 800, 'BudgetExceeded'),
    ];
    const runs = graded.map((a) => runOf(a.model, a.attempt, a.phase));
    const decision = decideEval(evaluation(), spec(), runs, graded, NOW);
    expect(decision.create).toEqual([]);
    expect(decision.status).toMatchObject({ phase: 'Complete', graded: 6, passes: 2, completionTime: NOW.toISOString() });
    expect(decision.status.results).toEqual([
      {
        task: 'fix',
        model: 'a',
        attempts: 3,
        passes: 2,
        passRate: 0.6667,
        passAtK: [
          { k: 1, value: 0.6667 },
          { k: 2, value: 1 },
        ],
        ran: 3,
        tokens: { mean: 200, p50: 200, p90: 300 },
        durationSeconds: { mean: 20, p50: 20, p90: 30 },
        failures: [{ reason: 'grader:not-used-tool bash', count: 1 }],
      },
      {
        task: 'fix',
        model: 'b',
        attempts: 3,
        passes: 0,
        passRate: 0,
        passAtK: [
          { k: 1, value: 0 },
          { k: 2, value: 0 },
        ],
        ran: 3,
        tokens: { mean: 900, p50: 900, p90: 1000 },
        durationSeconds: { mean: 20, p50: 20, p90: 30 },
        failures: [
          { reason: 'VerificationFailed', count: 2 },
          { reason: 'BudgetExceeded', count: 1 },
        ],
      },
    ]);
    expect(decision.events.map((event) => event.reason)).toEqual(['Complete']);
  });

  it('keeps an attempt graded before when its run is gone, and never grades one twice', () => {
    const previous = decideEval(evaluation(), spec(), [], [attempt('a', 1, true, 100)], NOW).status;
    const again = decideEval(evaluation(previous), spec(), [], [attempt('a', 1, false, 999, 'X')], NOW);
    expect(again.status.attempts).toEqual([attempt('a', 1, true, 100)]);
    expect(again.create.map((p) => `${p.model.name}/${p.attempt}`)).toEqual(['a/2', 'a/3']);
  });
});

describe('an attempt whose run the API server refuses', () => {
  it("counts as failed RunRefused with the API server's words, and the eval goes on", () => {
    const refused = refusedAttempt('cmp-fix-a-1-x', { task: 'fix', model: 'a', attempt: 1 }, 'denied by allowRepo');
    const decision = decideEval(evaluation(), spec(), [], [refused], NOW);
    expect(decision.status.results![0]).toMatchObject({ attempts: 1, passes: 0, failures: [{ reason: 'RunRefused', count: 1 }] });
    expect(decision.status.attempts![0]!.failedGraders).toEqual(['the API server refused the run: denied by allowRepo']);
    expect(decision.create.map((p) => `${p.model.name}/${p.attempt}`)).toEqual(['a/2', 'a/3']);
  });
});

describe('creates the API server forbids (403: a quota on codingruns, a webhook)', () => {
  const QUOTA = 'codingruns.chamvi.dev "cmp-fix-a-2-x" is forbidden: exceeded quota: runs, requested: count/codingruns.chamvi.dev=1';
  const cells = (decision: { create: Array<{ model: { name: string }; attempt: number }> }) =>
    decision.create.map((p) => `${p.model.name}/${p.attempt}`);

  it('counts only the runs made, says why the rest wait and what to change, with one Warning', () => {
    const first = decideEval(evaluation(), spec(), [], [], NOW);
    expect(cells(first)).toEqual(['a/1', 'a/2']);
    const after = decideEval(evaluation(), spec(), [], [], NOW, { created: first.create.slice(0, 1), forbidden: QUOTA });
    expect(cells(after)).toEqual(['a/1']);
    expect(after.status).toMatchObject({ phase: 'Running', created: 1 });
    expect(after.status.message).toBe(
      `0 of 6 attempts graded, 1 running; the API server forbids creating the next run: ${QUOTA}. Raise the namespace's ` +
        'quota on codingruns, or fix the policy that refused it, or lower spec.parallelism; the eval tries again every minute.',
    );
    expect(after.status.conditions).toEqual([
      expect.objectContaining({ type: 'Complete', status: 'False', reason: 'RunsForbidden', message: after.status.message }),
    ]);
    expect(after.events).toEqual([
      expect.objectContaining({ type: 'Normal', reason: 'RunsCreated', message: 'created 1 run(s): fix/a/1' }),
      { type: 'Warning', reason: 'RunsForbidden', message: after.status.message },
    ]);
  });

  it('warns once while the API server keeps forbidding, and says Running again once a run is made', () => {
    const waiting = decideEval(evaluation(), spec(), [], [], NOW, { created: [], forbidden: QUOTA });
    expect(waiting.status.created).toBe(0);
    expect(waiting.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'RunsForbidden' })]);
    const again = decideEval(evaluation(waiting.status), spec(), [], [], NOW, { created: [], forbidden: QUOTA });
    expect(again.status).toEqual(waiting.status);
    expect(again.events).toEqual([]);

    const planned = decideEval(evaluation(waiting.status), spec(), [], [], NOW);
    const made = decideEval(evaluation(waiting.status), spec(), [], [], NOW, { created: planned.create });
    expect(made.status.conditions![0]).toMatchObject({ status: 'False', reason: 'Running' });
    expect(made.status.message).toBe('0 of 6 attempts graded, 2 running');
  });
});

// The API server's or a webhook's words and a spec's keys reach the eval's status.message and its
// condition; kubectl describe, Argo CD and Flux print those as they are, so a newline forged a line.
describe("an eval's messages quoting someone else's words", () => {
  const FORGED = 'denied the request: no\n\u001b]0;owned\u0007\nStatus:\tComplete\n\u202e';
  const ESCAPED = 'denied the request: no^J^[]0;owned^G^JStatus:^IComplete^J<U+202E>';

  it("writes a 403's words on one line, hidden characters spelled out, in the message and the condition, and warns once", () => {
    const waiting = decideEval(evaluation(), spec(), [], [], NOW, { created: [], forbidden: FORGED });
    expect(waiting.status.message).toBe(
      `0 of 6 attempts graded, 0 running; the API server forbids creating the next run: ${ESCAPED}. Raise the namespace's ` +
        'quota on codingruns, or fix the policy that refused it, or lower spec.parallelism; the eval tries again every minute.',
    );
    expect(waiting.status.conditions![0]!.message).toBe(waiting.status.message);
    const again = decideEval(evaluation(waiting.status), spec(), [], [], NOW, { created: [], forbidden: FORGED });
    expect(again.status).toEqual(waiting.status);
    expect(again.events).toEqual([]);
  });

  it("keeps the operator's advice in the message however long the 403's words are once spelled out", () => {
    const waiting = decideEval(evaluation(), spec(), [], [], NOW, { created: [], forbidden: `denied: ${'\u{e0041}'.repeat(4000)}` });
    expect(waiting.status.message!.length).toBeLessThanOrEqual(4096);
    expect(waiting.status.message).toMatch(/the eval tries again every minute\.$/);
  });

  it("records a refused attempt's words on one line, hidden characters spelled out, within 160 characters", () => {
    const refused = refusedAttempt('cmp-fix-a-1-x', { task: 'fix', model: 'a', attempt: 1 }, `${FORGED}${'\u0085'.repeat(200)}`);
    expect(refused.failedGraders![0]).toMatch(
      /^the API server refused the run: denied the request: no\^J\^\[\]0;owned\^G\^JStatus:\^IComplete\^J<U\+202E>(<U\+0085>)+$/,
    );
    expect(refused.failedGraders![0]!.length).toBeLessThanOrEqual(160);
  });

  it("writes a refused spec's key on one line in the message and the condition, the advice kept", () => {
    const bad = evaluation();
    (bad.spec.tasks[0] as { sandbox?: object }).sandbox = { resources: { limits: { [`cpu\n\u001b[2J${'\u202e'.repeat(240)}`]: 'x' } } };
    const parsed = parseEvalSpec(bad);
    expect(parsed.ok).toBe(false);
    const refused = refusedEval(bad, (parsed as { problem: string }).problem, NOW);
    expect(refused.status.message).toMatch(/^the eval is invalid: spec\.tasks\.0\.sandbox\.resources\.limits\.cpu\^J\^\[\[2J(<U\+202E>)+/);
    expect(refused.status.message).toMatch(/Create a new eval with the spec corrected\.$/);
    expect(refused.status.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/u);
    expect(refused.status.conditions![0]!.message).toBe(refused.status.message);
  });
});

describe('refusing an eval the operator finds invalid', () => {
  it('says which grader names a tool the task does not allow, as a Failed status and one Warning', () => {
    const bad = evaluation();
    (bad.spec.tasks[0]!.graders as object[]).push({ type: 'used-tool', tool: 'write_file' });
    const parsed = parseEvalSpec(bad);
    expect(parsed).toEqual({
      ok: false,
      problem: expect.stringMatching(/tasks\[0\] \(fix\): a grader names a tool this task does not allow/) as string,
    });
    const decision = refusedEval(bad, (parsed as { problem: string }).problem, NOW);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'InvalidSpec' })]);
    expect(refusedEval({ ...bad, status: decision.status }, 'x', NOW).events).toEqual([]);
  });

  it('keeps the counts, figures and attempts of one refused while running, and says they are kept', () => {
    const running = decideEval(
      evaluation(),
      spec(),
      [runOf('a', 2)],
      [attempt('a', 1, true, 100), attempt('b', 1, false, 900)],
      NOW,
    ).status;
    expect(running).toMatchObject({ phase: 'Running', graded: 2 });
    const refused = refusedEval(evaluation(running), 'spec.tasks.0.graders.0.path: write test, not test/', NOW).status;
    expect(refused).toMatchObject({
      phase: 'Failed',
      reason: 'InvalidSpec',
      planned: running.planned,
      created: running.created,
      graded: 2,
      passes: 1,
      startTime: running.startTime,
      completionTime: NOW.toISOString(),
    });
    expect(refused.attempts).toEqual(running.attempts);
    expect(refused.results).toEqual(running.results);
    expect(refused.message).toBe(
      'the eval is invalid: spec.tasks.0.graders.0.path: write test, not test/. The 2 attempt(s) graded before are kept ' +
        '(kubectl codingrun eval report cmp); runs already started finish (delete the eval to stop them). ' +
        'Create a new eval with the spec corrected.',
    );
    expect(refused.conditions).toEqual([expect.objectContaining({ type: 'Complete', status: 'True', reason: 'InvalidSpec' })]);
  });

  it('writes no attempts or figures for one refused before it graded any', () => {
    const refused = refusedEval(evaluation(), 'every passAtK k must be at most attempts', NOW).status;
    expect(refused.attempts).toBeUndefined();
    expect(refused.results).toBeUndefined();
    expect(refused.message).toBe(
      'the eval is invalid: every passAtK k must be at most attempts. Create a new eval with the spec corrected.',
    );
  });
});

describe('an eval that has ended', () => {
  it.each([
    [undefined, false],
    ['Running', false],
    ['Complete', true],
    ['Failed', true],
  ] as const)('with phase %s: ended %s', (phase, ended) => {
    expect(hasEnded(evaluation(phase ? { phase } : undefined))).toBe(ended);
  });
});

describe('the run of an attempt', () => {
  it('is an ordinary CodingRun controlled by the eval, labelled with its cell', () => {
    const planned = plannedAttempts(spec())[4]!;
    const run = attemptRun(evaluation(), spec(), planned);
    expect(run.metadata.name).toMatch(/^cmp-fix-b-2-[0-9a-f]{8}$/);
    expect(run.metadata.ownerReferences).toEqual([
      { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingEval', name: 'cmp', uid: 'uid-1', controller: true },
    ]);
    expect(run.metadata.labels).toMatchObject({ 'chamvi.dev/eval': 'cmp', 'chamvi.dev/eval-model': 'b', 'chamvi.dev/eval-attempt': '2' });
    expect(run.spec).toMatchObject({
      task: 'Fix the bug.',
      model: { provider: 'scripted', scriptRef: { name: 'b' } },
      tools: { allow: ['read_file', 'edit_file', 'bash'] },
    });
  });

  it("names the eval's recorded writer as its creator, and none when the eval names none", () => {
    const planned = plannedAttempts(spec())[0]!;
    const written = { ...evaluation(), metadata: { ...evaluation().metadata, annotations: { 'chamvi.dev/created-by': 'alice' } } };
    expect(attemptRun(written, spec(), planned).metadata).toMatchObject({ annotations: { 'chamvi.dev/created-by': 'alice' } });
    expect(attemptRun(evaluation(), spec(), planned).metadata).not.toHaveProperty('annotations');
  });

  it('has a name of its own for every cell, even where task and model names read the same joined', () => {
    // Task a-b with model c and task a with model b-c both read "cmp-a-b-c-1-…".
    const planned = (task: string, model: string) =>
      ({ task: { name: task }, model: { name: model }, attempt: 1 }) as unknown as Parameters<typeof attemptRun>[2];
    const one = attemptRun(evaluation(), spec(), planned('a-b', 'c')).metadata.name;
    const other = attemptRun(evaluation(), spec(), planned('a', 'b-c')).metadata.name;
    expect(one).toMatch(/^cmp-a-b-c-1-[0-9a-f]{8}$/);
    expect(other).toMatch(/^cmp-a-b-c-1-[0-9a-f]{8}$/);
    expect(one).not.toBe(other);
    // Every cell of an eval apart, and each the same on every reconcile.
    const names = plannedAttempts(spec()).map((cell) => attemptRun(evaluation(), spec(), cell).metadata.name);
    expect(new Set(names).size).toBe(names.length);
    expect(plannedAttempts(spec()).map((cell) => attemptRun(evaluation(), spec(), cell).metadata.name)).toEqual(names);
  });
});
