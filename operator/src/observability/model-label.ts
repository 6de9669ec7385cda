// The `model` label of chamvi_tokens_total, bounded. The name is what a run author writes in
// spec.model.name (up to 256 characters), and an endpoint that ignores it answers to any: each
// new name would be a new series, kept in memory for good and rendered at every scrape (20 000
// names held 25.9 MiB of heap; a /metrics render was 13.6 MiB and 229 ms of event loop). So a
// process labels the first names it sees by name and counts every later one as `other`.

/** Distinct model names one process labels by name; more than a cluster serves. */
export const MODEL_LABEL_MAX_NAMES = 64;
/** A name is cut to this many characters: longer than the names vendors give their models. */
export const MODEL_LABEL_MAX_LENGTH = 64;
/** The label of every name past the first MODEL_LABEL_MAX_NAMES. */
export const OTHER_MODEL_LABEL = 'other';

export interface ModelLabelDecision {
  /** The label value to record under. */
  readonly value: string;
  /** A name not labelled before that now is: the caller adds it to the labelled set. */
  readonly newlyLabelled: boolean;
}

/**
 * The label value for `name`, given the (cut) names already labelled by name: its cut form if
 * labelled already or if there is room for one more, else `other`. Names that differ only past
 * the cut share a value.
 */
export function decideModelLabel(name: string, labelled: ReadonlySet<string>, maxNames = MODEL_LABEL_MAX_NAMES): ModelLabelDecision {
  const value = cutName(name);
  if (labelled.has(value)) return { value, newlyLabelled: false };
  if (labelled.size < maxNames) return { value, newlyLabelled: true };
  return { value: OTHER_MODEL_LABEL, newlyLabelled: false };
}

/** The first MODEL_LABEL_MAX_LENGTH characters, without half of a surrogate pair at the cut. */
function cutName(name: string): string {
  if (name.length <= MODEL_LABEL_MAX_LENGTH) return name;
  const cut = name.slice(0, MODEL_LABEL_MAX_LENGTH);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}

/** The names one process labels by name, first come first kept (one per OperatorMetrics). */
export class ModelLabels {
  private readonly labelled = new Set<string>();
  private readonly maxNames: number;

  constructor(maxNames = MODEL_LABEL_MAX_NAMES) {
    this.maxNames = maxNames;
  }

  /** The label value to record `name` under. */
  valueFor(name: string): string {
    const decision = decideModelLabel(name, this.labelled, this.maxNames);
    if (decision.newlyLabelled) this.labelled.add(decision.value);
    return decision.value;
  }
}
