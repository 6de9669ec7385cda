// The pull request body a run posts by default, as the token's user: the model's final message
// in it acts on nothing. It was posted as it came: `Closes other/repo#1` closed another
// repository's issue at the merge, `@org/team` notified a team. GitHub and Gitea act on
// mentions and references outside code only, and GitLab also matches its closing pattern
// against the raw text, code blocks included: the body keeps the model's text in a fenced block
// nothing in it can close, and breaks GitLab's closing statements. A line of it that starts with
// `/` (a path, or `/close`) is shown as written, and no raw line starts a GitLab quick action. Pure.
import { describe, expect, it } from 'vitest';
import { inertModelText } from '../../operator/src/publish/inert-model-text.ts';
import { defaultBody, type PlanInput } from '../../operator/src/publish/publish-plan.ts';
import { withoutQuickActions } from '../../operator/src/publish/without-quick-actions.ts';
import { fencedAndOutside, gitlabCommandLines } from '../support/forge-body-reading.ts';

const input = (summary: string): PlanInput => ({
  namespace: 'agents',
  name: 'fix-login',
  uid: 'uid-1',
  task: 'Fix the login bug',
  publish: { branch: 'chamvi/{run}', pullRequest: { draft: false, labels: [] } },
  summary,
  filesChanged: 2,
  insertions: 40,
  deletions: 3,
  steps: 7,
  totalTokens: 12345,
});

/**
 * GitLab's default issue_closing_pattern (gitlab.yml), its %{issue_ref} an address or an
 * issue reference (`#1`, `group/project#1`), as GitLab matches it on a description's raw text.
 */
const GITLAB_CLOSING =
  /\b((?:[Cc]los(?:e[sd]?|ing)|\b[Ff]ix(?:e[sd]|ing)?|\b[Rr]esolv(?:e[sd]?|ing)|\b[Ii]mplement(?:s|ed|ing)?)(:?) +(?:(?:issues? +)?(?:https?:\/\/\S+|(?:[\w.\/-]+)?#\d+)(?:(?: *,? +and +| *,? *)?)|([A-Z][A-Z0-9_]+-\d+))+)/;

/**
 * GitLab's default issue_closing_pattern, its %{issue_ref} any reference at all: newer GitLab
 * closes bracket references (`[issue:group/project/42]`, `[work_item:g/p/7]`) too, and whatever
 * it reads next, it reads only after ASCII spaces.
 */
const GITLAB_KEYWORD = /\b(?:[Cc]los(?:e[sd]?|ing)|\b[Ff]ix(?:e[sd]|ing)?|\b[Rr]esolv(?:e[sd]?|ing)|\b[Ii]mplement(?:s|ed|ing)?):? +\S/;

/**
 * What a forge acts on in text it renders: a mention, a reference to an issue or a pull request
 * (`#1`, `o/r#1`, GitLab's `!1`, GitHub's `GH-1`) or an address, which a closing keyword before it
 * makes a closing statement.
 */
const ACTIVE = /@[\w-]|#\d|!\d|\bGH-\d|https?:\/\//i;

describe('the default pull request body', () => {
  const hostile = 'Closes other/repo#1 @org/team\nFixes #2, fixes: https://forge.example/other/repo/issues/3 and Resolves issue #4';

  it('holds the model text where no forge acts on it: in a fenced block, with no GitLab closing statement anywhere', () => {
    // The control: the model's text as it was posted matches what forges act on.
    expect(hostile).toMatch(GITLAB_CLOSING);
    expect(hostile).toMatch(ACTIVE);
    const body = defaultBody(input(hostile));
    const { fenced, outside } = fencedAndOutside(body);
    expect(outside.join('\n')).not.toMatch(ACTIVE);
    expect(body).not.toMatch(GITLAB_CLOSING);
    // It reads the same: the fenced lines are the model's, their spaces no-break where a closing statement began.
    expect(fenced.join('\n').replaceAll('\u00a0', ' ')).toBe(hostile);
    expect(body).toContain('2 files changed, +40 −3; 7 steps, 12345 tokens');
  });

  it('cannot be closed by the text it holds: a fence in the model text is shorter than the one around it', () => {
    const breakout = 'Done.\n```\n\n@org/team please merge\n````\nCloses #9';
    const { fenced, outside } = fencedAndOutside(defaultBody(input(breakout)));
    expect(outside.join('\n')).not.toMatch(ACTIVE);
    expect(fenced.join('\n').replaceAll('\u00a0', ' ')).toBe(breakout);
  });

  it('shows the words of a summary that closes nothing as they were, the space after each closing keyword a no-break space', () => {
    const summary = 'This fixes the bug. Fixed the expiry check; closes the gap in `login()` and resolves nothing else.';
    const { fenced } = fencedAndOutside(defaultBody(input(summary)));
    expect(fenced.map((line) => line.replaceAll('\u00a0', ' '))).toEqual([summary]);
    // Every keyword's space, whatever follows it: which references GitLab closes is not this file's to list.
    expect(fenced[0]).toMatch(/^This fixes\u00a0the bug\. Fixed\u00a0the .*; closes\u00a0the .* resolves\u00a0nothing/);
    // Words that only begin like a keyword keep their spaces.
    expect(fencedAndOutside(defaultBody(input('A fixture and a prefix of closest matches')))).toMatchObject({
      fenced: ['A fixture and a prefix of closest matches'],
    });
  });

  it('says the agent gave no message, with no empty block, when it gave none', () => {
    const body = defaultBody(input('  \n'));
    expect(body).toMatch(/^\(The agent gave no final message\.\)\n/);
    expect(body).not.toContain('```');
  });

  it('makes a fence one backtick longer than the longest run in the text, at least three, the block indented by one space', () => {
    expect(inertModelText('a `b` c')).toBe(' ```text\n a `b` c\n ```');
    expect(inertModelText('``````x')).toBe(' ```````text\n ``````x\n ```````');
  });

  it('shows the lines that start with / as written (no escape), and GitLab finds no quick action in any', () => {
    const summary = 'Changed two files:\n/src/app/login.ts: check the token\n/close\n\r/approve\n\n/target_branch release';
    // The control: the model's text as it is holds commands GitLab would run.
    expect(gitlabCommandLines(summary)).toHaveLength(4);
    const body = defaultBody(input(summary));
    expect(gitlabCommandLines(body)).toEqual([]);
    // As GitLab keeps it: without its carriage return.
    expect(fencedAndOutside(body).fenced.join('\n')).toBe(summary.replaceAll('\r', ''));
    expect(body).not.toContain('\\/');
  });
});

describe('the model text GitLab is sent', () => {
  // GitLab deletes every carriage return before it reads a description, and so does the body
  // sent to it (without-quick-actions.ts, after this): a `\r` that split a closing statement when
  // it was defused joined it again, and `Fixes\r other/repo#42` closed that issue at the merge.
  const hostile = [
    'Done. Fixes\r other-group/other-project#42',
    'Fi\rxes #1',
    'Fixes #\r1',
    'Closes:\r\r https://gitlab.example/g/p/-/issues/7',
    'Resolves\r issue\r #3 and Implements\r\n #4',
    'fixes \r#5, closes\r  \r #6',
    'Closes JIRA\r-7',
    'Fixes #8',
  ];

  it.each(hostile)('holds no closing statement GitLab reads, and is as GitLab keeps it: %j', (summary) => {
    // The control: the text as GitLab reads it (its carriage returns deleted) closes an issue.
    expect(summary.replaceAll('\r', '')).toMatch(GITLAB_CLOSING);
    expect(withoutQuickActions(defaultBody(input(summary)))).not.toMatch(GITLAB_CLOSING);
    // The pass the GitLab body goes through after it changes nothing more of it: no carriage return is left to delete.
    const inert = inertModelText(summary);
    expect(withoutQuickActions(inert)).toBe(inert);
    expect(inert).not.toContain('\r');
  });

  // GitLab's bracket references, which newer GitLab's closing extractor may close: a lookahead
  // for the references known here (`#1`, an address, `JIRA-1`) did not see them, and left the
  // keyword's ASCII space. No keyword is followed by one now, whatever comes after it.
  const bracketed = [
    'Closes [issue:other-group/other-project/42]',
    'Fixes [work_item:g/p/7]',
    'fixes:  [issue:g/p/1] and Implements\r [work_item:g/p/2]',
  ];

  it.each(bracketed)('leaves no closing keyword followed by an ASCII space: %j', (summary) => {
    // The control: as GitLab reads it, a keyword, ASCII spaces and a bracket reference.
    expect(summary.replaceAll('\r', '')).toMatch(GITLAB_KEYWORD);
    const sent = withoutQuickActions(defaultBody(input(summary)));
    expect(sent).not.toMatch(GITLAB_KEYWORD);
    expect(fencedAndOutside(sent).fenced.join('\n').replaceAll('\u00a0', ' ')).toBe(summary.replaceAll('\r', ''));
    const inert = inertModelText(summary);
    expect(withoutQuickActions(inert)).toBe(inert);
  });
});
