// CodingRuns through the operator (a process, as in the e2e tier) whose sandboxes are the
// sandbox image built here, on the real node (kubelet, containerd, runc, kube-router): the
// worker clones from a token-guarded git server, imports the tree into the container, runs
// every tool through exec (the kept `serve` session; imports one process per call), takes the
// diff and deletes the pod. The namespace enforces PodSecurity `restricted`, and the operator
// does NOT accept unisolated sandboxes: before the first run it probes the namespace, and the
// probe must find NetworkPolicy enforced (security #11.8) or no run here would start.
//
// What SECURITY.md promises about the sandbox is asked from inside it by the model (the fake
// OpenAI server, which records what the operator sends back): uid 1000, a read-only root with a
// writable workspace and home, no service-account token, neither the model key nor the clone
// token anywhere in the container, seccomp in force; a command past the memory limit is
// OOM-killed and the run goes on; a fork bomb stops at the node's PID limit and the node stays
// healthy. Killing the container from outside (containerd, as a crash would) ends the run
// SandboxLost.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { kubectl, kubectlOk } from '../support/cluster.ts';
import { freePorts } from '../support/control-plane/free-port.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeToolCall } from '../support/fake-openai-server.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.ts';
import { applyIn, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';
import { realNodePlacement, realNodeSandboxResources } from '../support/real-node/sandbox-pods.ts';

const unavailable = inject('realNodeUnavailable');
const NS = 'real-node-runs';
// Random, so no file holds them by chance. Each goes to the sandbox's grep in two halves, so
// the command (in the toolbox's argv, in the recorded tool results) never spells it whole.
const API_KEY = `sk-real-node-${randomBytes(8).toString('hex')}`;
const CLONE_TOKEN = `chamvi-clone-${randomBytes(8).toString('hex')}`;
/** The sandbox's resources in every run here: the memory limit (256Mi) is what the OOM test pushes past. */
const RESOURCES = realNodeSandboxResources;

interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  steps?: number;
  toolCalls?: number;
  result?: { diff: string; filesChanged?: number };
}

let root: string;
let gitServer: GitHttpServer;
let fake: FakeOpenAIServer;
let e2e: E2eOperator;

const finished = (name: string, timeoutMs = 120_000) =>
  finishedRun<RunStatus>(NS, name, timeoutMs).catch(async (error: unknown) => {
    const problems = e2e.operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-10);
    console.error(`${name}: ${JSON.stringify(await runStatus(NS, name))}\n${problems.map((line) => JSON.stringify(line)).join('\n')}`);
    throw error;
  });

/** The example repository the demo edits (examples/repositories/hello), as files. */
function exampleRepository(dir = new URL('../../examples/repositories/hello', import.meta.url).pathname): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (current: string) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) walk(path);
      else files[relative(dir, path)] = readFileSync(path, 'utf8');
    }
  };
  walk(dir);
  return files;
}

/** A run of the fake model `model` on the example repository, cloned with the token. */
function codingRun(name: string, spec: object = {}) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: {
      task: 'Probe the sandbox.',
      repository: { url: `${gitServer.origin}/hello.git`, credentialsSecretRef: { name: 'clone-token' } },
      model: { provider: 'openai-compatible', name, baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } },
      budget: { timeout: '5m' },
      sandbox: { resources: RESOURCES },
      ...spec,
    },
  };
}

const call = (name: string, args: Record<string, unknown>): FakeToolCall => ({ name, arguments: args });
const tools = (...toolCalls: FakeToolCall[]): FakeReply => ({
  type: 'tool-calls',
  toolCalls,
  usage: { promptTokens: 10, completionTokens: 1 },
});
const answer = (text: string): FakeReply => ({ type: 'text', text, usage: { promptTokens: 10, completionTokens: 1 } });

/**
 * What the operator sent back to the model for each tool call of the run, in order: the
 * result as the toolbox returned it (parsed), or `{error}` with the text of a tool error.
 */
function toolResultsOf(model: string): Array<Record<string, unknown>> {
  const requests = fake.requestsFor(model);
  const last = requests.at(-1)?.body as { messages?: Array<{ role: string; content: unknown }> } | undefined;
  return (last?.messages ?? [])
    .filter((message) => message.role === 'tool')
    .map((message) => {
      const text = typeof message.content === 'string' ? message.content : JSON.stringify(message.content);
      try {
        return JSON.parse(text) as Record<string, unknown>;
      } catch {
        return { error: text };
      }
    });
}

/**
 * The node a run's sandbox pod was scheduled to, read while the pod exists; or, when the run
 * ended without one (refused, say IsolationNotEnforced), how it ended, so the test says why.
 */
function sandboxNode(run: string): Promise<string> {
  return eventually(
    async () => {
      const result = await kubectl(['get', 'pods', '-n', NS, '-l', `chamvi.dev/run=${run}`, '-o', 'jsonpath={.items[0].spec.nodeName}']);
      if (result.stdout.trim()) return result.stdout.trim();
      const status = await runStatus<RunStatus>(NS, run);
      return status.phase === 'Failed' ? `no pod: the run ended Failed, ${status.reason}: ${status.message}` : undefined;
    },
    60_000,
    `${run}'s sandbox pod to be scheduled`,
  );
}

const bash = (command: string, extra: Record<string, unknown> = {}) => call('bash', { command, ...extra });
const execFileAsync = promisify(execFile);

/** A bash expression that prints `secret` without the command spelling it (two printf halves). */
const unspelt = (secret: string) => `"$(printf %s '${secret.slice(0, 8)}' '${secret.slice(8)}')"`;

interface BashResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

async function nodeReady(): Promise<string> {
  const result = await kubectl(['get', 'node', inject('realNodeName'), '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']);
  return result.stdout.trim();
}

describe.skipIf(unavailable !== '')(`runs through the operator on the real node${unavailable ? ` (SKIPPED: ${unavailable})` : ''}`, () => {
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'chamvi-real-node-runs-'));
    createBareRepository(root, exampleRepository());
    gitServer = await startGitHttpServer(join(root, 'git'), CLONE_TOKEN);
    fake = await startFakeOpenAIServer();
    // The operator's HTTP port, fixed so the isolation probe's target can name it: pods reach
    // this machine on the node's bridge address.
    const [httpPort] = await freePorts(1);
    const configFile = join(root, 'operator.yaml');
    writeFileSync(
      configFile,
      stringify({
        sandboxPlacement: realNodePlacement,
        isolationProbe: { target: `${inject('realNodeBridgeIp')}:${httpPort}`, settleSeconds: 3, timeoutSeconds: 120 },
      }),
    );
    e2e = await startE2eOperator({
      namespace: NS,
      root,
      identity: 'real-node-runs',
      redisPrefix: `rnruns${Date.now()}`,
      allowRepo: `${gitServer.origin}/**`,
      syncTimeoutMs: 60_000,
      env: {
        CHAMVI_CONFIG: configFile,
        CHAMVI_HTTP_PORT: String(httpPort),
        CHAMVI_SANDBOX_IMAGE: inject('realNodeSandboxImage'),
        // The toolbox inside the image (the operator's default), not the checkout's.
        CHAMVI_TOOLBOX_COMMAND: '/opt/chamvi/node /opt/chamvi/toolbox.mjs',
        CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL,
        // Security #11.8 as shipped: runs start only where the probe finds NetworkPolicy enforced.
        CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'false',
      },
    });
    await applyIn(NS, [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
        stringData: { apiKey: API_KEY },
      },
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'clone-token', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
        stringData: { token: CLONE_TOKEN },
      },
    ]);
  }, 180_000);

  afterAll(async () => {
    await e2e?.stop();
    await fake?.stop();
    await gitServer?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('the demo run: clone, import, tools in the container, the diff, the pod deleted, the run deleted', async () => {
    // examples/demo.yaml as `make demo` applies it, but cloning from the token-guarded server
    // and with the sandbox's resources set.
    const [script, run] = parseAllDocuments(readFileSync(new URL('../../examples/demo.yaml', import.meta.url), 'utf8')).map(
      (document) => document.toJS() as { spec?: Record<string, unknown> },
    );
    run!.spec = {
      ...run!.spec,
      repository: { url: `${gitServer.origin}/hello.git`, credentialsSecretRef: { name: 'clone-token' } },
      sandbox: { resources: RESOURCES },
    };
    await applyIn(NS, [script!, run!]);
    expect(await sandboxNode('demo')).toBe(inject('realNodeName'));
    const status = await finished('demo');
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed', steps: 4, toolCalls: 3 });
    expect(status.result!.diff).toContain('+echo "Hello, ${1:-world}"');
    // The clone went through the server that answers only the token (the worker cloned, not the sandbox).
    expect(gitServer.authorizations).toContain(`Basic ${Buffer.from(`x-access-token:${CLONE_TOKEN}`).toString('base64')}`);
    // Isolation was probed on the real node, and found enforced (or the run would not have started).
    expect(e2e.operator.logged('isolation probed')).toEqual([expect.objectContaining({ namespace: NS, verdict: 'enforced' })]);
    await eventually(
      async () =>
        (await kubectl(['get', 'pods', '-n', NS, '-l', 'chamvi.dev/run=demo', '-o', 'name'])).stdout.trim() === '' ? true : undefined,
      60_000,
      "the demo's sandbox pod to be deleted",
    );
    const deleted = await kubectl(['delete', 'crun', 'demo', '-n', NS, '--timeout=60s'], { timeoutMs: 70_000 });
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await kubectl(['get', 'crun', 'demo', '-n', NS])).code).not.toBe(0);
  });

  it('every tool runs in the container through the kept session', async () => {
    fake.enqueueFor(
      'tools',
      tools(
        call('read_file', { path: 'README.md' }),
        call('list_files', {}),
        call('glob', { pattern: '**/*.sh' }),
        call('grep', { pattern: 'Hello' }),
        call('read_repository_instructions', { paths: ['src/greet.sh'] }),
      ),
      tools(
        call('write_file', { path: 'NOTES.md', content: 'one\ntwo\n' }),
        call('edit_file', { path: 'README.md', oldString: '# ', newString: '# The ' }),
      ),
      tools(
        call('multi_edit', {
          path: 'NOTES.md',
          edits: [
            { oldString: 'one', newString: '1' },
            { oldString: 'two', newString: '2' },
          ],
        }),
      ),
      tools(call('git_diff', {}), bash('id -u; cat /etc/hostname; git status --short')),
      answer('Looked around.'),
    );
    await applyIn(NS, [codingRun('tools')]);
    expect(await sandboxNode('tools')).toBe(inject('realNodeName'));
    const status = await finished('tools');
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 5, toolCalls: 10 });
    const results = toolResultsOf('tools');
    expect(results).toHaveLength(10);
    expect(results.filter((result) => 'error' in result)).toEqual([]);
    expect(JSON.stringify(results[0])).toContain('README.md');
    const shell = results[9] as { exitCode: number; stdout: string };
    const pod = (await kubectlOk(['get', 'crun', 'tools', '-n', NS, '-o', 'jsonpath={.status.podName}'])).trim();
    // uid 1000, and the hostname is the pod's: the command ran in the container, not on this machine.
    expect(shell).toMatchObject({ exitCode: 0 });
    expect(shell.stdout).toMatch(new RegExp(`^1000\\n${pod}\\n`));
    expect(status.result!.diff).toContain('+1\n+2\n');
  });
  it('inside the container, asked through the bash tool: uid 1000, seccomp, read-only root, writable workspace and home, no token, no secret', async () => {
    // Where a leak would show: the model key, the clone token and what git sends for it.
    const basic = Buffer.from(`x-access-token:${CLONE_TOKEN}`).toString('base64');
    // The control: a canary exported into the environment and written to a file is found by
    // the very same searches, so finding no secret means the search looked.
    const canary = `chamvi-canary-${randomBytes(8).toString('hex')}`;
    const search = [
      `k=${unspelt(API_KEY)}; t=${unspelt(CLONE_TOKEN)}; b=${unspelt(basic)}; export CANARY=${unspelt(canary)}`,
      'printf "%s\\n" "$CANARY" > canary.txt',
      // Every process of the container's environment (tini, the idle node, the toolbox, this shell, cat).
      'environ="$(cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n")"',
      'echo "environ key=$(grep -cF -- "$k" <<<"$environ") token=$(grep -cF -- "$t" <<<"$environ") basic=$(grep -cF -- "$b" <<<"$environ") canary=$(grep -cF -- "$CANARY" <<<"$environ")"',
      // Every file of the container's filesystem (image, workspace, home, mounts), /proc, /sys and /dev aside.
      'echo "files: $(grep -rlsaF -e "$k" -e "$t" -e "$b" -e "$CANARY" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev | sort | tr "\\n" " ")"',
    ].join('\n');
    fake.enqueueFor(
      'probes',
      tools(
        bash('id -u; grep ^Seccomp: /proc/self/status'),
        bash('touch /usr/chamvi-probe'),
        bash('echo ok > /workspace/probe && echo ok > "$HOME/probe" && cat /workspace/probe "$HOME/probe"'),
        bash('ls /var/run/secrets/kubernetes.io/serviceaccount; grep -c serviceaccount /proc/mounts'),
        bash(search, { timeoutMs: 120_000 }),
      ),
      answer('Probed.'),
    );
    await applyIn(NS, [codingRun('probes')]);
    const status = await finished('probes');
    expect(status).toMatchObject({ phase: 'Succeeded', toolCalls: 5 });
    const [identity, rootWrite, writable, token, secrets] = toolResultsOf('probes') as unknown as BashResult[];
    expect(identity).toMatchObject({ exitCode: 0 });
    expect(identity!.stdout).toMatch(/^1000\nSeccomp:\s+2\n$/);
    expect(rootWrite!.exitCode).not.toBe(0);
    expect(rootWrite!.stderr).toContain('Read-only file system');
    expect(writable).toMatchObject({ exitCode: 0, stdout: 'ok\nok\n' });
    expect(token!.stderr).toMatch(/No such file or directory/);
    expect(token!.stdout).toBe('0\n');
    expect(secrets).toMatchObject({ exitCode: 0 });
    expect(secrets!.stdout).toMatch(/^environ key=0 token=0 basic=0 canary=[1-9]\d*\nfiles: \/workspace\/canary\.txt \n$/);
    // The canary reached the diff the same way; the secrets did not.
    expect(status.result!.diff).toContain('canary.txt');
    for (const secret of [API_KEY, CLONE_TOKEN, basic]) expect(JSON.stringify(status)).not.toContain(secret);
  });

  it('OOM-kills a command past the memory limit: the model gets the failed command, the run goes on and succeeds', async () => {
    fake.enqueueFor(
      'oom',
      // 400 MB touched page by page under the 256Mi limit; bounded even if no limit held.
      tools(bash("node -e 'const b = Buffer.alloc(400 * 1024 * 1024, 1); console.log(b.length)'")),
      tools(bash('echo still here')),
      answer('The allocation did not fit.'),
    );
    await applyIn(NS, [codingRun('oom')]);
    const status = await finished('oom');
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 3, toolCalls: 2 });
    const [hog, after] = toolResultsOf('oom') as unknown as BashResult[];
    // 137: killed by SIGKILL, the OOM killer's signal; nothing printed.
    expect(hog).toMatchObject({ exitCode: 137, stdout: '', timedOut: false });
    expect(after).toMatchObject({ exitCode: 0, stdout: 'still here\n' });
  });

  it("stops a fork bomb at the node's PID limit: the command fails, the next call works and the node stays Ready", async () => {
    // Every process forks two more, ten levels deep (2,047 shells and their sleeps): well past
    // the kubelet's podPidsLimit of 512, and bounded even if no limit held. The tool's timeout
    // kills the whole process group.
    const bomb = 'b() { if [ "$1" -gt 0 ]; then b $(($1 - 1)) & b $(($1 - 1)) & fi; sleep 20; }; b 10';
    fake.enqueueFor('fork-bomb', tools(bash(bomb, { timeoutMs: 15_000 })), tools(bash('echo still here')), answer('That was a fork bomb.'));
    await applyIn(NS, [codingRun('fork-bomb')]);
    const status = await finished('fork-bomb');
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 3, toolCalls: 2 });
    const [flood, after] = toolResultsOf('fork-bomb') as unknown as BashResult[];
    // fork(2) failed with EAGAIN: the PID limit, not the bomb running out by itself.
    expect(flood!.stderr).toMatch(/fork: (retry: )?Resource temporarily unavailable/);
    expect(after).toMatchObject({ exitCode: 0, stdout: 'still here\n' });
    expect(await nodeReady()).toBe('True');
  });

  it('a sandbox container killed from outside (containerd, as a crash would) ends the run SandboxLost', async () => {
    fake.enqueueFor(
      'killed',
      tools(bash('echo started')),
      // Step 2's model call is held while the container is killed.
      { type: 'tool-calls', toolCalls: [bash('echo never')], delayMs: 30_000 },
      answer('never reached'),
    );
    await applyIn(NS, [codingRun('killed')]);
    await eventually(async () => (fake.requestsFor('killed').length >= 2 ? true : undefined), 120_000, 'step 2 to call the model');
    const containerId = (
      await kubectlOk([
        'get',
        'pods',
        '-n',
        NS,
        '-l',
        'chamvi.dev/run=killed',
        '-o',
        'jsonpath={.items[0].status.containerStatuses[?(@.name=="sandbox")].containerID}',
      ])
    ).replace(/^containerd:\/\//, '');
    expect(containerId).toMatch(/^[0-9a-f]{64}$/);
    const killedAt = Date.now();
    await execFileAsync('ctr', [
      '--address',
      inject('realNodeContainerdSocket'),
      '-n',
      'k8s.io',
      'tasks',
      'kill',
      '--signal',
      'SIGKILL',
      containerId,
    ]);
    const status = await finished('killed', 60_000);
    expect(status).toMatchObject({ phase: 'Failed', reason: 'SandboxLost' });
    expect(status.message).toMatch(/Failed/);
    // Long before the held reply (30 s) could have let the run go on.
    expect(Date.now() - killedAt).toBeLessThan(25_000);
    expect(await nodeReady()).toBe('True');
  });
});
