// A read that may find nothing (kube/api-errors.ts unlessNotFound): a 404 is "not there", every
// other failure is still a failure.
import { describe, expect, it } from 'vitest';
import { unlessNotFound } from '../../operator/src/kube/api-errors.ts';

const failing = (code: number) => Promise.reject(Object.assign(new Error(`HTTP ${code}`), { code }));

describe('unlessNotFound', () => {
  it('gives what the read answered, and undefined for a 404', async () => {
    await expect(unlessNotFound(Promise.resolve({ metadata: { name: 'p' } }))).resolves.toEqual({ metadata: { name: 'p' } });
    await expect(unlessNotFound(failing(404))).resolves.toBeUndefined();
  });

  it('throws any other failure: a 403 or a 500 is not an object that is gone', async () => {
    await expect(unlessNotFound(failing(403))).rejects.toThrow('HTTP 403');
    await expect(unlessNotFound(failing(500))).rejects.toThrow('HTTP 500');
  });
});
