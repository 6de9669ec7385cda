// A string from an object anyone in the namespace may write (an ownerReference's kind or uid,
// a field of a hand-made transcript chunk), as part of a message the operator keeps, logs or
// writes to a status. The API server bounds no such field by itself (only a ConfigMap's data
// counts toward its size), and a reader that quoted a 1 MiB `kind` whole for each of 150
// forged chunks held 209 MB of messages, past the eval controller's 160 MiB heap. So a message
// quotes only its start, on one line: control and format characters shown as the CLI shows them
// (a newline as ^J), so a newline in it cannot start a line of the writer's choosing wherever
// the message goes (a run's status, an eval's failed graders, a log). Pure.
import { HIDDEN_CHARACTER, spelledCharacter } from '../text/hidden-character.ts';

/** Characters of a field a message quotes at most. */
export const SHORT_FIELD_CHARACTERS = 200;

// Every hidden character (text/hidden-character.ts: controls, format characters, separators,
// what shows as nothing), spelled as the CLI spells it: one decision, so a field a status
// quotes and the same text on a terminal show the same characters.
const HIDDEN = new RegExp(HIDDEN_CHARACTER, 'gu');

/** The field's first `max` characters, on one line, and how long it was when it was cut. */
export function shortField(value: unknown, max = SHORT_FIELD_CHARACTERS): string {
  const text = typeof value === 'string' ? value : String(value);
  let head = text.slice(0, max);
  // Not half a surrogate pair at the cut: a lone surrogate is not text.
  if (head.length < text.length && /[\ud800-\udbff]$/.test(head)) head = head.slice(0, -1);
  const shown = head.replace(HIDDEN, spelledCharacter);
  return head.length < text.length ? `${shown}… (cut: ${text.length} characters in all)` : shown;
}
