// A change whose bytes are not UTF-8 text (reconcile/not-utf8-diff.ts): the operator keeps diffs
// as UTF-8 text, where such bytes become U+FFFD, so the kept diff is not the change. It is
// decided from the bytes, marked in status.result.diffNotUtf8, said by `kubectl codingrun
// diff`, and refused by publish and continueFrom, which once pushed other bytes or failed on it.
import { describe, expect, it } from 'vitest';
import { REASONS, RunFailure, codingRunSpec, type CodingRun, type ParsedCodingRun, type RunResult } from '../../operator/src/api/index.ts';
import { chooseDiff, NOT_UTF8_WARNING } from '../../operator/src/cli/diff-source.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { buildDiffConfigMap, diffSha, type DiffConfigMap } from '../../operator/src/reconcile/diff-config-map.ts';
import { countDiff, keptDiffResult, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import { diffConfigMapName } from '../../operator/src/reconcile/names.ts';
import { isUtf8Diff } from '../../operator/src/reconcile/not-utf8-diff.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { decideContinuation } from '../../operator/src/workers/continuation.ts';
import { keepRunDiff } from '../../operator/src/workers/keep-diff.ts';
import { startPublish } from '../../operator/src/workers/publish-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

/** A new Latin-1 file as git prints it, decoded as the toolbox decodes it: each é became U+FFFD. */
const LOSSY = Buffer.from('diff --git a/n.txt b/n.txt\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+r\xe9sum\xe9\n', 'latin1').toString(
  'utf8',
);
const SHA = 'a'.repeat(40);

describe('isUtf8Diff: decided from the bytes', () => {
  it.each([
    ['UTF-8 text, accents included', Buffer.from('+résumé ✓ 😀\n'), false, true],
    ['a Latin-1 byte', Buffer.from('+r\xe9sum\xe9\n', 'latin1'), false, false],
    ['Shift-JIS', Buffer.from([0x2b, 0x82, 0xa0, 0x0a]), false, false],
    ['a U+FFFD written in a UTF-8 file', Buffer.from('+\uFFFD\n'), false, true],
    ['a character split by the 1 MiB cut', Buffer.from('+é').subarray(0, 2), true, true],
    ['an unfinished character where nothing was cut', Buffer.from('+é').subarray(0, 2), false, false],
    ['a Latin-1 byte before the cut', Buffer.concat([Buffer.from('+\xe9 ', 'latin1'), Buffer.from('é').subarray(0, 1)]), true, false],
  ])('%s', (_, bytes, cut, utf8) => {
    expect(isUtf8Diff(bytes, cut)).toBe(utf8);
  });
});

const kept = (notUtf8: boolean): KeptDiff => ({
  source: 'final',
  diff: LOSSY,
  truncated: false,
  ...(notUtf8 ? { notUtf8 } : {}),
  ...countDiff(LOSSY),
  configMap: 'fix-diff',
  revision: SHA,
});

describe('a change that is not UTF-8 text', () => {
  it('is marked in status.result, and only then', () => {
    expect(keptDiffResult(kept(true), 'Done.').diffNotUtf8).toBe(true);
    expect(keptDiffResult(kept(false), 'Done.')).not.toHaveProperty('diffNotUtf8');
  });

  it('is not published: PublishFailed naming the cause, before anything is planned or pushed', async () => {
    const run = codingRunFixture({
      spec: { publish: { branch: 'chamvi/{run}', credentialsSecretRef: { name: 'push-token' } } },
    }) as ParsedCodingRun;
    // Nothing past the refusal is reached: an empty dependency set would throw a TypeError.
    const publishing = startPublish({} as AgentDependencies, run, {} as RunState, kept(true), 'Done.');
    await expect(publishing).rejects.toBeInstanceOf(RunFailure);
    await expect(publishing).rejects.toMatchObject({ reason: REASONS.PublishFailed });
    await expect(publishing).rejects.toThrow(/not UTF-8 text \(a file in another encoding.*pushed nothing: convert the file to UTF-8/);
  });

  it('is not continued from: InvalidSpec naming the cause, nothing applied', () => {
    const source = codingRunFixture({
      metadata: { name: 'first', uid: 'uid-first' },
      status: { phase: 'Succeeded', reason: 'Completed', result: keptDiffResult(kept(true), 'Done.') },
    });
    const configMap = buildDiffConfigMap({ ...source, spec: codingRunSpec.parse(source.spec) }, LOSSY) as DiffConfigMap;
    const input = {
      namespace: source.metadata.namespace!,
      sourceName: 'first',
      repositoryUrl: source.spec.repository.url,
      source,
      diffConfigMap: configMap,
    };
    const decided = decideContinuation(input);
    expect(decided.ok).toBe(false);
    expect(!decided.ok && decided.message).toMatch(
      /^spec\.continueFrom names CodingRun first, but the change holds bytes that are not UTF-8 text .* nothing was applied: convert/,
    );
    // The same source with its mark gone is continued: the refusal is the mark's.
    const unmarked: CodingRun = { ...source, status: { ...source.status, result: keptDiffResult(kept(false), 'Done.') } };
    expect(decideContinuation({ ...input, source: unmarked }).ok).toBe(true);
  });

  it('is printed by kubectl codingrun diff with a warning saying so', () => {
    const plain = codingRunFixture({});
    const configMap = buildDiffConfigMap({ ...plain, spec: codingRunSpec.parse(plain.spec) }, LOSSY) as DiffConfigMap;
    const withResult = (result: RunResult): CodingRun => ({ ...plain, status: { phase: 'Succeeded', result } });
    const marked = keptDiffResult({ ...kept(true), configMap: diffConfigMapName(plain as ParsedCodingRun) }, 'Done.');
    const printed = chooseDiff(withResult(marked), configMap);
    expect(printed.text).toBe(LOSSY);
    expect(printed.warning).toMatch(/^warning: the change holds bytes that are not UTF-8 text .* shows them as U\+FFFD/);
    expect(printed.warning).toBe(NOT_UTF8_WARNING);
    expect(chooseDiff(withResult({ ...marked, diffNotUtf8: undefined }), configMap).warning).toBeUndefined();
  });

  it('kept from the snapshot (no bytes left to decide from) is marked when it holds a U+FFFD', async () => {
    const run = codingRunFixture({}) as ParsedCodingRun;
    const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => undefined);
    gateway.putConfigMap(buildDiffConfigMap(run, LOSSY, 'snapshot'));
    const deps = { resources: memoryRunResources(gateway), logger: { warn: () => undefined } };
    const state = { diffSnapshot: { sha256: diffSha(LOSSY), configMap: diffConfigMapName(run) } };
    const taken = await keepRunDiff(deps, run, undefined, state);
    expect(taken).toMatchObject({ source: 'snapshot', diff: LOSSY, notUtf8: true });
  });
});
