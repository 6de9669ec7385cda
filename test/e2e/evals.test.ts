// CodingEval on the whole product: the operator process, real Redis, kwok pods running the real
// toolbox, scripted models. The eval's figures must equal what its runs did, worked out here
// from the runs themselves; deleting the eval deletes its runs (garbage collection by
// ownerReference, on the real kube-controller-manager); a grader naming a tool the task does
// not allow is refused by the API server at apply.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCATTER, rateColor } from '../../operator/src/cli/eval/eval-report-html.ts';
import { applyAdmissionPolicy } from '../support/admission-policy.ts';
import { kubectl, kubectlOk } from '../support/cluster.ts';
import { launchChromium } from '../support/headless-chromium.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, eventsOf } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';
import { runPlugin } from '../support/plugin.ts';

const NS = 'e2e-evals';

let root: string;
let repoUrl: string;
/** The figures of the 'coins' eval, once it completed, for the HTML report's test. */
let completed: EvalStatus | undefined;
let e2e: E2eOperator;

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});
const usage = (input: number, output: number) => ({ inputTokens: input, outputTokens: output });

// A coin the sandbox tosses: the same script passes some attempts and fails others, so the
// figures are about what the runs did, not about what the test expected.
const TOSS = {
  toolName: 'bash',
  input: { command: 'if [ $(( $(date +%N) / 1000 % 2 )) -eq 0 ]; then echo heads > coin.txt; else echo tails > coin.txt; fi' },
};
const LOOK = { toolName: 'read_file', input: { path: 'README.md' } };

const evalManifest = (name: string, over: object = {}) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingEval',
  metadata: { name },
  spec: {
    tasks: [
      {
        name: 'coin',
        task: 'Toss a coin into coin.txt; heads wins.',
        repository: { url: repoUrl },
        tools: { allow: ['read_file', 'bash'] },
        graders: [
          { type: 'file-contains', path: 'coin.txt', text: 'heads' },
          { type: 'max-turns', max: 3 },
        ],
      },
    ],
    models: [
      { name: 'tosser', model: { provider: 'scripted', scriptRef: { name: 'tosser' } } },
      { name: 'looper', model: { provider: 'scripted', scriptRef: { name: 'looper' } } },
    ],
    attempts: 4,
    passAtK: [1, 2],
    parallelism: 3,
    budget: { maxSteps: 3, timeout: '2m' },
    ...over,
  },
});

interface RunItem {
  metadata: { name: string; labels: Record<string, string>; ownerReferences?: Array<{ kind: string; uid: string; controller?: boolean }> };
  status?: { phase?: string; reason?: string; usage?: { totalTokens: number }; result?: { diff?: string } };
}
interface EvalStatus {
  phase?: string;
  planned?: number;
  graded?: number;
  passes?: number;
  results?: Array<{
    task: string;
    model: string;
    attempts: number;
    passes: number;
    passRate: number;
    passAtK: Array<{ k: number; value: number }>;
    tokens: { mean: number; p50: number; p90: number };
    failures: Array<{ reason: string; count: number }>;
  }>;
  attempts?: Array<{ run: string; passed: boolean; totalTokens: number; failure?: string }>;
}

async function runsOf(evalName: string): Promise<RunItem[]> {
  const listed = await kubectlOk(['get', 'crun', '-n', NS, '-l', `chamvi.dev/eval=${evalName}`, '-o', 'json']);
  return (JSON.parse(listed) as { items: RunItem[] }).items;
}

async function evalStatus(name: string): Promise<EvalStatus> {
  const result = await kubectl(['get', 'ceval', name, '-n', NS, '-o', 'jsonpath={.status}']);
  return result.stdout ? (JSON.parse(result.stdout) as EvalStatus) : {};
}

/** `hsl(h, s%, l%)` as the rgb a browser paints. */
function hslToRgb(color: string): number[] {
  const [h, s, l] = (/hsl\((\d+), (\d+)%, (\d+)%\)/.exec(color) ?? []).slice(1).map(Number) as [number, number, number];
  const a = (s / 100) * Math.min(l / 100, 1 - l / 100);
  const f = (n: number) => {
    const k = (n + h / 30) % 12;
    return Math.round(255 * (l / 100 - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [f(0), f(8), f(4)];
}

const choose = (n: number, k: number): number => (k < 0 || k > n ? 0 : k === 0 ? 1 : (choose(n - 1, k - 1) * n) / k);

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-evals-'));
  repoUrl = createBareRepository(root, { 'README.md': 'A coin.\n' });
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-evals',
    // The machine this runs on may be loaded: a minute and more before the caches sync is seen.
    syncTimeoutMs: 120_000,
    redisPrefix: `evals${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
  });
  await applyIn(NS, [
    script('tosser', [
      { toolCalls: [TOSS], usage: usage(1000, 50) },
      { text: 'Tossed.', usage: usage(1200, 10) },
    ]),
    // Never stops calling tools: spends its three steps and fails BudgetExceeded.
    script(
      'looper',
      [1, 2, 3, 4, 5].map(() => ({ toolCalls: [LOOK], usage: usage(500, 5) })),
    ),
  ]);
}, 120_000);

afterAll(async () => {
  await e2e?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('a CodingEval', () => {
  it('reports per task × model exactly what its runs did: counts, pass rate, pass@k, tokens, failures by reason', async () => {
    await applyIn(NS, [evalManifest('coins')]);
    let mostActive = 0;
    const status = await eventually(
      async () => {
        const active = (await runsOf('coins')).filter((run) => !['Succeeded', 'Failed', 'Cancelled'].includes(run.status?.phase ?? ''));
        mostActive = Math.max(mostActive, active.length);
        const current = await evalStatus('coins');
        return current.phase === 'Complete' ? current : undefined;
      },
      240_000,
      'the eval to complete',
    );
    completed = status;
    expect(mostActive).toBeLessThanOrEqual(3);
    const runs = await runsOf('coins');
    expect(runs).toHaveLength(8);
    expect(status).toMatchObject({ planned: 8, graded: 8 });

    // What each run did, read from the run: it passes when it Succeeded and its diff writes heads.
    const passedRun = (run: RunItem) => run.status?.phase === 'Succeeded' && /^\+heads$/m.test(run.status.result?.diff ?? '');
    for (const run of runs) {
      expect(run.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'CodingEval', controller: true })]);
      const attempt = status.attempts!.find((candidate) => candidate.run === run.metadata.name);
      expect(attempt, run.metadata.name).toMatchObject({ passed: passedRun(run), totalTokens: run.status!.usage!.totalTokens });
    }
    let totalPasses = 0;
    for (const model of ['tosser', 'looper']) {
      const cell = runs.filter((run) => run.metadata.labels['chamvi.dev/eval-model'] === model);
      const n = cell.length;
      const c = cell.filter(passedRun).length;
      totalPasses += c;
      const tokens = cell.map((run) => run.status!.usage!.totalTokens).sort((a, b) => a - b);
      const failures = new Map<string, number>();
      for (const run of cell.filter((candidate) => !passedRun(candidate))) {
        const reason = run.status?.phase === 'Succeeded' ? 'grader:file-contains coin.txt' : run.status!.reason!;
        failures.set(reason, (failures.get(reason) ?? 0) + 1);
      }
      const result = status.results!.find((candidate) => candidate.model === model)!;
      expect(result).toMatchObject({ task: 'coin', attempts: 4, passes: c });
      expect(result.passRate).toBeCloseTo(c / n, 4);
      expect(result.passAtK.map((entry) => entry.k)).toEqual([1, 2]);
      expect(result.passAtK[1]!.value).toBeCloseTo(1 - choose(n - c, 2) / choose(n, 2), 4);
      expect(result.tokens.mean).toBeCloseTo(tokens.reduce((sum, value) => sum + value, 0) / n, 2);
      expect(result.tokens.p50).toBe(tokens[1]);
      expect(result.tokens.p90).toBe(tokens[3]);
      expect(Object.fromEntries(result.failures.map((failure) => [failure.reason, failure.count]))).toEqual(Object.fromEntries(failures));
    }
    expect(status.passes).toBe(totalPasses);
    // The looper never stops: every one of its runs ran out of steps.
    expect(status.results!.find((result) => result.model === 'looper')!.failures).toEqual([{ reason: 'BudgetExceeded', count: 4 }]);
    // The plugin reports the same figures, as JSON for CI and as a table.
    const json = await runPlugin(['eval', 'report', 'coins', '-n', NS, '-o', 'json']);
    expect(json.code, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as { results: unknown }).results).toEqual(status.results);
    const text = await runPlugin(['eval', 'report', 'coins', '-n', NS]);
    expect(text.stdout).toMatch(/^coin\s+looper\s+0\/4\s+0%\s+0\.00\s+0\.00\s.*BudgetExceeded×4$/m);
    const printed = await kubectlOk(['get', 'ceval', 'coins', '-n', NS]);
    expect(printed).toMatch(new RegExp(`coins\\s+Complete\\s+8\\s+8\\s+${totalPasses}\\s`));
  }, 300_000);

  it('has an HTML report that headless Chromium renders with the right numbers: the scatter and the heat map', async () => {
    expect(completed, 'the first test completed the eval').toBeDefined();
    const file = join(root, 'coins.html');
    const written = await runPlugin(['eval', 'report', 'coins', '-n', NS, '--html', file]);
    expect(written.code, written.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).not.toMatch(/<script|https?:\/\//);
    const chromium = await launchChromium();
    try {
      const page = await chromium.browser.newPage({ viewport: { width: 1100, height: 1400 } });
      await page.goto(pathToFileURL(file).href);
      const byModel = (model: string) => completed!.results!.find((result) => result.model === model)!;
      // One large dot per model, where its pass rate and tokens put it: y from the pass rate, x from the tokens.
      const svg = (await page.locator('#scatter').boundingBox())!;
      const { height, top, bottom, left, right, width } = SCATTER;
      for (const model of ['tosser', 'looper']) {
        const point = page.locator(`#scatter circle.model-point[data-model="${model}"]`);
        const box = (await point.boundingBox())!;
        const rate = byModel(model).passRate;
        expect(Number(await point.getAttribute('data-pass-rate'))).toBeCloseTo(rate, 4);
        expect(Number(await point.getAttribute('data-tokens'))).toBeCloseTo(byModel(model).tokens.mean, 1);
        const centreY = box.y + box.height / 2 - svg.y;
        expect(centreY).toBeCloseTo(top + (1 - rate) * (height - top - bottom), 0);
        const centreX = box.x + box.width / 2 - svg.x;
        expect(centreX).toBeGreaterThan(left);
        expect(centreX).toBeLessThanOrEqual(width - right + 1);
      }
      // The looper spends fewer tokens per attempt: it sits left of the tosser.
      const x = async (model: string) => (await page.locator(`#scatter circle.model-point[data-model="${model}"]`).boundingBox())!.x;
      expect(Math.sign((await x('looper')) - (await x('tosser')))).toBe(
        Math.sign(byModel('looper').tokens.mean - byModel('tosser').tokens.mean),
      );
      // One heat map cell per task × model, its text the passed attempts and its colour the rate's.
      for (const model of ['tosser', 'looper']) {
        const result = byModel(model);
        const cell = page.locator(`#heatmap g.heat-cell[data-task="coin"][data-model="${model}"]`);
        expect(await cell.locator('text').textContent()).toBe(`${result.passes}/4 · ${Math.round(result.passRate * 100)}%`);
        const fill = await cell
          .locator('rect')
          .evaluate(
            (rect) => (globalThis as unknown as { getComputedStyle(element: unknown): { fill: string } }).getComputedStyle(rect).fill,
          );
        const painted = (/rgb\((\d+), (\d+), (\d+)\)/.exec(fill) ?? []).slice(1).map(Number);
        hslToRgb(rateColor(result.passRate)).forEach((channel, index) =>
          expect(Math.abs(painted[index]! - channel)).toBeLessThanOrEqual(1),
        );
      }
      await page.screenshot({ path: join(process.env.CHAMVI_SCREENSHOT_DIR ?? root, 'eval-report.png'), fullPage: true });
    } finally {
      await chromium.close();
    }
  }, 120_000);

  it('is deleted with its runs: garbage collection follows the ownerReferences', async () => {
    await applyIn(NS, [
      evalManifest('gone', {
        attempts: 1,
        passAtK: [1],
        models: [{ name: 'tosser', model: { provider: 'scripted', scriptRef: { name: 'tosser' } } }],
      }),
    ]);
    await eventually(async () => ((await runsOf('gone')).length === 1 ? true : undefined), 60_000, 'the run of the eval');
    await kubectlOk(['delete', 'ceval', 'gone', '-n', NS, '--wait=true']);
    await eventually(async () => ((await runsOf('gone')).length === 0 ? true : undefined), 90_000, 'the runs of the deleted eval to go');
  }, 180_000);

  it('is refused at apply when a grader names a tool the task does not allow', async () => {
    const bad = evalManifest('refused');
    bad.spec.tasks[0]!.graders.push({ type: 'not-used-tool', tool: 'write_file' } as never);
    const result = await kubectl(['apply', '-n', NS, '-f', '-'], { input: JSON.stringify(bad) });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/a grader names a tool this task does not allow/);
    expect((await kubectl(['get', 'ceval', 'refused', '-n', NS])).code).not.toBe(0);
  });
});

describe('a CodingEval whose runs a ResourceQuota forbids', () => {
  const condition = async (name: string) =>
    JSON.parse((await kubectl(['get', 'ceval', name, '-n', NS, '-o', 'jsonpath={.status.conditions[0]}'])).stdout || '{}') as {
      reason?: string;
      message?: string;
    };

  afterAll(async () => {
    await kubectl(['delete', 'resourcequota', 'no-evals', '-n', NS, '--ignore-not-found']);
  });

  it("grades as RunRefused an attempt whose run an admission policy denies with a 403, as the chart's allowRepo does", async () => {
    // The chart's allowRepo policy answers 403 (reason Forbidden), as a quota does; unlike a
    // quota it judged the run itself, so the attempt is graded failed, not waited on.
    const policy = 'e2e-evals-deny-repo';
    const removePolicy = await applyAdmissionPolicy({
      name: policy,
      namespace: NS,
      operations: ['CREATE'],
      validation: {
        expression: "!object.spec.repository.url.endsWith('denied.git')",
        message: 'this cluster denies that repository',
        reason: 'Forbidden',
      },
    });
    try {
      const denied = evalManifest('denied', {
        attempts: 1,
        passAtK: [1],
        parallelism: 1,
        models: [{ name: 'tosser', model: { provider: 'scripted', scriptRef: { name: 'tosser' } } }],
      });
      denied.spec.tasks[0]!.repository = { url: repoUrl.replace(/hello\.git$/, 'denied.git') };
      // The policy takes a moment to be enforced: until a run on that repository is refused.
      const probe = {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'denied-probe' },
        spec: {
          task: 'Probe.',
          repository: denied.spec.tasks[0]!.repository,
          model: { provider: 'scripted', scriptRef: { name: 'tosser' } },
        },
      };
      await eventually(
        async () =>
          (await kubectl(['create', '--dry-run=server', '-n', NS, '-f', '-'], { input: JSON.stringify(probe) })).code !== 0
            ? true
            : undefined,
        60_000,
        'the policy to be enforced',
      );
      await applyIn(NS, [denied]);
      const done = await eventually(
        async () => {
          const status = await evalStatus('denied');
          return status.phase === 'Complete' ? status : undefined;
        },
        90_000,
        'the eval with a denied repository to complete',
      );
      expect(done).toMatchObject({ planned: 1, graded: 1, passes: 0 });
      expect(done.attempts![0]!.failure).toBe('RunRefused');
    } finally {
      await removePolicy();
    }
  });

  it('says why in its status and one Warning, and makes its runs once the quota is gone', async () => {
    // No room for a run. Admission forbids a run (403) whether or not the quota controller has
    // counted the runs yet ("exceeded quota" or "status unknown for quota"). Making as many runs
    // as a quota allows, then waiting, is decideEval's (test/unit/eval-decide.test.ts).
    await applyIn(NS, [
      { apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'no-evals' }, spec: { hard: { 'count/codingruns.chamvi.dev': '0' } } },
    ]);
    await applyIn(NS, [
      evalManifest('quota', {
        attempts: 2,
        passAtK: [1],
        parallelism: 2,
        models: [{ name: 'tosser', model: { provider: 'scripted', scriptRef: { name: 'tosser' } } }],
      }),
    ]);
    const waiting = await eventually(
      async () => {
        const found = await condition('quota');
        return found.reason === 'RunsForbidden' ? found : undefined;
      },
      60_000,
      'the eval to say the API server forbids its runs',
    );
    expect(waiting.message).toMatch(/^0 of 2 attempts graded, 0 running; the API server forbids creating the next run: .*quota: no-evals/);
    expect(waiting.message).toContain("Raise the namespace's quota on codingruns");
    expect(await evalStatus('quota')).toMatchObject({ phase: 'Running', planned: 2, graded: 0 });
    expect(await runsOf('quota')).toEqual([]);
    // The status write wakes the eval again at once; the 403 that follows changes nothing, so
    // no second Warning is recorded.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const warnings = await eventsOf(
      NS,
      'involvedObject.name=quota,involvedObject.kind=CodingEval,reason=RunsForbidden',
      'jsonpath={.items[*].count}',
    );
    expect(warnings).toBe('1');

    // Nothing about the eval or its runs changes when the quota goes: only its retry, a minute
    // after the refusal, makes the runs.
    await kubectlOk(['delete', 'resourcequota', 'no-evals', '-n', NS]);
    const done = await eventually(
      async () => {
        const status = await evalStatus('quota');
        return status.phase === 'Complete' ? status : undefined;
      },
      150_000,
      'the eval to complete after the quota went',
    );
    expect(done).toMatchObject({ planned: 2, graded: 2 });
    expect(await runsOf('quota')).toHaveLength(2);
    expect((await condition('quota')).reason).toBe('Complete');
  }, 300_000);
});
