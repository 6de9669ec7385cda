// Bad inputs (TESTING.md "Reliability tests"): what users get wrong must be refused where it
// is cheapest. 1 000 invalid CodingRun manifests, of many kinds, are refused by the API server
// itself (schema, CEL rules, strict field validation), so none ever exists for the operator
// to see. 100 runs naming repositories outside allowRepo are valid to the API server, so the
// operator must fail each one with RepoNotAllowed before it creates anything: a watch on the
// namespace's pods, started first, must see none. The operator stays healthy and still runs
// a good run afterwards, with CHAMVI_MAX_ACTIVE_RUNS=1 so a refused run that held a sandbox
// slot would show as a good run stuck in Queued.
import { CustomObjectsApi, KubeConfig, Watch } from '@kubernetes/client-node';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { kubeconfigPath, kubectl } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { codingRun, scriptConfigMap } from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';

const NS = 'faults-bad-inputs';
let scene: FaultScene;
let repoUrl: string;
let custom: CustomObjectsApi;

const GROUP = { group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns' };

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [key: string]: unknown };
  spec?: unknown;
  [key: string]: unknown;
}

type Spec = Record<string, any>;

function validSpec(): Spec {
  return {
    task: 'Make the README greet the whole world.',
    repository: { url: repoUrl },
    model: { provider: 'scripted', scriptRef: { name: 'quick' } },
  };
}

/**
 * Ways to get a CodingRun wrong, each a change to a valid manifest; `i` varies the bad value so
 * the 1 000 manifests are not 40 copies of the same 25. Every one must be refused by the API
 * server; none of them is a matter of opinion the operator would have to settle.
 */
const MISTAKES: Record<string, (manifest: Manifest, spec: Spec, i: number) => void> = {
  'no task': (_, spec) => delete spec.task,
  'empty task': (_, spec) => (spec.task = ''),
  'task not a string': (_, spec, i) => (spec.task = i),
  'no repository': (_, spec) => delete spec.repository,
  'empty repository url': (_, spec) => (spec.repository.url = ''),
  'repository url with a space': (_, spec, i) => (spec.repository.url = `https://github.com/acme/repo ${i}.git`),
  'repository url like an option': (_, spec, i) => (spec.repository.url = `--upload-pack=touch /tmp/x${i}`),
  'revision like an option': (_, spec, i) => (spec.repository.revision = `-b${i}`),
  'credentials ref without a name': (_, spec) => (spec.repository.credentialsSecretRef = { key: 'token' }),
  'no model': (_, spec) => delete spec.model,
  'unknown provider': (_, spec, i) => (spec.model = { provider: `acme-llm-${i}`, name: 'x', apiKeySecretRef: { name: 'llm' } }),
  'openai-compatible without baseURL': (_, spec, i) =>
    (spec.model = { provider: 'openai-compatible', name: `m${i}`, apiKeySecretRef: { name: 'llm' } }),
  'baseURL with a fixed-endpoint provider': (_, spec, i) =>
    (spec.model = { provider: 'openai', name: `m${i}`, baseURL: 'https://llm.example/v1', apiKeySecretRef: { name: 'llm' } }),
  'baseURL not http': (_, spec, i) =>
    (spec.model = { provider: 'openai-compatible', name: `m${i}`, baseURL: `ftp://llm.example/${i}`, apiKeySecretRef: { name: 'llm' } }),
  'scripted without a script': (_, spec) => delete spec.model.scriptRef,
  'scripted with an API key': (_, spec) => (spec.model.apiKeySecretRef = { name: 'llm' }),
  'openai without an API key': (_, spec, i) => (spec.model = { provider: 'openai', name: `gpt-${i}` }),
  'openai without a model name': (_, spec) => (spec.model = { provider: 'openai', apiKeySecretRef: { name: 'llm' } }),
  'context window too small': (_, spec, i) => (spec.model.contextWindow = i % 1024),
  'context window not an integer': (_, spec, i) => (spec.model.contextWindow = 4096 + i + 0.5),
  'unknown tool allowed': (_, spec, i) => (spec.tools = { allow: ['read_file', `rm_rf_${i}`] }),
  'tool allowed twice': (_, spec) => (spec.tools = { allow: ['bash', 'bash'] }),
  'unknown tool needs approval': (_, spec, i) => (spec.approval = { tools: [`deploy_${i}`] }),
  'approval timeout not a duration': (_, spec, i) => (spec.approval = { timeout: `${i} minutes` }),
  'zero steps': (_, spec) => (spec.budget = { maxSteps: 0 }),
  'too many steps': (_, spec, i) => (spec.budget = { maxSteps: 1001 + i }),
  'steps as words': (_, spec, i) => (spec.budget = { maxSteps: `ten-${i}` }),
  'negative token budget': (_, spec, i) => (spec.budget = { maxTokens: -1 - i }),
  'timeout without a unit': (_, spec, i) => (spec.budget = { timeout: String(60 + i) }),
  'timeout in days': (_, spec, i) => (spec.budget = { timeout: `${1 + (i % 9)}d` }),
  'empty setup command': (_, spec) => (spec.sandbox = { setup: '' }),
  'env var with a bad name': (_, spec, i) => (spec.sandbox = { env: [{ name: `1BAD-${i}`, value: 'x' }] }),
  'env var twice': (_, spec) =>
    (spec.sandbox = {
      env: [
        { name: 'A', value: '1' },
        { name: 'A', value: '2' },
      ],
    }),
  'env var from a secret': (_, spec) => (spec.sandbox = { env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] }),
  'bad resource quantity': (_, spec, i) => (spec.sandbox = { resources: { limits: { memory: `${i} gigs` } } }),
  'runtime class not a name': (_, spec, i) => (spec.sandbox = { runtimeClassName: `Not_A_Name_${i}` }),
  'negative ttl': (_, spec, i) => (spec.ttlSecondsAfterFinished = -1 - i),
  'unknown spec field': (_, spec, i) => (spec[`priority${i}`] = 'high'),
  'misspelt field': (_, spec) => {
    spec.repo = spec.repository;
    delete spec.repository;
  },
  'spec not an object': (manifest) => (manifest.spec = 'fix the bug'),
  'no spec at all': (manifest) => delete manifest.spec,
  'name with capitals': (manifest, _, i) => (manifest.metadata.name = `Bad-Name-${i}`),
  'name with an underscore': (manifest, _, i) => (manifest.metadata.name = `bad_name_${i}`),
};

function invalidManifests(count: number): Array<{ mistake: string; manifest: Manifest }> {
  const kinds = Object.entries(MISTAKES);
  return Array.from({ length: count }, (_, i) => {
    const [mistake, apply] = kinds[i % kinds.length]!;
    const spec = validSpec();
    const manifest: Manifest = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: `bad-${String(i).padStart(4, '0')}` },
      spec,
    };
    apply(manifest, spec, i);
    return { mistake, manifest };
  });
}

/** Runs `work` over `items` with at most `limit` in flight. */
async function pool<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await work(items[index]!);
      }
    }),
  );
  return results;
}

/** The API server's answer to a create: the HTTP status and its message, or 201. */
async function create(manifest: Manifest): Promise<{ code: number; message: string }> {
  try {
    await custom.createNamespacedCustomObject({ ...GROUP, namespace: NS, body: manifest, fieldValidation: 'Strict' });
    return { code: 201, message: 'created' };
  } catch (error) {
    const { code, body } = error as { code?: number; body?: unknown };
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    let message = text;
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? text;
    } catch {
      // keep the raw body
    }
    return { code: code ?? 0, message };
  }
}

async function runNames(): Promise<string[]> {
  const result = await kubectl(['get', 'crun', '-n', NS, '-o', 'name']);
  return result.stdout.split('\n').filter(Boolean);
}

interface PodWatch {
  /** Names of the pods that appeared, in order. */
  readonly seen: string[];
  /** Set when the watch ended before stop(): then "no pod seen" proves nothing. */
  readonly endedEarly: () => string | undefined;
  stop(): void;
}

/** Records every pod that appears in the namespace, through a watch started before the runs. */
async function watchPods(): Promise<PodWatch> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  const seen: string[] = [];
  let stopped = false;
  let ended: string | undefined;
  const request = await new Watch(kubeConfig).watch(
    `/api/v1/namespaces/${NS}/pods`,
    {},
    (type: string, pod: { metadata?: { name?: string } }) => {
      const name = pod.metadata?.name ?? '?';
      if ((type === 'ADDED' || type === 'MODIFIED') && !seen.includes(name)) seen.push(name);
    },
    (error: unknown) => {
      if (!stopped) ended = `the pod watch ended early: ${String(error)}`;
    },
  );
  return {
    seen,
    endedEarly: () => ended,
    stop: () => {
      stopped = true;
      request.abort();
    },
  };
}

beforeAll(async () => {
  scene = await FaultScene.start({ namespace: NS, env: { CHAMVI_MAX_ACTIVE_RUNS: '1' } });
  repoUrl = scene.repoUrl;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
  await scene.ns.apply(
    scriptConfigMap('quick', [
      {
        toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
        usage: { inputTokens: 10, outputTokens: 1 },
      },
      { text: 'Greeted the world.', usage: { inputTokens: 10, outputTokens: 1 } },
    ]),
  );
}, 180_000);

afterAll(async () => {
  await scene?.stop();
});

describe('1 000 invalid manifests', () => {
  it('are each refused by the API server at apply, and none exists afterwards', async () => {
    // The manifest every mistake starts from is valid (server-side dry run: nothing is stored),
    // so each refusal below is the mistake's doing.
    const control = { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', metadata: { name: 'control' }, spec: validSpec() };
    await expect(
      custom.createNamespacedCustomObject({ ...GROUP, namespace: NS, body: control, fieldValidation: 'Strict', dryRun: 'All' }),
    ).resolves.toBeDefined();

    const manifests = invalidManifests(1000);
    const started = performance.now();
    const answers = await pool(manifests, 16, ({ manifest }) => create(manifest));
    const seconds = (performance.now() - started) / 1000;

    const accepted = manifests
      .filter((_, index) => answers[index]!.code === 201)
      .map(({ mistake, manifest }) => `${manifest.metadata.name} (${mistake})`);
    expect(accepted, 'manifests the API server accepted').toEqual([]);
    // Refused as invalid (422) or undecodable (400): never a server error, never a timeout.
    const codes = new Map<number, number>();
    for (const answer of answers) codes.set(answer.code, (codes.get(answer.code) ?? 0) + 1);
    expect(
      [...codes.keys()].every((code) => code === 400 || code === 422),
      `status codes ${JSON.stringify([...codes])}`,
    ).toBe(true);
    // Each refusal names what is wrong; one per kind is enough to read.
    const byMistake = new Map<string, string>();
    manifests.forEach(({ mistake }, index) => byMistake.set(mistake, answers[index]!.message));
    for (const [mistake, message] of byMistake)
      expect(message, mistake).toMatch(/spec|metadata\.name|unknown field|Invalid value|Required value|Unsupported value/);
    console.info(
      `1000 invalid manifests refused in ${seconds.toFixed(1)} s (${[...codes].map(([code, n]) => `${n}×${code}`).join(', ')}), ${byMistake.size} kinds`,
    );

    // The same refusals through kubectl, many documents in one apply: kubectl reports each and goes on.
    const sample = manifests.slice(0, Object.keys(MISTAKES).length);
    const viaKubectl = await kubectl(['apply', '-n', NS, '-f', '-'], {
      input: sample.map(({ manifest }) => stringify(manifest)).join('---\n'),
    });
    expect(viaKubectl.code).not.toBe(0);
    const refusals = viaKubectl.stderr
      .split('\n')
      .filter((line) => /^(Error from server|The CodingRun ".*" is invalid|error: )/.test(line));
    expect(refusals.length, viaKubectl.stderr).toBe(sample.length);

    expect(await runNames()).toEqual([]);
  });
});

describe('100 runs with disallowed repositories', () => {
  // Each is a valid manifest: only the operator's allowRepo says no.
  const disallowed = (i: number): string => {
    const root = scene.root;
    const urls = [
      `https://github.com/evil/repo-${i}.git`,
      `http://example.com/acme/repo-${i}.git`,
      `git@github.com:acme/repo-${i}.git`,
      `ssh://git@git.example.com/acme/repo-${i}.git`,
      `file:///etc/passwd-${i}`,
      `file://${join(root, 'git')}/../secrets-${i}.git`,
      `file://${join(root, 'git')}/nested/repo-${i}.git`,
      `ext::sh%20-c%20touch%20/tmp/pwned-${i}`,
      `https://user:token-${i}@github.com/acme/repo.git`,
      `ftp://example.com/repo-${i}.git`,
      `not-a-url-${i}`,
      `https://github.com.evil.io/acme/repo-${i}.git`,
    ];
    return urls[i % urls.length]!;
  };

  let pods: PodWatch;
  beforeAll(async () => {
    pods = await watchPods();
  });
  afterAll(() => pods?.stop());

  it('all end Failed with RepoNotAllowed, no pod is ever created, and the operator stays healthy', async () => {
    const runs = Array.from(
      { length: 100 },
      (_, i) =>
        codingRun(`refused-${String(i).padStart(3, '0')}`, disallowed(i), {
          provider: 'scripted',
          scriptRef: { name: 'quick' },
        }) as Manifest,
    );
    const answers = await pool(runs, 8, (run) => create(run));
    expect(
      answers.filter((answer) => answer.code !== 201),
      'runs the API server refused',
    ).toEqual([]);

    const statuses = await eventually(
      async () => {
        const list = await kubectl(['get', 'crun', '-n', NS, '-o', 'json']);
        const items = (
          JSON.parse(list.stdout) as {
            items: Array<{
              metadata: { name: string };
              spec: { repository: { url: string } };
              status?: { phase?: string; reason?: string; message?: string };
            }>;
          }
        ).items;
        const refused = items.filter((item) => item.metadata.name.startsWith('refused-'));
        return refused.length === 100 && refused.every((item) => item.status?.phase === 'Failed') ? refused : undefined;
      },
      120_000,
      'all 100 refused runs to fail',
    );
    for (const run of statuses) {
      expect(run.status, run.metadata.name).toMatchObject({ phase: 'Failed', reason: 'RepoNotAllowed' });
      expect(run.status!.message, run.metadata.name).toContain('repository');
    }
    // Say why, in words a user can act on (a few kinds checked).
    expect(statuses.find((run) => run.spec.repository.url.startsWith('ext::'))!.status!.message).toContain('remote helper');
    expect(statuses.find((run) => run.spec.repository.url.includes('token-'))!.status!.message).toContain('credentialsSecretRef');
    expect(statuses.find((run) => run.spec.repository.url.startsWith('https://github.com/evil/'))!.status!.message).toContain(
      "does not match the operator's allowRepo",
    );

    expect(pods.endedEarly()).toBeUndefined();
    expect(pods.seen, 'pods seen in the namespace').toEqual([]);
    const networkPolicies = await kubectl(['get', 'networkpolicy', '-n', NS, '-o', 'name']);
    expect(networkPolicies.stdout.trim()).toBe('');

    const port = await scene.httpPort();
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    expect(
      scene.operator.lines.filter((line) => (line.level ?? 0) >= 50),
      'error lines in the operator log',
    ).toEqual([]);
  });

  it('a good run afterwards still succeeds, with the only sandbox slot free, and is the only pod the watch saw', async () => {
    await scene.ns.apply(codingRun('good-after', repoUrl, { provider: 'scripted', scriptRef: { name: 'quick' } }));
    const status = await scene.finished('good-after');
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(status.result!.diff).toContain('+Hello, world');
    // The same watch saw this pod: it was watching all along.
    expect(pods.endedEarly()).toBeUndefined();
    expect(pods.seen).toEqual([(await scene.ns.derivedNames('good-after')).pod]);
  });
});
