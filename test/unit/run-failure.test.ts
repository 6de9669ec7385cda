// RunFailure's isInstance is marker based (the vercel/ai pattern): it recognises a failure
// from another copy of the module (a bundle, a second package version), its subclasses, and
// nothing else, whatever fields an impostor has.
import { describe, expect, it } from 'vitest';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { ModelAuthFailedError } from '../../operator/src/providers/errors/model-auth-failed-error.ts';
import { ModelRequestRejectedError } from '../../operator/src/providers/errors/model-request-rejected-error.ts';

/** What an error made by another copy of run-failure.ts looks like: another class, the same Symbol.for key. */
function fromAnotherCopy(): Error {
  const error = new Error('from a bundle') as Error & Record<symbol, unknown>;
  error[Symbol.for('chamvi.error.RunFailure')] = true;
  return Object.assign(error, { reason: 'CloneFailed' });
}

describe('RunFailure.isInstance', () => {
  it.each([
    ['a RunFailure', new RunFailure('CloneFailed', 'x'), true],
    ['a subclass', new ModelAuthFailedError({ provider: 'openai', statusCode: 401 }), true],
    ['a failure from another copy of the module', fromAnotherCopy(), true],
    ['a plain Error with a reason field', Object.assign(new Error('x'), { reason: 'CloneFailed' }), false],
    ['an object with the name', { name: 'RunFailure', reason: 'CloneFailed', message: 'x' }, false],
    ['undefined', undefined, false],
    ['a string', 'RunFailure', false],
  ] as const)('%s → %s', (_name, value, expected) => {
    expect(RunFailure.isInstance(value)).toBe(expected);
  });

  it('a subclass is told apart from its siblings and from a plain RunFailure', () => {
    const auth = new ModelAuthFailedError({ provider: 'openai', statusCode: 403 });
    expect(ModelAuthFailedError.isInstance(auth)).toBe(true);
    expect(ModelRequestRejectedError.isInstance(auth)).toBe(false);
    expect(ModelAuthFailedError.isInstance(new RunFailure('ModelAuthFailed', 'x'))).toBe(false);
  });

  it('carries its reason, message, name and cause', () => {
    const cause = new Error('401');
    const auth = new ModelAuthFailedError({ provider: 'openai', statusCode: 401, cause });
    expect(auth).toMatchObject({ reason: 'ModelAuthFailed', name: 'ModelAuthFailedError', cause });
    expect(auth.message).toContain('spec.model.apiKeySecretRef');
    expect(new RunFailure('SetupFailed', 'exit 1')).toMatchObject({ reason: 'SetupFailed', name: 'RunFailure', message: 'exit 1' });
  });
});
