// The plugin's watches (`get -w`, `get NAME -w`, `logs -f`) against the real API server, run
// in-process with client-node's inactivity timer cut to 1 s, so a quiet watch ends every
// second as it does every 30 s for users. Each end is taken up from the last resourceVersion
// the watch saw: the namespace (or the run, or its transcript) is read once, not again after
// every end, and nothing made meanwhile is missed or printed twice.
import { KubeConfig } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, type CodingRun } from '../../operator/src/api/index.ts';
import { executeCommand, type CliOutput } from '../../operator/src/cli/execute-command.ts';
import { parseArguments, type Command } from '../../operator/src/cli/parse-arguments.ts';
import { createRunClient, type RunClient } from '../../operator/src/cli/run-client.ts';
import { buildTranscriptChunk, encodeEntry } from '../../operator/src/record/transcript-chunks.ts';
import type { TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';
import { createNamespace, kubeconfigPath, kubectl, kubectlJson } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { quietWatch } from '../support/quiet-watch.ts';

const NS = 'cli-watch-resume';
let kubeConfig: KubeConfig;

beforeAll(async () => {
  await createNamespace(NS);
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
});

async function createRun(name: string): Promise<CodingRun> {
  const run = {
    apiVersion: API_VERSION,
    kind: 'CodingRun',
    metadata: { name, namespace: NS },
    spec: {
      task: 'Greet the world',
      repository: { url: 'https://github.com/acme/hello.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
  };
  expect((await kubectl(['create', '-f', '-'], { input: JSON.stringify(run) })).code).toBe(0);
  await setStatus(name, { phase: 'Running', steps: 1 });
  return kubectlJson<CodingRun>(['get', 'codingrun', name, '-n', NS, '-o', 'json']);
}

async function setStatus(name: string, status: object): Promise<void> {
  const patch = ['patch', 'codingrun', name, '-n', NS, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })];
  expect((await kubectl(patch)).code).toBe(0);
}

/** A client whose watches end after 1 s without data, with the ends and the reads counted. */
function quietClient() {
  const { watch, timeouts } = quietWatch(kubeConfig);
  const real = createRunClient(kubeConfig, { watch });
  const reads = { listRuns: 0, getRun: 0, listTranscript: 0 };
  const client: RunClient = {
    ...real,
    listRuns: (namespace) => (reads.listRuns++, real.listRuns(namespace)),
    getRun: (namespace, name) => (reads.getRun++, real.getRun(namespace, name)),
    listTranscript: (namespace, uid, take) => (reads.listTranscript++, real.listTranscript(namespace, uid, take)),
  };
  return { client, reads, timeouts };
}

function start(argv: string[], client: RunClient) {
  const lines: string[] = [];
  const stop = new AbortController();
  const io: CliOutput = {
    out: (text) => lines.push(...text.split('\n')),
    err: (text) => lines.push(`E ${text}`),
    now: () => new Date(),
    signal: stop.signal,
  };
  const exit = executeCommand(parseArguments(argv) as Exclude<Command, { command: 'run' }>, client, io);
  return { lines, stop: () => stop.abort(), exit };
}

const printed = (lines: string[], pattern: RegExp) => lines.filter((line) => pattern.test(line)).length;

describe('kubectl-codingrun watches after a quiet end', () => {
  it('get -w lists the namespace once, then takes each watch up where the last ended', async () => {
    await createRun('listed');
    const { client, reads, timeouts } = quietClient();
    const watch = start(['get', '-w', '-n', NS], client);
    await eventually(async () => (timeouts() >= 3 ? true : undefined), 20_000, 'three quiet ends');
    await createRun('made-after');
    await setStatus('listed', { phase: 'Running', steps: 2 });
    await eventually(async () => (printed(watch.lines, /^listed\s+Running\s+2/) === 1 ? true : undefined), 10_000, 'the change');
    await eventually(async () => (printed(watch.lines, /^made-after\s+Running\s+1/) === 1 ? true : undefined), 10_000, 'the new run');
    watch.stop();
    expect(await watch.exit).toBe(0);

    expect(reads.listRuns).toBe(1);
    expect(printed(watch.lines, /^NAME\s+PHASE/)).toBe(1);
    expect(printed(watch.lines, /^listed\s+Running\s+1/)).toBe(1);
    expect(printed(watch.lines, /^made-after\s+Running\s+1/)).toBe(1);
  });

  it('get -w lists afresh when the server refuses the version to resume from, printing only what changed', async () => {
    await createRun('refused');
    const { client, reads, timeouts } = quietClient();
    // The second watch asks for a version the API server no longer serves, as after etcd's
    // compaction; this server refuses it (429 or 410), and the plugin must list again.
    let watches = 0;
    const refusing: RunClient = {
      ...client,
      watchRuns: (namespace, name, resourceVersion, onEvent) =>
        client.watchRuns(namespace, name, ++watches === 2 ? '1' : resourceVersion, onEvent),
    };
    const watch = start(['get', '-w', '-n', NS], refusing);
    await eventually(async () => (timeouts() >= 1 ? true : undefined), 20_000, 'a quiet end');
    await eventually(async () => (reads.listRuns === 2 ? true : undefined), 10_000, 'the second list');
    await setStatus('refused', { phase: 'Running', steps: 2 });
    await eventually(async () => (printed(watch.lines, /^refused\s+Running\s+2/) === 1 ? true : undefined), 10_000, 'the change');
    watch.stop();
    expect(await watch.exit).toBe(0);

    expect(watches).toBeGreaterThanOrEqual(3);
    expect(printed(watch.lines, /^NAME\s+PHASE/)).toBe(1);
    expect(printed(watch.lines, /^refused\s+Running\s+1/)).toBe(1);
  });

  it('get NAME -w reads the run once and still ends when it finishes', async () => {
    await createRun('named');
    const { client, reads, timeouts } = quietClient();
    const watch = start(['get', 'named', '-w', '-n', NS], client);
    await eventually(async () => (timeouts() >= 3 ? true : undefined), 20_000, 'three quiet ends');
    await setStatus('named', { phase: 'Succeeded', steps: 3, completionTime: new Date().toISOString() });
    expect(await watch.exit).toBe(0);

    expect(reads.getRun).toBe(1);
    expect(watch.lines.filter((line) => /^named\s/.test(line)).map((line) => line.split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'named Running 1',
      'named Succeeded 3',
    ]);
  });

  it('logs -f lists the transcript at the start and the end only, printing each entry once', async () => {
    const run = await createRun('logged');
    const entry = (step: number): TranscriptEntry => ({
      key: `s${String(step).padStart(6, '0')}`,
      kind: 'step',
      step,
      at: new Date().toISOString(),
      text: { text: `step ${step} says hello` },
    });
    const chunk = (...steps: number[]) =>
      buildTranscriptChunk(run, 0, Object.fromEntries(steps.map((step) => [entry(step).key, encodeEntry(entry(step)).value])));
    expect((await kubectl(['create', '-f', '-'], { input: JSON.stringify(chunk(1)) })).code).toBe(0);
    const { client, reads, timeouts } = quietClient();
    const logs = start(['logs', 'logged', '-f', '-n', NS], client);
    await eventually(async () => (timeouts() >= 4 ? true : undefined), 20_000, 'quiet ends of both watches');
    expect((await kubectl(['replace', '-f', '-'], { input: JSON.stringify(chunk(1, 2)) })).code).toBe(0);
    await eventually(async () => (printed(logs.lines, /step 2 says hello/) === 1 ? true : undefined), 10_000, 'the entry made after');
    await setStatus('logged', { phase: 'Succeeded', steps: 2, completionTime: new Date().toISOString() });
    expect(await logs.exit).toBe(0);

    expect(reads.listTranscript).toBe(2);
    expect(printed(logs.lines, /step 1 says hello/)).toBe(1);
    expect(printed(logs.lines, /step 2 says hello/)).toBe(1);
  });
});
