// `kubectl codingrun eval report`: the command line, the table and the HTML file, from an eval's
// status. The HTML is checked for what it must never hold (a script, a fetched URL, unescaped
// text from the eval's author or the runs); how it renders is test/e2e/evals.test.ts's, in Chromium.
import { describe, expect, it } from 'vitest';
import type { CodingEval } from '../../operator/src/api/coding-eval.ts';
import { evalReport } from '../../operator/src/cli/eval/eval-report-data.ts';
import { evalReportHtml, rateColor } from '../../operator/src/cli/eval/eval-report-html.ts';
import { evalReportLines } from '../../operator/src/cli/eval/eval-report-table.ts';
import { graderLabel } from '../../operator/src/evals/graders.ts';
import { printEvalReport } from '../../operator/src/cli/eval/print-eval-report.ts';
import type { RunClient } from '../../operator/src/cli/run-client.ts';
import { parseArguments } from '../../operator/src/cli/parse-arguments.ts';

const HOSTILE = '<img src=x onerror=alert(1)>';

const evaluation: CodingEval = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingEval',
  metadata: { name: 'cmp', namespace: 'team', uid: 'u' },
  spec: {
    tasks: [{ name: 'fix', task: 't', repository: { url: 'https://x/r.git' }, graders: [{ type: 'verify' }] }],
    models: [
      { name: 'good', model: { provider: 'scripted', scriptRef: { name: 'g' } } },
      { name: 'bad', model: { provider: 'scripted', scriptRef: { name: 'b' } } },
    ],
  },
  status: {
    phase: 'Complete',
    planned: 4,
    graded: 4,
    passes: 2,
    results: [
      {
        task: 'fix',
        model: 'good',
        attempts: 2,
        passes: 2,
        passRate: 1,
        passAtK: [{ k: 1, value: 1 }],
        tokens: { mean: 2500, p50: 2000, p90: 3000 },
        durationSeconds: { mean: 4, p50: 4, p90: 5 },
        failures: [],
      },
      {
        task: 'fix',
        model: 'bad',
        attempts: 2,
        passes: 0,
        passRate: 0,
        passAtK: [{ k: 1, value: 0 }],
        tokens: { mean: 1200, p50: 1200, p90: 1300 },
        durationSeconds: { mean: 3, p50: 3, p90: 3 },
        failures: [{ reason: `grader:${HOSTILE}`, count: 2 }],
      },
    ],
    attempts: [
      {
        run: 'r1',
        task: 'fix',
        model: 'bad',
        attempt: 1,
        phase: 'Succeeded',
        passed: false,
        failure: `grader:${HOSTILE}`,
        totalTokens: 1200,
        durationSeconds: 3,
      },
    ],
  },
};

describe('eval report', () => {
  it('parses eval report NAME with -o json and --html', () => {
    expect(parseArguments(['eval', 'report', 'cmp', '-n', 'team', '-o', 'json', '--html', 'r.html'])).toEqual({
      command: 'eval',
      action: 'report',
      name: 'cmp',
      namespace: 'team',
      output: 'json',
      html: 'r.html',
    });
    expect(() => parseArguments(['eval', 'cmp'])).toThrow(/eval needs a subcommand: report NAME/);
    expect(() => parseArguments(['eval', 'report'])).toThrow(/needs the name of a CodingEval/);
  });

  it('prints one line per task × model and one per model', () => {
    const lines = evalReportLines(evalReport(evaluation));
    expect(lines[0]).toBe('codingeval/cmp Complete: 4/4 attempts graded, 2 passed');
    expect(lines).toContainEqual(expect.stringMatching(/^fix\s+good\s+2\/2\s+100%\s+1\.00\s+2\.5k\/2k\/3k\s+4\.0$/));
    expect(lines).toContainEqual(expect.stringMatching(/^bad\s+0\/2\s+0%\s+1\.2k\s+3$/));
  });

  it("prints a grader's name or text that holds a newline on its one line, escaped, so it cannot forge a line of the report", () => {
    // A grader's name is any 1–63 characters; without one, its text (up to 40 shown) is its label.
    const forged = 'x\n  r9: Succeeded (all graders passed)';
    const label = graderLabel({ type: 'answer-contains', text: 'DONE\r\n  r8: Succeeded\u001b[2K' });
    const hostile = structuredClone(evaluation);
    hostile.status!.results![1]!.failures = [{ reason: `grader:${forged}`, count: 2 }];
    hostile.status!.attempts![0]!.failure = `grader:${forged}`;
    hostile.status!.attempts![0]!.failedGraders = [`${forged}: the final answer does not contain the text`, `${label}: no`];
    const lines = evalReportLines(evalReport(hostile));

    for (const line of lines) expect(line).not.toMatch(/[\n\r\u001b]/);
    expect(lines).not.toContainEqual(expect.stringMatching(/^\s*r[89]: Succeeded/));
    expect(lines).toContainEqual(expect.stringMatching(/^fix\s+bad\s+.*grader:x\^J {2}r9: Succeeded \(all graders passed\)×2$/));
    expect(lines).toContain(
      '  r1: grader:x^J  r9: Succeeded (all graders passed) (x^J  r9: Succeeded (all graders passed): the final answer does not contain the text; ' +
        'answer-contains DONE^M^J  r8: Succeeded^[[2K: no)',
    );
  });

  it('writes one self-contained file: no script, nothing fetched, every text escaped', () => {
    const html = evalReportHtml(evalReport(evaluation), new Date('2026-11-30T00:00:00Z'));
    expect(html).not.toMatch(/<script|<link|https?:\/\/(?!www\.w3\.org)/);
    expect(html).not.toContain(HOSTILE);
    expect(html).toContain('&#60;img src=x onerror=alert(1)&#62;');
    expect(html).toMatch(/<circle class="model-point"[^>]*data-model="good" data-pass-rate="1"/);
    expect(html).toContain(`fill="${rateColor(0)}"`);
  });

  it('-o json writes no raw C1 control or bidi character from a grader or a run, and parses to the report', async () => {
    // A failure reason carries a grader's name: an 8-bit CSI clearing the screen, a bidi override.
    const hostile = structuredClone(evaluation);
    hostile.status!.attempts![0]!.failure = 'grader:\u009b2J\u009b1;1Hall passed\u202e\u2028\u007f';
    const lines: string[] = [];
    const client = { getEval: async () => hostile } as unknown as RunClient;
    const io = { out: (text: string) => lines.push(text), err: () => undefined, now: () => new Date() };
    await printEvalReport(client, io, 'team', { command: 'eval', action: 'report', name: 'cmp', output: 'json' });
    expect(lines.join('\n')).not.toMatch(/[\u007f-\u009f\p{Cf}\u2028\u2029]/u);
    expect(JSON.parse(lines.join('\n'))).toEqual(JSON.parse(JSON.stringify(evalReport(hostile))));
    expect(lines.join('\n')).toContain('grader:\\u009b2J');
  });

  it("averages a model's tokens and seconds over the attempts that ran, not those refused or foreign", () => {
    const mixed = structuredClone(evaluation);
    mixed.spec.tasks.push({ name: 'add', task: 't', repository: { url: 'https://x/r.git' }, graders: [{ type: 'verify' }] });
    // fix: 2 attempts, both ran. add: 4 attempts, 1 ran (3 refused by the API server). Over the
    // 3 that ran: (2 × 2500 + 8000) / 3 tokens, (2 × 4 + 10) / 3 seconds.
    mixed.status!.results!.push({
      ...mixed.status!.results![0]!,
      task: 'add',
      attempts: 4,
      passes: 1,
      passRate: 0.25,
      ran: 1,
      tokens: { mean: 8000, p50: 8000, p90: 8000 },
      durationSeconds: { mean: 10, p50: 10, p90: 10 },
      failures: [{ reason: 'RunRefused', count: 3 }],
    });
    mixed.status!.results![0]!.ran = 2;
    const good = evalReport(mixed).overview.find((model) => model.model === 'good')!;
    expect(good).toMatchObject({ attempts: 6, passes: 3, meanTokens: 4333.3, meanSeconds: 6 });
    // A status written before `ran` was counted: every attempt counts.
    expect(evalReport(evaluation).overview.find((model) => model.model === 'good')).toMatchObject({ meanTokens: 2500, meanSeconds: 4 });
  });

  it('reports a model none of whose attempts ran with zero tokens and seconds, in the table, the JSON and the HTML', () => {
    const refused = structuredClone(evaluation);
    refused.status!.results![1] = {
      ...refused.status!.results![1]!,
      ran: 0,
      tokens: { mean: 0, p50: 0, p90: 0 },
      durationSeconds: { mean: 0, p50: 0, p90: 0 },
      failures: [{ reason: 'RunRefused', count: 2 }],
    };
    const report = evalReport(refused);
    expect(report.overview.find((model) => model.model === 'bad')).toMatchObject({ attempts: 2, meanTokens: 0, meanSeconds: 0 });
    expect(evalReportLines(report)).toContainEqual(expect.stringMatching(/^bad\s+0\/2\s+0%\s+0\s+0$/));
    const html = evalReportHtml(report, new Date('2026-11-30T00:00:00Z'));
    expect(html).not.toMatch(/NaN|Infinity/);
    // Nothing that never ran sits on the tokens axis, where zero tokens would read as the cheapest.
    expect(html).not.toMatch(/class="cell-point"[^>]*data-model="bad"/);
    expect(html).not.toMatch(/class="model-point"[^>]*data-model="bad"/);
    expect(html).toMatch(/class="model-point"[^>]*data-model="good"/);
  });
});
