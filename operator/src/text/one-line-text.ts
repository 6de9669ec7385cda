// Text someone else wrote (a check's or a setup script's output, git's error naming a directory
// of the repository, a model's words, a pod's message) as part of a message the operator writes
// where people and tools read it: status.message, a condition's message, an Event. `kubectl
// describe` prints those escaping only ESC and CR, so a newline in one started a line of the
// writer's choosing (Status keys are sorted: a forged `Phase: Succeeded` printed above the real
// `Phase: Failed`), and a bidi override or a C1 control reached the terminal; Argo CD and Flux
// show condition messages too. So such a message is one line, every hidden character spelled as
// the kubectl plugin spells it on one line (a newline as ^J, ESC as ^[, U+202E as <U+202E>), and
// it is bounded after that spelling, which makes a character up to nine long. The spelling is
// printable ASCII: escaping a message again changes nothing, so a source that already escaped
// its part (shortField) is not escaped twice. Pure.
import { HIDDEN_CHARACTER, spelledCharacter } from './hidden-character.ts';

// Split at each hidden character, kept: plain text at even indices, one hidden character at odd ones.
const AT_HIDDEN = new RegExp(`(${HIDDEN_CHARACTER})`, 'u');
const ENDS_IN_HIGH_SURROGATE = /[\ud800-\udbff]$/;

/** The text on one line, hidden characters spelled out, in at most `max` characters: a spelling is kept whole or left out. */
export function oneLineText(text: string, max: number): string {
  // Spelling only lengthens: nothing past the first `max` characters can be shown, so a 1 MiB output is not escaped whole.
  // Not half a surrogate pair at a cut, here or below: a lone surrogate is not text.
  const head = text.length > max ? text.slice(0, max).replace(ENDS_IN_HIGH_SURROGATE, '') : text;
  const pieces = head.split(AT_HIDDEN);
  let shown = '';
  for (const [index, piece] of pieces.entries()) {
    const spelled = index % 2 === 1 ? spelledCharacter(piece) : piece;
    const room = max - shown.length;
    if (spelled.length <= room) {
      shown += spelled;
      continue;
    }
    // Plain text is cut; a spelling is kept whole or left out.
    if (index % 2 === 0) shown += spelled.slice(0, room).replace(ENDS_IN_HIGH_SURROGATE, '');
    break;
  }
  return shown;
}
