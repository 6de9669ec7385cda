// The ConfigMap that keeps a run's full diff (status.result.diffConfigMap): the one wire format
// between the finalize worker that writes it (workers/run-resources.ts, local mode's
// memory-run-resources.ts) and `kubectl codingrun diff` that reads it (cli/diff-source.ts).
// It holds ONE of:
//   data.diff             the unified diff as plain UTF-8 text (when it fits, ~900 KiB)
//   binaryData["diff.gz"] the diff gzip-compressed (the API returns binaryData base64-encoded)
// Older ConfigMaps with gzip+base64 text under data.diff are read too (such text starts with
// "H4sI", the base64 of gzip's magic bytes). Its DIFF_KIND_ANNOTATION says which kind of
// writer put the diff there: a step's snapshot, or the final diff of the run's ending, which
// no snapshot replaces (diff-write.ts decides). Pure.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { GROUP, LIMITS, RUN_LABEL, RUN_UID_LABEL, type ParsedCodingRun } from '../api/index.ts';
import { diffConfigMapName, runNameLabel } from './names.ts';
import { MANAGED_BY, MANAGED_BY_LABEL, type OwnedMetadata } from './ownership.ts';
import { ownerReference } from './sandbox-pod.ts';

/** sha256 (hex) of a diff's UTF-8 bytes: status.result.diffSha256, the publish approval's diff.sha256. */
export const diffSha = (diff: string) => createHash('sha256').update(diff, 'utf8').digest('hex');

/**
 * Whether a diff read back from the run's ConfigMap is the one the run kept there. The
 * ConfigMap is the run's, but whoever may edit ConfigMaps in the namespace can change it:
 * status.result.diffSha256, which only the operator writes, says what it held. A run kept
 * before that field has none, and its ConfigMap is taken as it is.
 */
export const isKeptDiff = (diff: string, result: { diffSha256?: string } | undefined) =>
  result?.diffSha256 === undefined || diffSha(diff) === result.diffSha256;

/**
 * Whether a diff of `bytes` (UTF-8 bytes: as taken, or as stored) is as long as the cut
 * take-diff makes of a longer change: LIMITS.fullDiff bytes, less the bytes of a character
 * split there (at most three), which the cut drops. The one test of "cut" for every reader:
 * take-diff (whose size line is the sandbox's to forge), an ending that keeps a snapshot or a
 * stored diff (which carry no size), isCutDiff. A whole diff that long reads as cut too, the
 * safe way round: it is then neither published nor continued from.
 */
export const reachesDiffCut = (bytes: number) => bytes >= LIMITS.fullDiff - 3;

/** reachesDiffCut for a diff as text (its UTF-8 bytes, as the ConfigMap holds them). */
export const diffReachesCut = (diff: string) => reachesDiffCut(Buffer.byteLength(diff, 'utf8'));

/**
 * Whether a kept diff is the cut take-diff makes of a longer change (reachesDiffCut) rather
 * than all of it; those who ask (continueFrom, an eval's graders) then refuse it. The run's
 * status says diffTruncated for both, as its 64 KiB copy is cut either way.
 */
export const isCutDiff = (diff: string, result: { diffTruncated?: boolean } | undefined) =>
  result?.diffTruncated === true && diffReachesCut(diff);

/** The plain diff's key under data. */
export const DIFF_KEY = 'diff';
/** The gzip-compressed diff's key under binaryData. */
export const DIFF_GZIP_KEY = 'diff.gz';
/** Larger diffs are stored compressed: a ConfigMap holds 1 MiB in all, metadata included. */
export const PLAIN_DIFF_MAX_BYTES = 900 * 1024;
const GZIP_BASE64_PREFIX = 'H4sI';

/**
 * Which writer put the diff there: `snapshot` (after a step, diff-snapshot.ts) or `final` (as
 * the run ended, keep-diff.ts). Only a guard against the run's own late snapshots, never proof
 * of what the diff is (anyone who may update the ConfigMap can set it; diff-write.ts). A
 * ConfigMap without it was written before the mark existed, by either; it is read as a snapshot.
 */
export const DIFF_KIND_ANNOTATION = `${GROUP}/diff-kind`;

export type DiffKind = 'snapshot' | 'final';

/** The kind of diff a ConfigMap holds: only the exact mark `final` is final (see DIFF_KIND_ANNOTATION). */
export const diffKindOf = (configMap: { metadata?: { annotations?: Record<string, string> } | undefined }): DiffKind =>
  configMap.metadata?.annotations?.[DIFF_KIND_ANNOTATION] === 'final' ? 'final' : 'snapshot';

/** The payload of a diff ConfigMap (binaryData values base64, as on the wire). */
export interface DiffData {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

/** What the plugin reads of a diff ConfigMap: its payload and what ownership is judged by. */
export interface DiffConfigMap extends OwnedMetadata, DiffData {}

/** The payload for a diff: plain text when it fits, else gzip under binaryData. */
export function encodeDiff(diff: string): DiffData {
  return Buffer.byteLength(diff) <= PLAIN_DIFF_MAX_BYTES
    ? { data: { [DIFF_KEY]: diff } }
    : { binaryData: { [DIFF_GZIP_KEY]: gzipSync(diff).toString('base64') } };
}

/**
 * The diffs this file writes are at most LIMITS.fullDiff bytes (take-diff.ts cuts their text
 * there, a change not UTF-8 too, whose text is up to three times its bytes), so a read inflates
 * at most twice that.
 * Anyone who may update ConfigMaps in the namespace can edit a run's diff ConfigMap (the run
 * still owns it): a megabyte of gzipped zeros inflates to a gigabyte, which would end the
 * operator at its memory limit on every retry of the job that reads it (publish, continueFrom,
 * an eval's grading).
 */
const INFLATED_MAX = 2 * LIMITS.fullDiff;
const gunzipBase64 = (value: string) => gunzipSync(Buffer.from(value, 'base64'), { maxOutputLength: INFLATED_MAX }).toString('utf8');

/**
 * The diff stored in a diff ConfigMap, or undefined when it holds none of the known keys, or a
 * compressed one that does not inflate (corrupt, or larger than any diff this file writes).
 */
export function decodeDiff(configMap: DiffData): string | undefined {
  const compressed = configMap.binaryData?.[DIFF_GZIP_KEY];
  if (compressed !== undefined) {
    try {
      return gunzipBase64(compressed);
    } catch {
      return undefined;
    }
  }
  const plain = configMap.data?.[DIFF_KEY];
  if (plain === undefined) return undefined;
  if (plain.startsWith(GZIP_BASE64_PREFIX)) {
    try {
      return gunzipBase64(plain);
    } catch {
      // Plain text that happens to start with H4sI: a diff always starts with "diff --git",
      // but a hand-made ConfigMap might not, so fall through rather than fail.
    }
  }
  return plain;
}

/** The run's diff ConfigMap under its derived name, owned by the run, holding the diff, marked with the kind of its writer. */
export function buildDiffConfigMap(run: ParsedCodingRun, diff: string, kind: DiffKind = 'final'): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: diffConfigMapName(run),
      namespace: run.metadata.namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_LABEL]: runNameLabel(run.metadata.name), [RUN_UID_LABEL]: run.metadata.uid },
      annotations: { [DIFF_KIND_ANNOTATION]: kind },
      ownerReferences: [ownerReference(run)],
    },
    ...encodeDiff(diff),
  };
}
