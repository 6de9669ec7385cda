// `diff NAME`: the full diff from the run's ConfigMap in either stored form, else the
// bounded copy in the status with a warning when it is not the whole diff, else a clear
// error that says when the diff will exist.
import { describe, expect, it } from 'vitest';
import type { CodingRun, RunResult } from '../../operator/src/api/index.ts';
import { diffSha, encodeDiff } from '../../operator/src/reconcile/diff-config-map.ts';
import { chooseDiff } from '../../operator/src/cli/diff-source.ts';
import { DiffNotOwnedError } from '../../operator/src/cli/errors/diff-not-owned-error.ts';
import { DiffUnavailableError } from '../../operator/src/cli/errors/diff-unavailable-error.ts';

const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';

const run = (result?: Partial<RunResult>, phase: NonNullable<CodingRun['status']>['phase'] = 'Succeeded'): CodingRun => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'hello', namespace: 'agents', uid: 'u' },
  spec: {} as CodingRun['spec'],
  status: {
    phase,
    ...(result ? { result: { summary: '', diff: '', diffTruncated: false, filesChanged: 1, insertions: 1, deletions: 1, ...result } } : {}),
  },
});

// What the operator writes on the diff ConfigMap of run "hello" (uid u).
const ownedByHello = {
  metadata: {
    labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run': 'hello', 'chamvi.dev/run-uid': 'u' },
    ownerReferences: [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', name: 'hello', uid: 'u', controller: true }],
  },
};

describe('chooseDiff', () => {
  it('prefers the ConfigMap over the bounded status copy', () => {
    expect(
      chooseDiff(run({ diff: DIFF.slice(0, 10), diffTruncated: true, diffConfigMap: 'hello-diff' }), {
        ...ownedByHello,
        ...encodeDiff(DIFF),
      }),
    ).toEqual({ text: DIFF });
  });

  it.each([
    ['no ownerReference', { labels: ownedByHello.metadata.labels }, /not the run's \(it has no controller ownerReference\)/],
    [
      'another run as its controller',
      { ...ownedByHello.metadata, ownerReferences: [{ ...ownedByHello.metadata.ownerReferences[0], uid: 'other' }] },
      /controller is CodingRun other, not this run \(u\)/,
    ],
  ])('security #11.6 refuses a ConfigMap the run does not own (%s) instead of printing it', (_, metadata, why) => {
    const planted = { metadata, ...encodeDiff('diff --git a/x b/x\n+planted\n') };
    const hello = run({ diff: DIFF.slice(0, 10), diffTruncated: true, diffConfigMap: 'hello-diff' });
    expect(() => chooseDiff(hello, planted)).toThrow(DiffNotOwnedError);
    expect(() => chooseDiff(hello, planted)).toThrow(why);
    expect(() => chooseDiff(hello, planted)).toThrow(
      /ConfigMap agents\/hello-diff named in codingrun "hello"'s status.result.diffConfigMap.*status.result.diff/,
    );
  });

  it('security #11.6 quotes the refused ownerReference on one line and cut short: its kind and uid are free text to whoever wrote the ConfigMap', () => {
    // A uid that ends the message's line and prints a well-formed diff below it, under the plugin's name.
    const fake = `x)\n\n${DIFF}${'#'.repeat(5000)}`;
    const reference = { ...ownedByHello.metadata.ownerReferences[0]!, kind: 'CodingRun\n+kind', uid: fake };
    const planted = { metadata: { ...ownedByHello.metadata, ownerReferences: [reference] }, ...encodeDiff('x') };
    const hello = run({ diff: DIFF.slice(0, 10), diffTruncated: true, diffConfigMap: 'hello-diff' });
    let message = '';
    try {
      chooseDiff(hello, planted);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/^ConfigMap agents\/hello-diff .*its controller is CodingRun\^J\+kind x\)\^J\^Jdiff --git a\/README.md/);
    expect(message).not.toMatch(/[\n\r]/);
    expect(message).toMatch(/more characters\)\), so it is not printed: .*find out who made the ConfigMap\.$/);
    expect(message.length).toBeLessThan(800);
  });

  it("refuses the run's own ConfigMap when it no longer holds the diff the run kept: an approver must never read a changed copy", () => {
    const kept = run({ diff: DIFF, diffConfigMap: 'hello-diff', diffSha256: diffSha(DIFF) });
    expect(chooseDiff(kept, { ...ownedByHello, ...encodeDiff(DIFF) })).toEqual({ text: DIFF });
    const harmless = { ...ownedByHello, ...encodeDiff(DIFF.replace('Hello, world', 'Hello, reviewer')) };
    expect(() => chooseDiff(kept, harmless)).toThrow(DiffNotOwnedError);
    expect(() => chooseDiff(kept, harmless)).toThrow(/no longer holds the diff codingrun "hello" kept .*Do not approve a publish/);
    // A run kept before diffSha256 existed: its ConfigMap is read as it is.
    expect(chooseDiff(run({ diff: DIFF, diffConfigMap: 'hello-diff' }), harmless).text).toContain('Hello, reviewer');
  });

  it('falls back to status.result.diff with a warning when the ConfigMap is gone and the copy is truncated', () => {
    const diff = chooseDiff(run({ diff: DIFF.slice(0, 10), diffTruncated: true, diffConfigMap: 'hello-diff' }), undefined);
    expect(diff.text).toBe(DIFF.slice(0, 10));
    expect(diff.warning).toMatch(/ConfigMap hello-diff was not found.*first 10 characters/);
  });

  it('uses the status copy silently when it is complete and no ConfigMap is named', () => {
    expect(chooseDiff(run({ diff: DIFF }), undefined)).toEqual({ text: DIFF });
  });

  it('says there is no diff yet for a run still working, and how to wait for it', () => {
    expect(() => chooseDiff(run(undefined, 'Running'), undefined)).toThrow(DiffUnavailableError);
    expect(() => chooseDiff(run(undefined, 'Running'), undefined)).toThrow(/no diff yet \(phase Running\).*get hello -w/);
  });
});
