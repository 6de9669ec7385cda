// How large a run counts as against MAX_RUN_BYTES: the sandbox pod writes each `$` of an env
// value as `$$`, so a run of `$` alone just under the limit made a pod past etcd's 1.5 MiB
// (500 "request is too large", read as temporary: Pending for ever); and the API server stores
// `<`, `>` and `&` as six bytes each, which UTF-8 counted as one.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { MAX_RUN_BYTES } from '../../operator/src/reconcile/decide.ts';
import { runBytes } from '../../operator/src/reconcile/run-bytes.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const ETCD_REQUEST_LIMIT = 1.5 * 1024 * 1024;
const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {});
const runWithEnv = (env: Array<{ name: string; value: string }>) => codingRunFixture({ spec: { sandbox: { env } } });
const podBytes = (run: ReturnType<typeof codingRunFixture>) =>
  Buffer.byteLength(JSON.stringify(buildSandboxPod({ ...run, spec: codingRunSpec.parse(run.spec) } as ParsedCodingRun, config)));

describe('runBytes', () => {
  it('is the JSON size of a run without $ in its env', () => {
    const run = runWithEnv([{ name: 'CI', value: 'true' }]);
    expect(runBytes(run)).toBe(Buffer.byteLength(JSON.stringify(run)));
  });

  it('counts each $ of an env value twice, as the pod holds it', () => {
    const run = runWithEnv([{ name: 'PRICE', value: 'costs $5, $(HOME) $$' }]);
    expect(runBytes(run)).toBe(Buffer.byteLength(JSON.stringify(run)) + 4);
  });

  it('refuses the run of 31 values of 32 768 $ that passed as JSON and made a pod past etcd limit', () => {
    const run = runWithEnv(Array.from({ length: 31 }, (_, index) => ({ name: `V${index}`, value: '$'.repeat(32_768) })));
    expect(Buffer.byteLength(JSON.stringify(run))).toBeLessThan(MAX_RUN_BYTES);
    expect(podBytes(run)).toBeGreaterThan(ETCD_REQUEST_LIMIT);
    expect(runBytes(run)).toBeGreaterThan(MAX_RUN_BYTES);
  });

  it('lets through only runs whose pod stays under the limit, even made of $ alone', () => {
    const values = Array.from({ length: 64 }, (_, index) => ({ name: `V${index}`, value: '$'.repeat(32_768) }));
    let run = runWithEnv([]);
    for (let count = 1; count <= values.length; count += 1) {
      const next = runWithEnv(values.slice(0, count));
      if (runBytes(next) > MAX_RUN_BYTES) break;
      run = next;
    }
    expect(runBytes(run)).toBeLessThanOrEqual(MAX_RUN_BYTES);
    expect(podBytes(run)).toBeLessThan(ETCD_REQUEST_LIMIT);
  });

  it('counts the run as the API server stores it: `<`, `>` and `&` as the six bytes Go writes for each', () => {
    const plain = codingRunFixture({ spec: { task: 'x'.repeat(30) } });
    const html = codingRunFixture({ spec: { task: '<>&'.repeat(10) } });
    expect(Buffer.byteLength(JSON.stringify(html))).toBe(Buffer.byteLength(JSON.stringify(plain)));
    expect(runBytes(html)).toBe(runBytes(plain) + 30 * 5);
  });

  it('counts a run of `<` that passed as UTF-8 past MAX_RUN_BYTES, and past etcd limit as stored', () => {
    const run = codingRunFixture({ spec: { task: '<'.repeat(300_000) } });
    expect(Buffer.byteLength(JSON.stringify(run))).toBeLessThan(MAX_RUN_BYTES);
    expect(runBytes(run)).toBeGreaterThan(MAX_RUN_BYTES);
    expect(runBytes(run)).toBeGreaterThan(ETCD_REQUEST_LIMIT);
  });

  it("counts the $ of the template's copy as well, which the pod's env may come from", () => {
    const run = { ...runWithEnv([]), status: { template: { name: 't', spec: { sandbox: { env: [{ name: 'X', value: '$$$' }] } } } } };
    expect(runBytes(run)).toBe(Buffer.byteLength(JSON.stringify(run)) + 3);
  });
});
