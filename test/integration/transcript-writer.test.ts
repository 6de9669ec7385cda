// The transcript writer (workers/transcript-writer.ts) against the real API server: a write
// of several entries (a step's record that caught up with earlier ones, trailing-record.ts)
// is one request per chunk, opens the chunks it starts, adds to the ones that exist, and a
// redone write changes nothing. The run's chunks are then read as the plugin reads them.
import { KubeConfig } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  buildTranscriptChunk,
  chunkIndexOf,
  readTranscript,
  transcriptSelector,
  type TranscriptChunk,
} from '../../operator/src/record/transcript-chunks.ts';
import type { TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';
import { kubernetesTranscriptWriter, type TranscriptRun } from '../../operator/src/workers/transcript-writer.ts';
import { createNamespace, kubeconfigPath, kubectlOk } from '../support/cluster.ts';

const NS = 'transcript-writer';

const entry = (step: number): TranscriptEntry => ({
  key: `s${String(step).padStart(6, '0')}`,
  kind: 'step',
  step,
  at: new Date().toISOString(),
  text: { text: `step ${step}` },
});

let run: TranscriptRun;

async function createRun(name: string): Promise<TranscriptRun> {
  const created = JSON.parse(
    await kubectlOk(['create', '-n', NS, '-o', 'json', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name },
        spec: {
          task: 'Record.',
          repository: { url: 'https://github.com/acme/webapp.git' },
          model: { provider: 'scripted', scriptRef: { name: 'none' } },
        },
      }),
    }),
  ) as { metadata: { name: string; uid: string; namespace: string } };
  return { metadata: created.metadata };
}

beforeAll(async () => {
  await createNamespace(NS);
  run = await createRun('record');
}, 60_000);

async function chunks(of: TranscriptRun = run): Promise<Array<TranscriptChunk & { metadata: { name: string } }>> {
  const list = JSON.parse(await kubectlOk(['get', 'configmaps', '-n', NS, '-l', transcriptSelector(of.metadata.uid), '-o', 'json'])) as {
    items: Array<TranscriptChunk & { metadata: { name: string } }>;
  };
  return list.items;
}

describe('kubernetesTranscriptWriter', () => {
  it('writes several entries at once, one chunk each, across a chunk boundary; a redone write changes nothing', async () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath());
    const writer = kubernetesTranscriptWriter(kubeConfig);

    await writer.append(run, [entry(1)]);
    // Two entries into the existing chunk: one JSON Patch.
    await writer.append(run, [entry(2), entry(3)]);
    // Step 16 ends chunk 0, steps 17 and 18 open chunk 1: a patch and a create.
    await writer.append(run, [entry(16), entry(17), entry(18)]);
    // A redone record: the chunk exists (409 on create, then the patch).
    await writer.append(run, [entry(17), entry(18)]);

    const stored = await chunks();
    expect(stored.map((chunk) => Object.keys(chunk.binaryData ?? {}).sort())).toEqual(
      expect.arrayContaining([
        ['s000001', 's000002', 's000003', 's000016'],
        ['s000017', 's000018'],
      ]),
    );
    expect(stored).toHaveLength(2);
    const transcript = readTranscript(stored, run);
    expect(transcript.problems).toEqual([]);
    expect(transcript.entries.map((each) => each.text?.text)).toEqual(['step 1', 'step 2', 'step 3', 'step 16', 'step 17', 'step 18']);
  });

  it("keeps apart the entries of a chunk someone made with the run's labels but no owner, which every reader ignores", async () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath());
    const writer = kubernetesTranscriptWriter(kubeConfig);
    const squatted = await createRun('squatted');
    // A namespace member's ConfigMap under the name of the run's first chunk, labelled as the run's, without its ownerReference.
    // With a key of its own, so that the writer's `add /binaryData/<key>` finds the map to add to.
    const squatter = buildTranscriptChunk(squatted, chunkIndexOf(1), { note: Buffer.from('not the run') });
    delete squatter.metadata!.ownerReferences;
    await kubectlOk(['create', '-n', NS, '-f', '-'], { input: JSON.stringify(squatter) });

    // Step 1 opens the chunk (create: 409, then the patch), step 2 patches it.
    await writer.append(squatted, [entry(1)]);
    await writer.append(squatted, [entry(2)]);

    const stored = await chunks(squatted);
    expect(Object.keys(stored.find((chunk) => chunk.metadata.name === squatter.metadata!.name)?.binaryData ?? {})).toEqual(['note']);
    const transcript = readTranscript(stored, squatted);
    expect(transcript.entries.map((each) => each.text?.text)).toEqual(['step 1', 'step 2']);
    expect(transcript.problems).toEqual([expect.stringContaining(`ignored ConfigMap ${squatter.metadata!.name}`)]);
  });
});
