// `kubectl codingrun run --local` runs commands on the user's machine, so (Security #11.13)
// the operator's run of spec.verify.command is asked like a bash call when bash is gated,
// as spec.sandbox.setup is. Which requests are gated is a pure predicate.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { isGatedVerify, verifyDenied, verifyNote } from '../../operator/src/cli/local/local-sandbox-factory.ts';
import type { Sandbox, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

function run(spec: Record<string, unknown>): ParsedCodingRun {
  const fixture = codingRunFixture({ spec });
  return { ...fixture, spec: codingRunSpec.parse(fixture.spec) };
}

const gated = run({ verify: { command: 'npm test' }, approval: { tools: ['bash'] } });
const check = { tool: 'bash', input: { command: 'npm test', timeoutMs: 1000 }, clean: true };

describe('isGatedVerify', () => {
  it.each<[string, ParsedCodingRun, object, boolean]>([
    ['the check, bash gated', gated, check, true],
    ['the check, bash not gated', run({ verify: { command: 'npm test' } }), check, false],
    ['the same command from the model (no clean shell): its own approval path', gated, { ...check, clean: undefined }, false],
    ['another clean command (the diff)', gated, { ...check, input: { command: 'git diff' } }, false],
    ['a run without verify', run({ approval: { tools: ['bash'] } }), check, false],
  ])('%s: %s', (_, subject, request, expected) => {
    expect(isGatedVerify(subject, request as never)).toBe(expected);
  });

  it('denies with a tool error that says nothing ran and what to change', () => {
    const response = verifyDenied({ id: 'verify', decision: 'deny', reason: 'no terminal' });
    expect(response).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
    expect(!response.ok && response.error.message).toMatch(/no terminal; nothing ran.*take bash out of spec.approval.tools/);
  });
});

describe('verifyNote: what the verify question says the check will run', () => {
  const answering = (response: ToolResponse | Error) =>
    ({
      call: async () => {
        if (response instanceof Error) throw response;
        return response;
      },
    }) as unknown as Sandbox;
  const status = (lines: string[]) =>
    answering({ ok: true, result: { status: lines.map((line) => `${line}\n`).join(''), diff: '', truncated: false } });

  it("lists git status's lines, at most 40, and says how many more", async () => {
    const note = await verifyNote(status(Array.from({ length: 45 }, (_, index) => `?? f${index}.sh`)));
    expect(note).toMatch(/^It runs in the workspace as the model left it/);
    expect(note).toContain('?? f0.sh\n');
    expect(note).toContain('?? f39.sh\n... and 5 more');
    expect(note).not.toContain('f40.sh');
  });

  it('says when nothing changed, and when what changed cannot be read', async () => {
    expect(await verifyNote(status([]))).toContain('The model changed nothing.');
    expect(await verifyNote(answering({ ok: false, error: { code: 'IO_ERROR', message: 'no git' } }))).toContain('could not be read');
    expect(await verifyNote(answering(new Error('session closed')))).toContain('could not be read');
  });
});
