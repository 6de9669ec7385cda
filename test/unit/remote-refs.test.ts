// Which commit a remote names for a run's revision (workers/remote-refs.ts): git fetch's name
// rules, peeled tags and the tag object they go through, and a full commit id taken only as
// some ref's tip.
import { describe, expect, it } from 'vitest';
import { commitForRevision, parseLsRemote, refFetched, revisionRefIn } from '../../operator/src/workers/remote-refs.ts';

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
/** A commit the remote names, through the tag object `tag` if given. */
const at = (commit: string, tag?: string) => ({ commit, tag });

describe('commitForRevision', () => {
  it.each([
    ['no revision: the remote HEAD', undefined, at(id('1'))],
    ['a branch by its short name', 'main', at(id('1'))],
    ['a short name that is a tag and a branch: the tag, as git fetch takes it', 'release', at(id('3'))],
    ['the branch spelt out', 'refs/heads/release', at(id('2'))],
    ['an annotated tag: its peeled commit, through its tag object', 'v1.0', at(id('5'), id('4'))],
    ['an annotated tag spelt out', 'refs/tags/v1.0', at(id('5'), id('4'))],
    ['a name with a slash', 'feature/x', at(id('6'))],
    ['a ref under refs/ by its name below refs/', 'pull/12/head', at(id('7'))],
    ['a full commit id that is a branch tip', id('6'), at(id('6'))],
    ["a full commit id that is a tag's peeled commit: the commit alone, as its fetch brings no tag", id('5'), at(id('5'))],
    ["a full id that is an annotated tag's object: its peeled commit, through it", id('4'), at(id('5'), id('4'))],
    ['a full commit id that is no tip: not named (the run clones)', id('9'), undefined],
    ['an abbreviated id: a name, and no ref has it', '6666666', undefined],
    ['an unknown name', 'nope', undefined],
    ["a line that is not git's is no ref", 'bad', undefined],
  ])('%s', (_, revision, expected) => {
    expect(commitForRevision(refs, revision)).toEqual(expected);
  });

  it('names no commit for a full id two refs disagree about (one peels it as a tag object, one does not)', () => {
    const disagreeing = parseLsRemote(
      [`${id('4')}\trefs/tags/v1.0`, `${id('5')}\trefs/tags/v1.0^{}`, `${id('4')}\trefs/heads/odd`].join('\n'),
    );
    expect(commitForRevision(disagreeing, id('4'))).toBeUndefined();
    // The control: without the ref that does not peel it, the tag object names its commit.
    disagreeing.delete('refs/heads/odd');
    expect(commitForRevision(disagreeing, id('4'))).toEqual(at(id('5'), id('4')));
  });

  it('reads SHA-256 ids', () => {
    const long = 'a'.repeat(64);
    expect(commitForRevision(parseLsRemote(`${long}\tHEAD\n`), undefined)).toEqual(at(long));
  });
});

describe('refFetched: the ref `git fetch origin <revision>` took, from the FETCH_HEAD line it wrote', () => {
  const line = (description: string) => `${id('1')}\t\t${description}https://git.example/acme/app.git\n`;
  it.each([
    ['a branch', 'release', line("branch 'release' of "), 'refs/heads/release'],
    ['a tag (git takes it before a branch of the same name)', 'release', line("tag 'release' of "), 'refs/tags/release'],
    ['a branch spelt out', 'refs/heads/release', line("branch 'release' of "), 'refs/heads/release'],
    ['a branch below refs/', 'heads/release', line("branch 'release' of "), 'refs/heads/release'],
    ['a branch with a slash', 'feature/x', line("branch 'feature/x' of "), 'refs/heads/feature/x'],
    ['another kind of ref, spelt out', 'refs/pull/12/head', line("'refs/pull/12/head' of "), 'refs/pull/12/head'],
    ['another kind of ref, below refs/', 'pull/12/head', line("'refs/pull/12/head' of "), 'refs/pull/12/head'],
    ['a remote-tracking branch', 'origin/main', line("remote-tracking branch 'origin/main' of "), 'refs/remotes/origin/main'],
    ['no revision (the remote HEAD): none', undefined, line(''), undefined],
    ['HEAD by name: none', 'HEAD', line(''), undefined],
    ['a commit id: none', id('1'), line(''), undefined],
    ['a line naming a ref the revision cannot stand for: none', 'release', line("branch 'main' of "), undefined],
    ['no line: none', 'release', '', undefined],
  ])('%s', (_, revision, fetchHead, expected) => {
    expect(refFetched(fetchHead, revision)).toBe(expected);
  });
});

describe('revisionRefIn: the ref a revision stands for among the remote refs, as the clone records it', () => {
  it.each([
    ['a branch', 'main', 'refs/heads/main'],
    ['a name a tag and a branch have: the tag', 'release', 'refs/tags/release'],
    ['the branch spelt out', 'refs/heads/release', 'refs/heads/release'],
    ['no revision: none', undefined, undefined],
    ['HEAD: none', 'HEAD', undefined],
    ['a commit id: none', id('6'), undefined],
    ['an unknown name: none', 'nope', undefined],
  ])('%s', (_, revision, expected) => {
    expect(revisionRefIn(refs, revision)).toBe(expected);
  });
});
