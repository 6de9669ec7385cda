// The anchors of a git grep / grep pattern, widened to where read_file shows lines begin and
// end (past a byte order mark, before a `\r`), and left alone where they are not anchors.
import { describe, expect, it } from 'vitest';
import { anchorsAsReadFileShows } from '../../sandbox-image/toolbox/line-anchors.ts';

const BOM = '\uFEFF';

describe('anchorsAsReadFileShows', () => {
  it.each<[string, string]>([
    ['x;$', 'x;[\r]?$'],
    ['^import', `^(${BOM})?import`],
    ['^a|b$', `^(${BOM})?a|b[\r]?$`],
    ['(^a)$', `(^(${BOM})?a)[\r]?$`],
    // In a bracket a backslash is an ordinary character: `[\]` holds it, and the $ after is an anchor.
    ['[\\]$', '[\\][\r]?$'],
    // Only the quantified anchor stays; the others in the pattern are widened.
    ['^*a|^b$', `^*a|^(${BOM})?b[\r]?$`],
    // A quantifier after a group holding an anchor repeats the whole group, widened or not.
    ['(^a)?b$?', `(^(${BOM})?a)?b$?`],
  ])('widens the anchors of %j', (pattern, expected) => {
    expect(anchorsAsReadFileShows(pattern)).toBe(expected);
  });

  it.each([
    ['an escaped dollar', 'cost \\$5'],
    ['a dollar in a bracket', 'cost [$]5'],
    ['a negated bracket', '[^a]b'],
    ['a bracket that starts with ]', '[]$^]x'],
    ['a negated bracket that starts with ]', '[^]$]x'],
    ['a character class holding ]', '[[:alpha:]$]'],
    ['an equivalence class', '[[=a=]^]'],
    ['no anchors', 'a.b*c'],
    ['an unterminated bracket (the engine reports it)', 'a[$'],
    // A quantifier after an anchor makes it optional; after the widening it would repeat the BOM group or the `$` alone.
    ['^ with * after it', '^*s'],
    ['^ with ? after it', '^?a'],
    ['^ with + after it', '^+a'],
    ['^ with an interval after it', '^{1}a'],
    ['$ with ? after it', 'a$?b'],
    ['$ with * after it', 'a$*'],
  ])('leaves %s as written', (_, pattern) => {
    expect(anchorsAsReadFileShows(pattern)).toBe(pattern);
  });

  it('keeps ^ as written when the pattern has a back-reference, whose group number the BOM group would shift', () => {
    expect(anchorsAsReadFileShows('^(a)\\1$')).toBe('^(a)\\1[\r]?$');
    // A \1 inside a bracket is no back-reference.
    expect(anchorsAsReadFileShows('^[\\1]')).toBe(`^(${BOM})?[\\1]`);
  });
});
