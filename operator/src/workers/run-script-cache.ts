// The scripted model's script, kept per run: read from its ConfigMap at the run's first step
// and replayed from memory after it, instead of a GET per step (issue #17.5). A run replays
// the script it started with; an edited ConfigMap applies to runs that start after the edit.
// The scripted provider is for demos, tests and reproducing a run (docs/api-reference.md), so
// keeping its script costs no one a key rotation: an API key Secret is still read for every
// model call (model-factory.ts). Bounded: a script over MAX_SCRIPT_CHARS is read every step,
// and at most MAX_TOTAL_CHARS of scripts are kept, the least recently used going first.
import type { ModelScript } from '../providers/scripted/model-script-schema.ts';

export const MAX_SCRIPT_CHARS = 64 * 1024;
export const MAX_TOTAL_CHARS = 4 * 1024 * 1024;

interface Entry {
  script: ModelScript;
  chars: number;
}

export class RunScriptCache {
  // A Map iterates in insertion order: re-inserting on use makes the first entry the least recently used.
  private readonly entries = new Map<string, Entry>();
  private total = 0;

  constructor(
    private readonly maxScriptChars = MAX_SCRIPT_CHARS,
    private readonly maxTotalChars = MAX_TOTAL_CHARS,
  ) {}

  get(runUid: string, configMap: string, key: string): ModelScript | undefined {
    const id = `${runUid}/${configMap}/${key}`;
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    this.entries.delete(id);
    this.entries.set(id, entry);
    return entry.script;
  }

  set(runUid: string, configMap: string, key: string, script: ModelScript, chars: number): void {
    if (chars > this.maxScriptChars) return;
    const id = `${runUid}/${configMap}/${key}`;
    const previous = this.entries.get(id);
    if (previous) {
      this.total -= previous.chars;
      this.entries.delete(id);
    }
    this.entries.set(id, { script, chars });
    this.total += chars;
    for (const [oldest, entry] of this.entries) {
      if (this.total <= this.maxTotalChars) break;
      this.entries.delete(oldest);
      this.total -= entry.chars;
    }
  }
}
