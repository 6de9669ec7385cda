// The transcript in local mode: kept in the in-memory API server as the same chunks the
// operator writes (record/transcript-chunks.ts), and each entry handed to `onEntry` as it is
// recorded, so `run --local` prints the view `kubectl codingrun logs -f` prints.
import { buildTranscriptChunk, chunkIndexOf, decodeEntry, encodeEntry } from '../../record/transcript-chunks.ts';
import type { TranscriptEntry } from '../../record/transcript-entry.ts';
import type { TranscriptWriter } from '../../workers/transcript-writer.ts';
import type { MemoryKubeGateway } from './memory-kube-gateway.ts';

export function memoryTranscriptWriter(gateway: MemoryKubeGateway, onEntry: (entry: TranscriptEntry) => void): TranscriptWriter {
  return {
    async append(run, entries) {
      for (const entry of entries) {
        const { key, value } = encodeEntry(entry);
        const chunk = buildTranscriptChunk(run, chunkIndexOf(entry.step), {});
        const existing = gateway.configMap(run.metadata.namespace, chunk.metadata!.name!);
        chunk.binaryData = { ...existing?.binaryData, [key]: value.toString('base64') };
        gateway.putConfigMap(chunk);
        // What is printed is what was stored: the entry as a reader decodes it, cuts and all.
        const stored = decodeEntry(key, chunk.binaryData[key]!);
        if (!('problem' in stored)) onEntry(stored);
      }
    },
  };
}
