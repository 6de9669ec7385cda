// Which commit a remote names for a run's revision (workers/remote-refs.ts): git fetch's name
// rules, peeled tags, and a full commit id taken only as some ref's tip.
import { describe, expect, it } from 'vitest';
import { commitForRevision, parseLsRemote } from '../../operator/src/workers/remote-refs.ts';

const id = (digit: string) => digit.repeat(40);
const LS_REMOTE = [
  `${id('1')}\tHEAD`,
  `${id('1')}\trefs/heads/main`,
  `${id('2')}\trefs/heads/release`,
  `${id('3')}\trefs/tags/release`,
  `${id('4')}\trefs/tags/v1.0`,
  `${id('5')}\trefs/tags/v1.0^{}`,
  `${id('6')}\trefs/heads/feature/x`,
  `${id('7')}\trefs/pull/12/head`,
  'not a line',
  `xyz\trefs/heads/bad`,
  '',
].join('\n');
const refs = parseLsRemote(LS_REMOTE);

describe('commitForRevision', () => {
  it.each([
    ['no revision: the remote HEAD', undefined, id('1')],
    ['a branch by its short name', 'main', id('1')],
    ['a short name that is a tag and a branch: the tag, as git fetch takes it', 'release', id('3')],
    ['the branch spelt out', 'refs/heads/release', id('2')],
    ['an annotated tag: its peeled commit', 'v1.0', id('5')],
    ['a name with a slash', 'feature/x', id('6')],
    ['a ref under refs/ by its name below refs/', 'pull/12/head', id('7')],
    ['a full commit id that is a branch tip', id('6'), id('6')],
    ["a full commit id that is a tag's peeled commit", id('5'), id('5')],
    ['a full commit id that is no tip: not named (the run clones)', id('9'), undefined],
    ['an abbreviated id: a name, and no ref has it', '6666666', undefined],
    ['an unknown name', 'nope', undefined],
    ["a line that is not git's is no ref", 'bad', undefined],
  ])('%s', (_, revision, expected) => {
    expect(commitForRevision(refs, revision)).toBe(expected);
  });

  it('reads SHA-256 ids', () => {
    const long = 'a'.repeat(64);
    expect(commitForRevision(parseLsRemote(`${long}\tHEAD\n`), undefined)).toBe(long);
  });
});
