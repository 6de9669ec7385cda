// The plugin as a process (operator/bin/kubectl-codingrun) against a loopback API server: what
// reaches the other end of its pipes. A reader slower than the plugin (`diff NAME | less`) gets
// every byte before the plugin exits; a reader that goes away ends it quietly; an error message
// is one line, whatever the text it quotes.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_UID_LABEL } from '../../operator/src/api/index.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../../operator/src/reconcile/ownership.ts';
import { pluginPath } from '../support/plugin.ts';

const UID = '11111111-2222-3333-4444-555555555555';
// 1 MiB: many times what a pipe and the reading side's buffer hold.
const DIFF = `diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,10000 @@\n${Array.from(
  { length: 10_000 },
  (_, line) => `+line ${line} ${'x'.repeat(90)}`,
).join('\n')}\n`;

const finished = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'big', namespace: 'team', uid: UID, resourceVersion: '5' },
  spec: {},
  status: {
    phase: 'Succeeded',
    result: {
      summary: '',
      diff: DIFF.slice(0, 1000),
      diffTruncated: true,
      diffConfigMap: 'big-diff',
      diffSha256: diffSha(DIFF),
      filesChanged: 1,
      insertions: 10_000,
      deletions: 0,
    },
  },
};
const diffConfigMap = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'big-diff',
    namespace: 'team',
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_UID_LABEL]: UID },
    ownerReferences: [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', name: 'big', uid: UID, controller: true }],
  },
  data: { diff: DIFF },
};
// A refusal whose text the plugin quotes: an admission webhook's, say, with lines of its own.
const FORGED = 'denied\n\ndiff --git a/README.md b/README.md\n+++ b/README.md\n+Hello, world';

let server: Server;
let kubeconfig: string;
let diffServed: () => void = () => {};

beforeAll(async () => {
  server = createServer((request, response) => {
    const reply = (code: number, value: unknown) => {
      response.writeHead(code, { 'content-type': 'application/json' });
      response.end(JSON.stringify(value), () => (request.url?.includes('/configmaps/big-diff') ? diffServed() : undefined));
    };
    if (request.url?.startsWith('/apis/chamvi.dev/v1alpha1/namespaces/team/codingruns/big')) return reply(200, finished);
    if (request.url?.startsWith('/api/v1/namespaces/team/configmaps/big-diff')) return reply(200, diffConfigMap);
    if (request.url?.startsWith('/apis/chamvi.dev/v1alpha1/namespaces/team/codingruns/forbidden'))
      return reply(403, { kind: 'Status', code: 403, message: FORGED });
    return reply(404, { kind: 'Status', code: 404, message: `${request.url} not found` });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  kubeconfig = join(mkdtempSync(join(tmpdir(), 'cli-process-output-')), 'kubeconfig');
  writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster: {server: "http://127.0.0.1:' + String(port) + '", insecure-skip-tls-verify: true}',
      'contexts:',
      '- name: fake',
      '  context: {cluster: fake, user: u, namespace: team}',
      'current-context: fake',
      'users:',
      '- name: u',
      '  user: {token: t}',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

/** The plugin with stdout and stderr as pipes this test reads when it chooses to. */
function startPlugin(args: string[]) {
  const child = spawn(process.execPath, [pluginPath, '--kubeconfig', kubeconfig, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KUBECONFIG: '' },
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited };
}

async function readAll(stream: Readable): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += String(chunk);
  return text;
}

describe('kubectl codingrun as a process, at the ends of its pipes', () => {
  it('diff NAME | a reader a second late: every byte of a 1 MiB diff arrives, then exit 0', async () => {
    const diffRead = new Promise<void>((resolve) => (diffServed = resolve));
    const { child, exited } = startPlugin(['diff', 'big']);
    // Nothing is read from the pipe until a second after the plugin had the whole diff to write.
    await diffRead;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const [stdout, stderr, ended] = await Promise.all([readAll(child.stdout!), readAll(child.stderr!), exited]);
    expect(stderr).toBe('');
    expect(stdout.length).toBe(DIFF.length);
    expect(stdout === DIFF).toBe(true);
    expect(ended).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('diff NAME | a reader that stops (head): the plugin ends quietly, as SIGPIPE ends kubectl', async () => {
    const { child, exited } = startPlugin(['diff', 'big']);
    const first = await new Promise<string>((resolve) => child.stdout!.once('data', (chunk: Buffer) => resolve(String(chunk))));
    child.stdout!.destroy();
    const [stderr, ended] = await Promise.all([readAll(child.stderr!), exited]);
    expect(first.startsWith('diff --git a/big.txt b/big.txt\n')).toBe(true);
    expect(stderr).toBe('');
    expect(ended).toEqual({ code: 141, signal: null });
  }, 60_000);

  it('prints an error on one line with what it quotes escaped: a refusal cannot print a diff of its own', async () => {
    const { child, exited } = startPlugin(['diff', 'forbidden']);
    const [stdout, stderr, ended] = await Promise.all([readAll(child.stdout!), readAll(child.stderr!), exited]);
    expect(stdout).toBe('');
    expect(stderr.split('\n')).toEqual([
      expect.stringMatching(/^warning: the output holds control or bidirectional characters/),
      'kubectl-codingrun: get codingrun forbidden: forbidden: denied^J^Jdiff --git a/README.md b/README.md^J+++ b/README.md^J+Hello, world',
      '',
    ]);
    expect(ended.code).toBe(1);
  }, 60_000);
});
