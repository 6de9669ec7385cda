// Oversized everything (TESTING.md "a run with 10x the output limits stays bounded"): a
// repository with a 50 MiB file, a command that prints 1 GiB, a diff of megabytes of
// binary-looking text, a model that answers megabytes and one whose answer never ends. Each run
// ends the way a user would expect (the big file is cloned and imported whole, reading it is
// refused with advice, output is capped, the model's answers are cut), and what the operator
// keeps stays bounded: its own memory (peak RSS, sampled every 100 ms and the kernel's
// high-water mark), the run's status object and the diff ConfigMap (1 MiB in all).
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { kubeconfigPath, kubectl } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer, type RecordedRequest } from '../support/fake-openai-server.ts';
import { codingRun } from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';
import { MiB, sampleMemory, type MemorySampler } from '../support/memory-sampler.ts';
import { operatorNodeOptions } from '../support/operator-node-flags.ts';
import { decodeDiff } from '../../operator/src/reconcile/diff-config-map.ts';
import { MODEL_RESPONSE_MAX_BYTES } from '../../operator/src/providers/limit-response-size.ts';
import { OUTPUT_LOG_MAX_BYTES } from '../../sandbox-image/toolbox/contract/limits.ts';

const NS = 'faults-oversized';
const API_KEY = 'sk-oversized-0123456789abcdef';
/**
 * Generous: the bundled operator idles near 170 MiB, and a 1.4 MB model answer passes through
 * a few dozen transient copies (SDK, state, exec) that V8 collects lazily. What the bound
 * catches is memory that scales with the input: 1 GiB of output or an endless answer read
 * into the operator would take it far past this.
 */
const RSS_BOUND = 512 * MiB;
const STATUS_BOUND = 100 * 1024;
const CONFIGMAP_LIMIT = MiB;

let scene: FaultScene;
let fake: FakeOpenAIServer;
let bigRepo: string;
let smallRepo: string;
let memory: MemorySampler;
let measured: { sampledPeak: number; highWaterMark: number; samples: number } | undefined;
const figures: string[] = [];

/** 50 MiB of text lines that do not compress much, so the clone and the import really carry 50 MiB. */
function fiftyMebibytesOfLines(): Buffer {
  const hex = randomBytes(25 * MiB).toString('hex'); // 50 MiB of [0-9a-f]
  const bytes = Buffer.from(hex, 'latin1');
  for (let offset = 127; offset < bytes.length; offset += 128) bytes[offset] = 0x0a;
  return bytes;
}

const model = (name: string, spec: object = {}) => ({
  provider: 'openai-compatible',
  name,
  baseURL: fake.baseURL,
  apiKeySecretRef: { name: 'llm' },
  ...spec,
});

/** What the operator sent back to the model for the previous step's tool calls. */
function toolResults(request: RecordedRequest): string[] {
  const messages = (request.body as { messages: Array<{ role: string; content: unknown }> }).messages;
  return messages.filter((message) => message.role === 'tool').map((message) => String(message.content));
}

async function statusBytes(name: string): Promise<number> {
  const result = await kubectl(['get', 'crun', name, '-n', NS, '-o', 'json']);
  return Buffer.byteLength(JSON.stringify((JSON.parse(result.stdout) as { status: unknown }).status));
}

/** The diff ConfigMap's payload as the API server counts it (data bytes + decoded binaryData bytes), and the diff it holds. */
async function diffConfigMap(name: string): Promise<{ bytes: number; diff: string }> {
  const result = await kubectl(['get', 'configmap', name, '-n', NS, '-o', 'json']);
  expect(result.code, result.stderr).toBe(0);
  const object = JSON.parse(result.stdout) as { data?: Record<string, string>; binaryData?: Record<string, string> };
  const data = Object.values(object.data ?? {}).reduce((sum, value) => sum + Buffer.byteLength(value), 0);
  const binary = Object.values(object.binaryData ?? {}).reduce((sum, value) => sum + Buffer.from(value, 'base64').length, 0);
  const diff = decodeDiff(object) ?? '';
  return { bytes: data + binary, diff };
}

beforeAll(async () => {
  // Bundled and started as the image starts it, so the memory figures are the product's.
  // Started before the operator, whose allowModelEndpoints must name it (security #11.3).
  fake = await startFakeOpenAIServer();
  // A 10M-token window for the big turn below, over the default maxContextWindow (1M).
  scene = await FaultScene.start({
    namespace: NS,
    bundled: true,
    env: { CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL, CHAMVI_MAX_CONTEXT_WINDOW: '10000000' },
  });
  bigRepo = scene.createRepository('big', { 'README.md': 'Hello\n', 'big.log': fiftyMebibytesOfLines() });
  smallRepo = scene.createRepository('small', { 'README.md': 'Hello\n' });
  await scene.ns.apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
    stringData: { apiKey: API_KEY },
  });
  memory = sampleMemory(scene.operator.pid, 100);
  figures.push(`operator RSS before the runs: ${(memory.lap() / MiB).toFixed(0)} MiB`);
}, 240_000);

afterEach((context) => {
  // After the last lap (the memory test, or the restart that ends the first operator) there is none to take.
  if (measured) return;
  figures.push(`operator RSS peak during "${context.task.name.slice(0, 60)}…": ${(memory.lap() / MiB).toFixed(0)} MiB`);
});

afterAll(async () => {
  measured ??= memory?.stop();
  if (measured) {
    const { sampledPeak, highWaterMark, samples } = measured;
    figures.push(
      `operator RSS: peak sampled ${(sampledPeak / MiB).toFixed(0)} MiB over ${samples} samples, VmHWM ${(highWaterMark / MiB).toFixed(0)} MiB`,
    );
  }
  console.info(`oversized figures:\n  ${figures.join('\n  ')}`);
  await scene?.stop();
  await fake?.stop();
});

/**
 * 128 ConfigMaps of 1000 KiB each, labelled as the operator labels the diffs it writes, each
 * naming a run of its own: what a namespace with many finished runs holds, and what anyone who
 * may create ConfigMaps there can make. Returns a function that deletes them.
 */
async function keptDiffs(prefix: string): Promise<{ names: string[]; remove(): Promise<void> }> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const names = Array.from({ length: 128 }, (_, i) => `${prefix}-${i}`);
  const diff = randomBytes(750 * 1024).toString('base64'); // 1000 KiB
  for (let i = 0; i < names.length; i += 8) {
    await Promise.all(
      names.slice(i, i + 8).map((name) =>
        core.createNamespacedConfigMap({
          namespace: NS,
          body: {
            metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run': name } },
            data: { diff },
          },
        }),
      ),
    );
  }
  return {
    names,
    remove: async () => {
      await Promise.all(names.map((name) => core.deleteNamespacedConfigMap({ namespace: NS, name })));
    },
  };
}

describe('diffs kept by finished runs', () => {
  it('do not pile up in the operator: 128 diff ConfigMaps of 1 MiB each leave its memory where it was', async () => {
    const port = await scene.httpPort();
    const reconciles = async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return Number(/^chamvi_reconcile_duration_seconds_count\S* (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const before = await reconciles();
    const baseline = memory.lap();
    // The operator's ConfigMap watch sees every one (as metadata), and enqueues its run.
    const { names, remove } = await keptDiffs('kept-diff');
    await eventually(
      async () => ((await reconciles()) >= before + names.length ? true : undefined),
      60_000,
      'the operator to see every ConfigMap',
    );
    const grown = memory.lap();
    figures.push(
      `operator RSS while 125 MiB of diff ConfigMaps arrived: ${(baseline / MiB).toFixed(0)} → peak ${(grown / MiB).toFixed(0)} MiB`,
    );
    await remove();
    // Kept whole, the 125 MiB would stay (and more, as JS objects); sent as metadata, they never arrive.
    expect(grown - baseline).toBeLessThan(64 * MiB);
  }, 180_000);
});

describe('a repository with a 50 MiB file', () => {
  it('is cloned and imported whole; reading the file is refused with advice; 1 GiB of output is capped; a diff of megabytes of binary-looking text is kept bounded', async () => {
    fake.enqueueFor(
      'big',
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'read_file', arguments: { path: 'big.log' } }],
        usage: { promptTokens: 10, completionTokens: 1 },
      },
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'bash', arguments: { command: 'yes | head -c 1G' } }],
        usage: { promptTokens: 10, completionTokens: 1 },
      },
      {
        type: 'tool-calls',
        // Random bytes without NUL: git calls that text, so the diff carries every byte.
        toolCalls: [{ name: 'bash', arguments: { command: "head -c 3000000 /dev/urandom | tr -d '\\000' > noise.bin && wc -c big.log" } }],
        usage: { promptTokens: 10, completionTokens: 1 },
      },
      { type: 'text', text: 'Looked at the big file.', usage: { promptTokens: 10, completionTokens: 1 } },
    );
    await scene.ns.apply(codingRun('big-repo', bigRepo, model('big'), { budget: { timeout: '10m' } }));
    const status = await scene.finished('big-repo', 240_000);
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed', steps: 4, toolCalls: 3 });

    const requests = fake.requestsFor('big');
    expect(requests).toHaveLength(4);
    // The file arrived whole (its size is in the refusal), and the refusal says what to do instead.
    const [readResult] = toolResults(requests[1]!);
    expect(readResult).toContain('TOO_LARGE');
    expect(readResult).toContain(`has ${50 * MiB} bytes`);
    expect(readResult).toMatch(/use grep or bash/);
    // 1 GiB was never going to reach the model: the command was stopped at the output cap,
    // and what the model sees is the head and tail of it.
    const [yesResult] = toolResults(requests[2]!).slice(-1);
    const yes = JSON.parse(yesResult!) as { outputCapped: boolean; stdoutTruncated: boolean; stdoutBytes: number; stdout: string };
    expect(yes.outputCapped).toBe(true);
    expect(yes.stdoutTruncated).toBe(true);
    // Exactly the toolbox's default cap (the operator configures none): any smaller cap "under 1 GiB" is a bug too.
    expect(yes.stdoutBytes).toBe(OUTPUT_LOG_MAX_BYTES);
    expect(Buffer.byteLength(yes.stdout)).toBeLessThanOrEqual(64 * 1024);
    const [wcResult] = toolResults(requests[3]!).slice(-1);
    expect(wcResult).toContain(`${50 * MiB} big.log`);
    // Each request carries bounded results, whatever the tools produced.
    for (const request of requests) expect(Buffer.byteLength(JSON.stringify(request.body))).toBeLessThan(512 * 1024);

    const diffName = (await scene.ns.derivedNames('big-repo')).diff;
    expect(status.result).toMatchObject({ filesChanged: 1, diffTruncated: true, diffConfigMap: diffName });
    const bytes = await statusBytes('big-repo');
    const configMap = await diffConfigMap(diffName);
    figures.push(
      `big-repo: status ${(bytes / 1024).toFixed(1)} KiB, diff ConfigMap ${(configMap.bytes / 1024).toFixed(1)} KiB holding a ${(Buffer.byteLength(configMap.diff) / 1024).toFixed(0)} KiB diff`,
    );
    expect(bytes).toBeLessThan(STATUS_BOUND);
    expect(configMap.bytes).toBeLessThanOrEqual(CONFIGMAP_LIMIT);
    expect(configMap.diff.startsWith('diff --git a/noise.bin b/noise.bin')).toBe(true);
    expect(configMap.diff.startsWith(status.result!.diff)).toBe(true);
  }, 300_000);
});

// Most of what the operator reads of one answer (MODEL_RESPONSE_MAX_BYTES, 2 MiB), JSON escaping included.
describe('a model that answers 1.4 MB', () => {
  it('writes a 1.4 MB file and answers with 1.4 MB of text: the run succeeds, the summary and the diff are cut to their bounds', async () => {
    const line = 'The quick brown fox jumps over the lazy dog, again and again and again.\n';
    const bigAnswer = line.repeat(Math.ceil(1_400_000 / line.length));
    fake.enqueueFor(
      'big-answer',
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'write_file', arguments: { path: 'huge.txt', content: bigAnswer } }],
        usage: { promptTokens: 10, completionTokens: 350_000 },
      },
      { type: 'text', text: `Wrote it. ${bigAnswer}`, usage: { promptTokens: 350_000, completionTokens: 350_000 } },
    );
    // A window that holds the big turn, so it is sent back verbatim rather than summarised.
    await scene.ns.apply(codingRun('big-answer', smallRepo, model('big-answer', { contextWindow: 10_000_000 })));
    const status = await scene.finished('big-answer', 180_000);
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed', steps: 2, toolCalls: 1 });
    expect(status.result!.summary.startsWith('Wrote it. The quick brown fox')).toBe(true);
    expect(status.result!.summary.length).toBeLessThanOrEqual(16_384);
    expect(status.result).toMatchObject({ filesChanged: 1, diffTruncated: true });
    expect(status.result!.diff.length).toBeLessThanOrEqual(65_536);

    const bytes = await statusBytes('big-answer');
    const configMap = await diffConfigMap((await scene.ns.derivedNames('big-answer')).diff);
    figures.push(
      `big-answer: status ${(bytes / 1024).toFixed(1)} KiB, diff ConfigMap ${(configMap.bytes / 1024).toFixed(1)} KiB holding a ${(Buffer.byteLength(configMap.diff) / 1024).toFixed(0)} KiB diff`,
    );
    expect(bytes).toBeLessThan(STATUS_BOUND);
    expect(configMap.bytes).toBeLessThanOrEqual(CONFIGMAP_LIMIT);
    expect(configMap.diff).toContain('+The quick brown fox');
  }, 240_000);

  it('a model whose answer never ends is cut at the size bound: ModelResponseInvalid, not an operator out of memory', async () => {
    fake.serveForever('endless', { type: 'endless' });
    await scene.ns.apply(codingRun('endless', smallRepo, model('endless')));
    const status = await scene.finished('endless', 180_000);
    expect(status).toMatchObject({ phase: 'Failed', reason: 'ModelResponseInvalid' });
    expect(status.message).toContain(`larger than ${MODEL_RESPONSE_MAX_BYTES / 1_048_576} MiB`);
    expect(fake.requestsFor('endless')).toHaveLength(1);
  }, 240_000);
});

describe('through all of it', () => {
  it('the operator kept its memory bounded', () => {
    measured = memory.stop();
    const { sampledPeak, highWaterMark } = measured;
    expect(sampledPeak).toBeLessThan(RSS_BOUND);
    expect(highWaterMark).toBeLessThan(RSS_BOUND);
  });
});

describe('an operator that starts beside 125 MiB of kept diffs', () => {
  it('lists them as metadata: it syncs within its heap limit and reconciles, where a list of the whole objects ran out of memory', async () => {
    const diffs = await keptDiffs('restart-diff');
    try {
      // The first operator goes (it gives up its lease as it stops); the next starts as the
      // image starts it, with the image's heap limit, and must read every ConfigMap it owns.
      measured ??= memory.stop();
      await scene.operator.kill();
      const restarted = scene.startOperator('restarted', { NODE_OPTIONS: operatorNodeOptions() });
      const restartedMemory = sampleMemory(restarted.pid, 100);
      await restarted.waitForLog('caches synced; reconciling', 120_000);
      // And it works: a run is taken to its end by this operator.
      fake.enqueueFor('after-restart', { type: 'text', text: 'Nothing to do.', usage: { promptTokens: 1, completionTokens: 1 } });
      await scene.ns.apply(codingRun('after-restart', smallRepo, model('after-restart')));
      expect(await scene.ns.finished('after-restart', 120_000)).toMatchObject({ phase: 'Succeeded' });
      const { highWaterMark } = restartedMemory.stop();
      figures.push(`operator restarted beside 128 kept diffs of 1000 KiB: VmHWM ${(highWaterMark / MiB).toFixed(0)} MiB`);
      // The 125 MiB read whole would be several times that in the heap; as metadata they are ~1 KiB each.
      expect(highWaterMark).toBeLessThan(RSS_BOUND);
    } finally {
      await diffs.remove();
    }
  }, 300_000);
});
