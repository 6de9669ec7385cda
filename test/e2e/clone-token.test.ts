// Issue #20, the promise in the CodingRun spec ("used by the operator for the clone and never
// enters the sandbox"), kept on the local control plane: a run clones a private repository
// from a loopback smart-HTTP git server that serves only requests carrying the token, so the
// clone succeeds only if the credential was really used (the control). Then the sandbox is read
// through its own exec path (the scripted model's bash call, run by the real toolbox in the kwok
// pod) and on disk (the pod's workspace and home directories), and the token is nowhere.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPROVAL_ANNOTATION, encodeApprovalAnnotation } from '../../operator/src/reconcile/approval-answer.ts';
import { kubectlOk } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.ts';
import { applyIn, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { startE2eOperator } from '../support/e2e-operator.ts';

const NS = 'e2e-clone-token';
const RUN = 'private-clone';
// Random, so no file on the machine holds it by chance; its halves go to the sandbox's grep
// separately, so the command itself (in the status, in the toolbox's argv) never spells it.
const HEAD = `chamvi-clone-token-${randomBytes(6).toString('hex')}`;
const TAIL = `-${randomBytes(6).toString('hex')}`;
const TOKEN = `${HEAD}${TAIL}`;
// What git sends for it: a leak of the header (or the x-access-token:TOKEN pair) counts too.
const BASIC = Buffer.from(`x-access-token:${TOKEN}`).toString('base64');

interface RunStatus {
  phase?: string;
  message?: string;
  pendingApproval?: { id: string; toolName: string };
  result?: { diff: string };
}

// Everything the sandbox can see of itself: its environment (this shell, the toolbox that ran
// it, and grep's own /proc/self/environ), the clone's git metadata, and a search of the
// workspace and the directory holding CHAMVI_HOME (the home; not ~, which on kwok is this
// machine's own home) for the token. It goes into a file, so the run's diff carries it back.
const FINDINGS = [
  'exec > findings.txt 2>&1',
  'echo "== env"; env',
  'echo "== /proc/self/environ"; tr "\\0" "\\n" < /proc/self/environ',
  'echo "== toolbox environ"; tr "\\0" "\\n" < /proc/$PPID/environ',
  'echo "== .git/config"; cat .git/config',
  'echo "== .git/FETCH_HEAD"; cat .git/FETCH_HEAD 2>/dev/null',
  'echo "== .git/packed-refs"; cat .git/packed-refs 2>/dev/null',
  'echo "== git config --list"; git config --list --show-origin',
  `needle="$(printf %s '${HEAD}' '${TAIL}')"`,
  'echo "== hits"; grep -rlaF -e "$needle" -e "$(printf %s "x-access-token:$needle" | base64 -w0)" . "$(dirname "$CHAMVI_HOME")" /proc/self/environ 2>/dev/null',
  'echo "== end"',
].join('\n');

let root: string;
let gitServer: GitHttpServer;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;

const ok = (args: string[]) => kubectlOk(args);

/** Every file under `dir` (following no links), as bytes decoded latin1 so any byte sequence compares. */
function filesUnder(dir: string): Array<{ path: string; text: string }> {
  const found: Array<{ path: string; text: string }> = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(path));
    else if (entry.isFile()) found.push({ path, text: readFileSync(path).toString('latin1') });
  }
  return found;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-clone-token-'));
  createBareRepository(root);
  gitServer = await startGitHttpServer(join(root, 'git'), TOKEN);
  ({ operator, registrar } = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-clone-token',
    redisPrefix: `e2ecltok${Date.now()}`,
    allowRepo: `${gitServer.origin}/**`,
    syncTimeoutMs: 60_000,
  }));
}, 180_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  await gitServer?.close();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('issue #20 the clone credential stays with the operator', () => {
  it('security: the clone token never reaches the sandbox', async () => {
    // The second call is gated only so the run waits while the pod (and its directories) exist.
    const script = {
      turns: [
        { toolCalls: [{ toolName: 'bash', input: { command: FINDINGS } }] },
        { toolCalls: [{ toolName: 'write_file', input: { path: 'pause.txt', content: 'never written\n' } }] },
        { text: 'done' },
      ],
    };
    await applyIn(NS, [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'clone-token', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
        stringData: { token: TOKEN },
      },
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'script' }, data: { 'script.json': JSON.stringify(script) } },
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: RUN },
        spec: {
          task: 'Report what the sandbox can see.',
          repository: { url: `${gitServer.origin}/hello.git`, credentialsSecretRef: { name: 'clone-token' } },
          model: { provider: 'scripted', scriptRef: { name: 'script' } },
          approval: { tools: ['write_file'] },
        },
      },
    ]);

    const waiting = await eventually(
      async () => {
        const status = await runStatus<RunStatus>(NS, RUN);
        if (status.phase === 'Failed' || status.phase === 'Succeeded') throw new Error(`run ended early: ${JSON.stringify(status)}`);
        return status.phase === 'WaitingForApproval' ? status : undefined;
      },
      120_000,
      'the run to wait at its gated call',
    );

    // The control: the clone went through the server that serves only the token, with it.
    expect(gitServer.served).toBeGreaterThan(0);
    expect(gitServer.authorizations).toContain(`Basic ${BASIC}`);

    // The sandbox's directories on disk, while its pod lives: the clone is there, the token is not.
    const pod = (await ok(['get', 'pods', '-n', NS, '-l', `chamvi.dev/run=${RUN}`, '-o', 'jsonpath={.items[0].metadata.name}'])).trim();
    const workspace = await registrar.waitForWorkspace(NS, pod);
    expect(statSync(join(workspace.workspaceDir, '.git', 'config')).isFile()).toBe(true);
    expect(readFileSync(join(workspace.workspaceDir, 'README.md'), 'utf8')).toBe('Hello\n');
    const files = [...filesUnder(workspace.workspaceDir), ...filesUnder(workspace.homeDir)];
    expect(files.map((file) => file.path)).toContain(join(workspace.workspaceDir, 'findings.txt'));
    expect(files.filter((file) => file.text.includes(TOKEN) || file.text.includes(BASIC)).map((file) => file.path)).toEqual([]);

    await ok([
      'annotate',
      'crun',
      RUN,
      '-n',
      NS,
      `${APPROVAL_ANNOTATION}=${encodeApprovalAnnotation({ id: waiting.pendingApproval!.id, decision: 'deny' })}`,
    ]);
    const done = await finishedRun<RunStatus>(NS, RUN, 60_000);
    expect(done.phase).toBe('Succeeded');

    // What the sandbox saw of itself, brought back by the run's diff: really read (each
    // section is there, with what it must show), and no trace of the token anywhere in it.
    const diff = done.result!.diff;
    const findings = diff
      .split('\n')
      .filter((line) => line.startsWith('+') && !line.startsWith('+++'))
      .map((line) => line.slice(1))
      .join('\n');
    expect(findings).toMatch(/^== env$[\s\S]*^CHAMVI_WORKSPACE=/m);
    expect(findings).toMatch(/^== \/proc\/self\/environ$[\s\S]*^CHAMVI_WORKSPACE=/m);
    expect(findings).toMatch(/^== toolbox environ$\n[^=\n]+=/m);
    expect(findings).toMatch(/^== \.git\/config$\n\[core\]/m);
    expect(findings).toContain('== git config --list');
    expect(findings).toMatch(/^== hits\n== end$/m);
    expect(diff).not.toContain(TOKEN);
    expect(diff).not.toContain(BASIC);
    expect(diff).not.toContain(HEAD);
  }, 240_000);
});
