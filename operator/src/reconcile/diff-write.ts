// What a write of a run's diff does to the diff ConfigMap it finds (diff-config-map.ts is the
// format). Two kinds of writer share the ConfigMap: a step's snapshot, best effort, and the
// final diff of the run's ending, whose sha256 the ender writes to status.result.diffSha256.
// Every reader refuses a ConfigMap that no longer matches that sha, so a snapshot that landed
// after the ending would make the run's diff unreadable for good: no snapshot replaces a diff
// marked final. A final write always stores its own diff, whatever mark it finds: the mark is
// an annotation anyone who may update ConfigMaps in the namespace can set, so a final diff
// found there is never taken for the run's (an ender that adopted it would certify a planted
// diff in diffSha256, and publish would push it). The cluster and the local adapters
// (workers/run-resources.ts, cli/local/memory-run-resources.ts) both apply these rules. Pure.
import { RUN_UID_LABEL, type ParsedCodingRun } from '../api/index.ts';
import { DIFF_KIND_ANNOTATION, diffKindOf, encodeDiff, type DiffKind } from './diff-config-map.ts';
import { jsonPointerSegment, labelPointer } from './json-pointer.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from './ownership.ts';

/** What became of a write of the run's diff, under the ConfigMap name it concerns. */
export type DiffWrite =
  | { outcome: 'written'; configMap: string }
  /** A snapshot not stored: the ConfigMap is marked as holding the run's final diff. Never a final write's outcome. */
  | { outcome: 'refused'; configMap: string };

/** What a write does to a ConfigMap of the run's own that it found under the name it writes. */
export type DiffWriteAction = { action: 'replace' } | { action: 'refuse' };

/**
 * The rule, for a write of kind `writing` over `found` (the run's own, as read; the adapter
 * replaces it only at the resourceVersion read). A final diff replaces whatever is there: a
 * retried finalize takes the diff again from the same sandbox, so it stores the same change,
 * and two enders at once race as they did before the mark (the ConfigMap holds whichever
 * diff was written last, maybe not the one the status names; both are the run's own), which
 * is rare enough to accept. A snapshot replaces only a snapshot (or a ConfigMap from before the mark). A
 * final mark planted by someone who may update the ConfigMap only keeps that run's own
 * snapshots out, and that person could overwrite them anyway.
 */
export function decideDiffWrite(found: { metadata?: { annotations?: Record<string, string> } }, writing: DiffKind): DiffWriteAction {
  if (writing === 'final') return { action: 'replace' };
  return diffKindOf(found) === 'final' ? { action: 'refuse' } : { action: 'replace' };
}

const annotationPointer = (key: string) => `/metadata/annotations/${jsonPointerSegment(key)}`;

/**
 * The JSON Patch that puts `diff` into a ConfigMap the run wrote before (`written`: where its
 * last snapshot went), the same rule in one request: the API server makes the tests on the
 * object it writes, so no read before it is needed. The tests are isOwnedByRun's checks (the
 * operator's label, the run-uid label, the run as controller) and, for a snapshot, the mark
 * `snapshot`: a final diff there, or a ConfigMap from before the mark, fails it, and the
 * adapter takes the way that reads what holds the name and asks decideDiffWrite. A final write
 * tests no mark (it replaces any) and sets it to final; a ConfigMap without annotations fails
 * that add, and takes the same way. The payload key the diff does not use is emptied, so an
 * earlier form of it cannot be read.
 */
export function diffPatch(run: ParsedCodingRun, diff: string, kind: DiffKind): object[] {
  const { data = {}, binaryData = {} } = encodeDiff(diff);
  const uid = run.metadata.uid;
  const mark = annotationPointer(DIFF_KIND_ANNOTATION);
  return [
    { op: 'test', path: labelPointer(MANAGED_BY_LABEL), value: MANAGED_BY },
    { op: 'test', path: labelPointer(RUN_UID_LABEL), value: uid },
    { op: 'test', path: '/metadata/ownerReferences/0/uid', value: uid },
    { op: 'test', path: '/metadata/ownerReferences/0/controller', value: true },
    ...(kind === 'snapshot' ? [{ op: 'test', path: mark, value: 'snapshot' satisfies DiffKind }] : []),
    { op: 'add', path: '/data', value: data },
    { op: 'add', path: '/binaryData', value: binaryData },
    ...(kind === 'final' ? [{ op: 'add', path: mark, value: kind }] : []),
  ];
}
