// Calls the SDK keeps though the run offers no tool of theirs (operator/src/agent/tool-calls-not-offered.ts):
// which are answered here, and how the response messages carry the answer.
import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { answerToolCallsNotOffered, isToolCallNotOffered } from '../../operator/src/agent/tool-calls-not-offered.ts';
import { buildToolSet } from '../../operator/src/agent/tool-definitions.ts';
import { toolboxToolDefinitions } from '../../operator/src/agent/toolbox-tool-definitions.ts';

const tools = buildToolSet(['read_file', 'bash'], toolboxToolDefinitions());

describe('isToolCallNotOffered', () => {
  it.each([
    ['an offered tool', { toolCallId: 'a', toolName: 'bash' }, false],
    ['an offered tool the provider says it ran', { toolCallId: 'a', toolName: 'bash', providerExecuted: true }, true],
    ['an MCP call (provider-run, dynamic, valid to the SDK)', { toolCallId: 'a', toolName: 'mcp.x', providerExecuted: true }, true],
    [
      'a provider-run call the SDK marked invalid but left unanswered',
      { toolCallId: 'a', toolName: 'web_search', invalid: true, providerExecuted: true },
      true,
    ],
    ['a call the SDK marked invalid and answered', { toolCallId: 'a', toolName: 'nope', invalid: true }, false],
    ['a name that is no own key of the tool set', { toolCallId: 'a', toolName: 'toString' }, true],
  ])('%s: %s', (_, call, expected) => {
    expect(isToolCallNotOffered(call, tools)).toBe(expected);
  });
});

describe('answerToolCallsNotOffered', () => {
  it("answers an MCP call and drops the provider's result, the answers in the order of the calls", () => {
    const messages: ModelMessage[] = [
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'looking' },
          { type: 'tool-call', toolCallId: 'm1', toolName: 'mcp.x', input: { q: 1 }, providerExecuted: true },
          { type: 'tool-result', toolCallId: 'm1', toolName: 'mcp.x', output: { type: 'json', value: { output: 'ran' } } },
          { type: 'tool-call', toolCallId: 'n1', toolName: 'nope', input: {} },
        ],
      },
      {
        role: 'tool',
        content: [{ type: 'tool-result', toolCallId: 'n1', toolName: 'nope', output: { type: 'error-text', value: 'sdk' } }],
      },
    ];
    const calls = [
      { toolCallId: 'm1', toolName: 'mcp.x', providerExecuted: true },
      { toolCallId: 'n1', toolName: 'nope', invalid: true },
    ];
    const { messages: out, answered } = answerToolCallsNotOffered(messages, calls, tools);
    expect([...answered.keys()]).toEqual(['m1']);
    expect(out).toEqual([
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'looking' },
          { type: 'tool-call', toolCallId: 'm1', toolName: 'unavailable_tool', input: { q: 1 } },
          { type: 'tool-call', toolCallId: 'n1', toolName: 'nope', input: {} },
        ],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'm1',
            toolName: 'unavailable_tool',
            output: { type: 'error-text', value: "Model tried to call unavailable tool 'mcp.x'. Available tools: read_file, bash." },
          },
          { type: 'tool-result', toolCallId: 'n1', toolName: 'nope', output: { type: 'error-text', value: 'sdk' } },
        ],
      },
    ]);
  });

  it('adds a tool message for an answer with no other error, and drops the approval request of an MCP approval', () => {
    const messages: ModelMessage[] = [
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'd1', toolName: 'mcp.deploy', input: '{', providerExecuted: true },
          { type: 'tool-approval-request', approvalId: 'mcpr_1', toolCallId: 'd1' },
        ],
      },
    ];
    const { messages: out } = answerToolCallsNotOffered(
      messages,
      [{ toolCallId: 'd1', toolName: 'mcp.deploy', providerExecuted: true }],
      tools,
    );
    expect(out).toEqual([
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'd1', toolName: 'unavailable_tool', input: {} }] },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'd1',
            toolName: 'unavailable_tool',
            output: { type: 'error-text', value: expect.stringMatching(/^Model tried to call unavailable tool 'mcp\.deploy'/) },
          },
        ],
      },
    ]);
  });

  it("tells a provider-run call of an offered tool's name that nothing ran, not that the tool is unavailable", () => {
    const { answered } = answerToolCallsNotOffered([], [{ toolCallId: 'b', toolName: 'bash', providerExecuted: true }], tools);
    expect(answered.get('b')).toMatch(
      /^Model tried to call tool 'bash' as one its provider runs, which this run does not offer: nothing ran/,
    );
  });

  // A Responses answer of [function_call {call_id: "X", name: "bash"}, mcp_call {id: "X"}]: the
  // SDK keeps X as bash and the MCP result beside it in the assistant message, where it went back
  // to the provider as the provider's own item, as if it had run bash's call.
  it.each([
    ['result', { type: 'tool-result', toolCallId: 'X', toolName: 'mcp.x', output: { type: 'json', value: { output: 'ran' } } }],
    ['approval request', { type: 'tool-approval-request', approvalId: 'mcpr_1', toolCallId: 'X' }],
  ] as const)("drops a provider's %s whose id a call the run runs shares", (_, providerPart) => {
    const bash = { type: 'tool-call', toolCallId: 'X', toolName: 'bash', input: { command: 'echo hi' } } as const;
    const messages: ModelMessage[] = [{ role: 'assistant', content: [bash, providerPart] }];
    const { messages: out, answered } = answerToolCallsNotOffered(messages, [{ toolCallId: 'X', toolName: 'bash' }], tools);
    expect(answered.size).toBe(0);
    expect(out).toEqual([{ role: 'assistant', content: [bash] }]);
  });

  // OpenAI refuses a function name outside ^[a-zA-Z0-9_-]{1,64}$ anywhere in the request, the
  // history included: an answered `mcp.x` would fail every later call of the run.
  it.each([
    ['mcp.x', 'unavailable_tool'],
    ['a'.repeat(65), 'unavailable_tool'],
    ['bad name\n', 'unavailable_tool'],
    ['toString', 'toString'],
    ['no-such_tool1', 'no-such_tool1'],
  ])('sends the answered call %j back named %j, the real name in the error', (toolName, sentName) => {
    const messages: ModelMessage[] = [
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'm', toolName, input: {}, providerExecuted: true }] },
    ];
    const { messages: out, answered } = answerToolCallsNotOffered(messages, [{ toolCallId: 'm', toolName, providerExecuted: true }], tools);
    expect(answered.get('m')).toContain(`'${toolName}'`);
    expect(out).toEqual([
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'm', toolName: sentName, input: {} }] },
      {
        role: 'tool',
        content: [{ type: 'tool-result', toolCallId: 'm', toolName: sentName, output: { type: 'error-text', value: answered.get('m') } }],
      },
    ]);
  });

  it('leaves the messages as they are when every call is offered', () => {
    const messages: ModelMessage[] = [
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'r', toolName: 'read_file', input: {} }] },
    ];
    expect(answerToolCallsNotOffered(messages, [{ toolCallId: 'r', toolName: 'read_file' }], tools)).toEqual({
      messages,
      answered: new Map(),
    });
  });
});
