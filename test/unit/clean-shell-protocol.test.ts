// The operator's clean shell on the wire (contract/protocol.ts): the diff snapshot's
// 'keep-jobs' travels as `"clean":true,"keepJobs":true`, so a toolbox older than keepJobs (a pod
// started before an upgrade, a pinned sandbox image) still reads a clean shell, sweeping as it
// always did, and the verify check's `clean: true` is the line it always was.
import { describe, expect, it } from 'vitest';
import { decodeRequest, encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';

const wire = (clean: boolean | 'keep-jobs' | undefined) => JSON.parse(encodeRequest({ id: 1, tool: 'bash', input: {}, clean })) as object;
const decoded = (line: object) => {
  const reading = decodeRequest(JSON.stringify(line));
  return reading.kind === 'request' ? reading.request.clean : reading;
};

describe('the clean shell on the wire', () => {
  it.each([
    ['the verify check', true, { clean: true }],
    ['the diff snapshot', 'keep-jobs', { clean: true, keepJobs: true }],
    ['a model call', undefined, {}],
  ] as const)('sends %s as the boolean clean an older toolbox reads', (_name, clean, extra) => {
    expect(wire(clean)).toEqual({ id: 1, tool: 'bash', input: {}, ...extra });
  });

  it.each([
    [{ clean: true }, true],
    [{ clean: true, keepJobs: true }, 'keep-jobs'],
    [{ clean: true, keepJobs: false }, true],
    // keepJobs alone asks for nothing: only a clean shell sweeps.
    [{ keepJobs: true }, undefined],
    [{}, undefined],
  ])('reads %j as clean %s', (flags, clean) => {
    expect(decoded({ id: 1, tool: 'bash', input: {}, ...flags })).toBe(clean);
  });

  it('refuses a keepJobs that is not a boolean, as it refuses such a clean', () => {
    expect(decoded({ id: 1, tool: 'bash', input: {}, clean: true, keepJobs: 'yes' })).toEqual({
      kind: 'invalid',
      message: 'keepJobs must be a boolean',
    });
  });

  it('round-trips both clean shells', () => {
    for (const clean of [true, 'keep-jobs'] as const) expect(decoded(wire(clean))).toBe(clean);
  });
});
