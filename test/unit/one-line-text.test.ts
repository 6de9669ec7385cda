// Text someone else wrote (a check's output, git's error, a model's words) in a message the
// operator writes to a status, a condition or an Event (text/one-line-text.ts): on one line,
// every hidden character spelled as the CLI spells it, and bounded after that spelling.
import { describe, expect, it } from 'vitest';
import { escapeForDisplay } from '../../operator/src/cli/display-escape.ts';
import { oneLineText } from '../../operator/src/text/one-line-text.ts';

const forged = 'FAIL\n\u001b]0;owned\u0007\n  Phase:\tSucceeded\n\u202e';

describe('oneLineText', () => {
  it('leaves a plain message as it is', () => {
    const message = 'Finished in 3 step(s): 2 file(s) changed. Raise spec.budget.timeout… (or not).';
    expect(oneLineText(message, 4096)).toBe(message);
  });

  it('shows a newline, ESC, BEL, a tab and a bidi override instead of keeping them: one line that forges none', () => {
    expect(oneLineText(forged, 4096)).toBe('FAIL^J^[]0;owned^G^J  Phase:^ISucceeded^J<U+202E>');
  });

  it('spells every hidden character as the CLI does on one line', () => {
    const text = 'a\u0000\t\r\n\u001b\u007f\u009b\u00ad\u061c\u180b\u200b\u2028\u2066\u2800\u3164\ufeff\u{e0041}\u{1d159}b';
    expect(oneLineText(text, 4096)).toBe(escapeForDisplay(text, 'inline').text);
  });

  it('is bounded after escaping, and never cuts a spelling or a surrogate pair in two', () => {
    expect(oneLineText('\n'.repeat(5000), 4096)).toBe('^J'.repeat(2048));
    expect(oneLineText(`abc${'\u202e'.repeat(10)}`, 12)).toBe('abc<U+202E>');
    expect(oneLineText('ab\u{1f600}cd', 3)).toBe('ab');
    expect(oneLineText('x'.repeat(10_000), 4096)).toHaveLength(4096);
  });

  it('changes nothing the second time: a message a source already escaped is not escaped twice', () => {
    const once = oneLineText(forged, 4096);
    expect(oneLineText(once, 4096)).toBe(once);
  });
});
