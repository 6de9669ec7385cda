// The eval's Events as the eval gateway writes them (kube/eval-gateway.ts), against a fake API
// server on loopback: whatever a message quotes (the API server's or a webhook's words, a
// grader's), it is one line that cannot forge another or drive the terminal, bounded once escaped.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { CodingEval } from '../../operator/src/api/coding-eval.ts';
import { createEvalGateway } from '../../operator/src/kube/eval-gateway.ts';
import { loopbackKubeConfig } from '../support/loopback-kube-config.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** An API server that takes every Event posted and keeps its body. */
async function eventSink() {
  const posted: Array<{ message?: string; reason?: string }> = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      posted.push(JSON.parse(body) as { message?: string });
      response.writeHead(201, { 'content-type': 'application/json' });
      response.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { gateway: createEvalGateway(loopbackKubeConfig((server.address() as AddressInfo).port, { token: 't' })), posted };
}

const evaluation = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingEval',
  metadata: { name: 'cmp', namespace: 'team', uid: 'uid-1' },
  spec: {},
} as unknown as CodingEval;

describe('EvalGateway.recordEvent', () => {
  it("writes a webhook's words quoted in a message on one line, its hidden characters spelled out", async () => {
    const { gateway, posted } = await eventSink();
    const message = 'the API server refused 1 run(s): denied the request: bad\n\u001b]0;owned\u0007\nStatus:\tComplete\n\u202e';
    await gateway.recordEvent(evaluation, { type: 'Warning', reason: 'RunRefused', message }, 'operator-0');
    expect(posted[0]!.message).toBe('the API server refused 1 run(s): denied the request: bad^J^[]0;owned^G^JStatus:^IComplete^J<U+202E>');
    expect(posted[0]!.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u);
  });

  it('keeps the message within 1024 characters once escaped, and never cuts a surrogate pair in two', async () => {
    const { gateway, posted } = await eventSink();
    await gateway.recordEvent(evaluation, { type: 'Warning', reason: 'RunRefused', message: `refused: ${'\u001b'.repeat(2000)}` }, 'op');
    expect(posted[0]!.message!.length).toBeLessThanOrEqual(1024);
    expect(posted[0]!.message).toMatch(/^refused: (\^\[)+$/);
    await gateway.recordEvent(evaluation, { type: 'Warning', reason: 'RunRefused', message: `${'x'.repeat(1023)}\u{1f600}` }, 'op');
    expect(posted[1]!.message).toBe('x'.repeat(1023));
  });
});
