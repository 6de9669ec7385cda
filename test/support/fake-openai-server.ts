// A real HTTP server on 127.0.0.1 that speaks enough of the OpenAI protocol to test the real
// provider adapters: Chat Completions (`/v1/chat/completions`) and the Responses API
// (`/v1/responses`), each streamed (SSE) or not, answering from a script of replies. Each
// request takes the next reply, whatever its path, unless the model it names has replies of
// its own (enqueueFor, serveForever: a model that always hangs, fails or talks garbage). It
// records every request so tests can check the Authorization header and the messages sent.

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Token figures as the provider reports them; omit the whole object to report no usage. */
export interface FakeUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens?: number;
  readonly reasoningTokens?: number;
  /** Defaults to promptTokens + completionTokens. */
  readonly totalTokens?: number;
}

export interface FakeToolCall {
  readonly name: string;
  /** An object is JSON-encoded; a string is sent verbatim, so it can be malformed JSON. */
  readonly arguments: string | Record<string, unknown>;
  readonly id?: string;
}

export type FakeReply =
  | { readonly type: 'text'; readonly text: string; readonly usage?: FakeUsage; readonly delayMs?: number }
  | {
      readonly type: 'tool-calls';
      readonly toolCalls: readonly FakeToolCall[];
      readonly text?: string;
      readonly usage?: FakeUsage;
      readonly delayMs?: number;
    }
  | {
      readonly type: 'error';
      readonly status: number;
      readonly message?: string;
      readonly headers?: Readonly<Record<string, string>>;
      readonly delayMs?: number;
    }
  /**
   * Never answers. With `afterFirstChunk` a streamed request gets its headers and first event
   * and then nothing more (a non-streamed one gets nothing at all).
   */
  | { readonly type: 'hang'; readonly afterFirstChunk?: boolean }
  /** Sent verbatim with this status and content type: invalid JSON, the wrong shape, an HTML page. */
  | { readonly type: 'raw'; readonly body: string; readonly status?: number; readonly contentType?: string; readonly delayMs?: number }
  /** HTTP 200 and a JSON body that never ends: written as fast as the client reads, until it hangs up. */
  | { readonly type: 'endless' };

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The parsed JSON body, or the raw text when it was not JSON. */
  readonly body: unknown;
}

export interface FakeOpenAIServer {
  /** API root to use as baseURL, e.g. http://127.0.0.1:34567/v1 */
  readonly baseURL: string;
  readonly requests: readonly RecordedRequest[];
  /** Appends replies to the script. */
  enqueue(...replies: FakeReply[]): void;
  /** Replies not yet served. */
  remainingReplies(): number;
  /**
   * Answers every request naming this model (the body's `model`) with `reply`, forever and
   * before the script: a model that always hangs, always fails or always talks garbage.
   */
  serveForever(model: string, reply: FakeReply): void;
  /** Appends replies to the script of requests naming this model, served before serveForever's. */
  enqueueFor(model: string, ...replies: FakeReply[]): void;
  /** Requests that named this model. */
  requestsFor(model: string): RecordedRequest[];
  stop(): Promise<void>;
}

export interface FakeOpenAIServerOptions {
  readonly replies?: readonly FakeReply[];
  /** Served once the script is used up; default a 500 saying so, which makes a test fail loudly. */
  readonly whenExhausted?: FakeReply;
  /** The address to listen on; default 127.0.0.1 (the real-node tier uses the node's bridge address). */
  readonly host?: string;
}

export async function startFakeOpenAIServer(options: FakeOpenAIServerOptions = {}): Promise<FakeOpenAIServer> {
  const script: FakeReply[] = [...(options.replies ?? [])];
  const requests: RecordedRequest[] = [];
  const whenExhausted: FakeReply = options.whenExhausted ?? {
    type: 'error',
    status: 500,
    message: 'fake OpenAI server: the script has no reply left for this request',
  };
  const forever = new Map<string, FakeReply>();
  const scripts = new Map<string, FakeReply[]>();
  let counter = 0;

  const server = createServer((request, response) => {
    void handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: `fake server bug: ${String(error)}` } }));
    });
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const raw = await readBody(request);
    let body: unknown = raw;
    try {
      body = JSON.parse(raw);
    } catch {
      // keep the raw text
    }
    const path = (request.url ?? '').split('?')[0] ?? '';
    requests.push({ method: request.method ?? '', path, headers: request.headers, body });

    const isChat = path.endsWith('/chat/completions');
    const isResponses = path.endsWith('/responses');
    if (request.method !== 'POST' || (!isChat && !isResponses)) {
      sendJson(response, 404, { error: { message: `fake server: no route for ${request.method} ${path}` } });
      return;
    }
    const parsed = (typeof body === 'object' && body !== null ? body : {}) as { stream?: boolean; model?: string };
    const named = parsed.model === undefined ? undefined : (scripts.get(parsed.model)?.shift() ?? forever.get(parsed.model));
    const reply = named ?? script.shift() ?? whenExhausted;
    counter += 1;
    const id = `fake-${counter}`;
    const model = parsed.model ?? 'fake-model';
    const stream = parsed.stream === true;

    if (reply.type === 'hang') {
      if (stream && reply.afterFirstChunk === true) {
        startSse(response);
        const first = isChat
          ? chatChunk(id, model, { role: 'assistant', content: '' }, null)
          : { type: 'response.created', response: { id, created_at: 0, model } };
        response.write(`data: ${JSON.stringify(first)}\n\n`);
      }
      return; // never answered; stop() closes the socket
    }
    if (reply.type === 'endless') {
      await writeEndlessBody(response);
      return;
    }
    if (reply.delayMs !== undefined) await sleep(reply.delayMs);
    if (reply.type === 'raw') {
      response.writeHead(reply.status ?? 200, { 'content-type': reply.contentType ?? 'application/json' });
      response.end(reply.body);
      return;
    }
    if (reply.type === 'error') {
      response.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      response.end(
        JSON.stringify({
          error: { message: reply.message ?? `fake error ${reply.status}`, type: 'fake_error', code: String(reply.status) },
        }),
      );
      return;
    }
    const answer: Answer = {
      text: reply.text,
      toolCalls: (reply.type === 'tool-calls' ? reply.toolCalls : []).map((call, index) => ({
        id: call.id ?? `call_${counter}_${index}`,
        name: call.name,
        arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
      })),
      usage: reply.usage,
    };
    if (isChat) {
      if (stream) {
        const includeUsage = (body as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage === true;
        streamChat(response, id, model, answer, includeUsage);
      } else {
        sendJson(response, 200, chatCompletion(id, model, answer));
      }
    } else if (stream) {
      streamResponses(response, id, model, answer);
    } else {
      sendJson(response, 200, responsesResult(id, model, answer));
    }
  }

  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://${host}:${port}/v1`,
    requests,
    enqueue: (...replies) => {
      script.push(...replies);
    },
    remainingReplies: () => script.length,
    serveForever: (model, reply) => {
      forever.set(model, reply);
    },
    enqueueFor: (model, ...replies) => {
      scripts.set(model, [...(scripts.get(model) ?? []), ...replies]);
    },
    requestsFor: (model) => requests.filter((request) => (request.body as { model?: unknown } | null)?.model === model),
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Hanging replies keep their sockets open; close them so stop() returns.
        server.closeAllConnections();
      }),
  };
}

interface Answer {
  readonly text: string | undefined;
  readonly toolCalls: ReadonlyArray<{ id: string; name: string; arguments: string }>;
  readonly usage: FakeUsage | undefined;
}

function chatUsage(usage: FakeUsage) {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.totalTokens ?? usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
  };
}

function responsesUsage(usage: FakeUsage) {
  return {
    input_tokens: usage.promptTokens,
    output_tokens: usage.completionTokens,
    total_tokens: usage.totalTokens ?? usage.promptTokens + usage.completionTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens ?? 0 },
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
  };
}

function finishReason(answer: Answer): string {
  return answer.toolCalls.length > 0 ? 'tool_calls' : 'stop';
}

function chatCompletion(id: string, model: string, answer: Answer) {
  return {
    id,
    object: 'chat.completion',
    created: 0,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: answer.text ?? null,
          ...(answer.toolCalls.length === 0
            ? {}
            : {
                tool_calls: answer.toolCalls.map((call) => ({
                  id: call.id,
                  type: 'function',
                  function: { name: call.name, arguments: call.arguments },
                })),
              }),
        },
        finish_reason: finishReason(answer),
      },
    ],
    ...(answer.usage === undefined ? {} : { usage: chatUsage(answer.usage) }),
  };
}

function chatChunk(id: string, model: string, delta: Record<string, unknown>, finish: string | null) {
  return { id, object: 'chat.completion.chunk', created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }] };
}

function streamChat(response: ServerResponse, id: string, model: string, answer: Answer, includeUsage: boolean): void {
  startSse(response);
  const send = (data: unknown) => response.write(`data: ${JSON.stringify(data)}\n\n`);
  send(chatChunk(id, model, { role: 'assistant', content: '' }, null));
  // Text in two pieces, so a consumer that does not concatenate deltas is caught.
  if (answer.text !== undefined && answer.text !== '') {
    const middle = Math.ceil(answer.text.length / 2);
    send(chatChunk(id, model, { content: answer.text.slice(0, middle) }, null));
    send(chatChunk(id, model, { content: answer.text.slice(middle) }, null));
  }
  answer.toolCalls.forEach((call, index) => {
    send(
      chatChunk(id, model, { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }, null),
    );
    const middle = Math.ceil(call.arguments.length / 2);
    for (const piece of [call.arguments.slice(0, middle), call.arguments.slice(middle)]) {
      if (piece !== '') send(chatChunk(id, model, { tool_calls: [{ index, function: { arguments: piece } }] }, null));
    }
  });
  send(chatChunk(id, model, {}, finishReason(answer)));
  // OpenAI sends usage in a last chunk with no choices, and only when asked to.
  if (includeUsage && answer.usage !== undefined) {
    send({ id, object: 'chat.completion.chunk', created: 0, model, choices: [], usage: chatUsage(answer.usage) });
  }
  response.end('data: [DONE]\n\n');
}

function responsesOutput(answer: Answer, id: string) {
  const output: unknown[] = [];
  if (answer.text !== undefined) {
    output.push({
      type: 'message',
      id: `msg_${id}`,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: answer.text, annotations: [] }],
    });
  }
  answer.toolCalls.forEach((call, index) => {
    output.push({
      type: 'function_call',
      id: `fc_${id}_${index}`,
      call_id: call.id,
      name: call.name,
      arguments: call.arguments,
      status: 'completed',
    });
  });
  return output;
}

function responsesResult(id: string, model: string, answer: Answer) {
  return {
    id,
    object: 'response',
    created_at: 0,
    status: 'completed',
    model,
    output: responsesOutput(answer, id),
    incomplete_details: null,
    ...(answer.usage === undefined ? {} : { usage: responsesUsage(answer.usage) }),
  };
}

function streamResponses(response: ServerResponse, id: string, model: string, answer: Answer): void {
  startSse(response);
  let sequence = 0;
  const send = (data: Record<string, unknown>) => {
    response.write(`event: ${String(data.type)}\ndata: ${JSON.stringify({ ...data, sequence_number: sequence })}\n\n`);
    sequence += 1;
  };
  send({ type: 'response.created', response: { id, created_at: 0, model } });
  let outputIndex = 0;
  if (answer.text !== undefined) {
    const item = { type: 'message', id: `msg_${id}`, role: 'assistant', status: 'in_progress', content: [] };
    send({ type: 'response.output_item.added', output_index: outputIndex, item });
    send({ type: 'response.output_text.delta', item_id: item.id, output_index: outputIndex, content_index: 0, delta: answer.text });
    send({
      type: 'response.output_item.done',
      output_index: outputIndex,
      item: { ...item, status: 'completed', content: [{ type: 'output_text', text: answer.text, annotations: [] }] },
    });
    outputIndex += 1;
  }
  answer.toolCalls.forEach((call, index) => {
    const item = {
      type: 'function_call',
      id: `fc_${id}_${index}`,
      call_id: call.id,
      name: call.name,
      arguments: '',
      status: 'in_progress',
    };
    send({ type: 'response.output_item.added', output_index: outputIndex, item });
    send({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index: outputIndex, delta: call.arguments });
    send({ type: 'response.function_call_arguments.done', item_id: item.id, output_index: outputIndex, arguments: call.arguments });
    send({
      type: 'response.output_item.done',
      output_index: outputIndex,
      item: { ...item, arguments: call.arguments, status: 'completed' },
    });
    outputIndex += 1;
  });
  send({
    type: 'response.completed',
    response: {
      id,
      created_at: 0,
      model,
      status: 'completed',
      incomplete_details: null,
      ...(answer.usage === undefined ? {} : { usage: responsesUsage(answer.usage) }),
    },
  });
  response.end();
}

function startSse(response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  response.flushHeaders();
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

async function writeEndlessBody(response: ServerResponse): Promise<void> {
  response.writeHead(200, { 'content-type': 'application/json' });
  response.write('{"id":"endless","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"');
  const chunk = 'all work and no play makes jack a dull boy '.repeat(1500);
  let closed = false;
  response.once('close', () => (closed = true));
  while (!closed && !response.destroyed) {
    // Honour backpressure, so the server's own memory stays flat however long the client reads.
    if (!response.write(chunk))
      await new Promise<void>((resolve) => {
        const done = () => {
          response.off('drain', done);
          response.off('close', done);
          resolve();
        };
        response.once('drain', done);
        response.once('close', done);
      });
  }
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
