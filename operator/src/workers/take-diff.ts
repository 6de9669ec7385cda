// The run's change, taken from the sandbox for the finalize job and the diff snapshots:
// everything against the commit the run cloned (else the model's HEAD), new files included
// (intent-to-add), cut at LIMITS.fullDiff. Against the clone's commit, not HEAD: a model that
// commits its work (told not to, it sometimes does) moves HEAD, and a diff against HEAD then
// lost what it had committed. One clean shell does it all: each call is a round trip through
// pods/exec and a shell started in the pod, and a run takes its diff at least twice. No counts
// are taken here: status.result counts the diff the operator keeps (keep-diff.ts, with
// reconcile/kept-diff.ts's countDiff), since what git in the sandbox prints is the model's to forge.
import { LIMITS } from '../api/index.ts';
import type { CallOptions, Sandbox } from '../sandbox/sandbox.ts';
import type { CleanShell } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import { boundText } from '../record/transcript-entry.ts';
import { isCommitId } from '../api/commit-id.ts';
import { isUtf8Diff } from '../reconcile/not-utf8-diff.ts';
import { reachesDiffCut } from '../reconcile/diff-config-map.ts';
import { DiffBaseMissingError } from './errors/diff-base-missing-error.ts';
import { OPERATOR_COMMAND_PREFIX } from './operator-command-prefix.ts';

interface BashResult {
  exitCode: number | null;
  timedOut: boolean;
  stdout: string;
  stdoutTruncated: boolean;
  stdoutLog: string;
  stderr: string;
}

/**
 * Rename detection pinned on, copies off, whatever the sandbox's .git/config says: a copy is
 * refused where a diff is applied (diff-refusal.ts), so the model's `diff.renames=copies` must
 * not make its run's diff one that cannot be published or continued. So are the `a/` and `b/`
 * prefixes (`diff.noprefix`, `diff.mnemonicPrefix`, `diff.relative`), text conversion and the
 * fsmonitor hook: where a diff is applied, git must change exactly the files its headers name
 * (diff-refusal.ts refuses it otherwise, as it must: code in the sandbox can write the output).
 */
const GIT_DIFF =
  'git -c diff.renames=true -c diff.noprefix=false -c diff.mnemonicPrefix=false -c core.fsmonitor=false ' +
  'diff --no-color --no-ext-diff --no-textconv --no-relative --src-prefix=a/ --dst-prefix=b/';

/**
 * On stderr, one line: the whole diff's size in bytes (to tell a cut diff). On stdout, the
 * diff itself up to the limit, and nothing else: when it is long, the toolbox keeps it whole
 * in a log read back as base64, whose bound is the same 1 MiB. No `--shortstat`: a `git` shim
 * or alias in the sandbox prints any counts it likes (and files can change between two git
 * runs), and filesChanged chose the run's message; the operator counts the diff it keeps.
 *
 * Nothing of the model's .git is trusted but its objects. The take's git runs on a repository
 * of its own (GIT_DIR, made fresh by `git init` for each take) with the workspace as its work
 * tree and the workspace's .git/objects as its object store, so the model's .git/config
 * (core.worktree at a shadow directory, a filter, a promisor remote), hooks (post-index-change
 * ran during the add), info/attributes, info/exclude and refs/replace (GIT_NO_REPLACE_OBJECTS as
 * well) choose nothing. Its index is made from the base (`read-tree`), never copied from the
 * model's: an entry marked skip-worktree or assume-unchanged made the diff show the blob the
 * model staged, not the file the verify check graded, and finalize kept and published that blob
 * (one with stat data forged to match the file named the staged blob on its `index` line). Nor
 * is the model's index locked or changed (a lock a killed take or the model's own git left made
 * every later add fail). `update-index --refresh` then reads
 * every tracked file once (the cost of owning the stat data) so the add and the diff need not.
 * New files are taken as before: every file not ignored by the worktree's .gitignore files
 * (intent-to-add); the model's own `git add -f` of an ignored file no longer counts.
 *
 * The private repository is in /tmp, never $TMPDIR (the run's env may point that into the
 * workspace), and when /tmp has no room (read-only, full: a 1 GiB emptyDir the model can fill)
 * in the model's .git, which is never part of the work tree. Ones a SIGKILL left (the trap does
 * not run then) are removed by the next take. Both are the sandbox's code's to write too (same
 * user): git writes there only by lock file and rename, which neither follows a planted link
 * nor opens a planted FIFO. `git add --ignore-errors`: a path git cannot add (a nested
 * repository with no commit, from `git init sub`) must not keep the other new files out; nor
 * fail the take, which finalize would retry into AgentFailed. git that fails outright (exit
 * over 1: .git/objects gone, a workspace file it cannot read) fails the take: it printed no
 * diff, which was kept as a run that changed nothing. So does an add that could not open a
 * directory (UNREADABLE_DIRECTORY): the diff lacked its files. A base the objects no longer
 * hold fails it too (DiffBaseMissingError), where it once fell back to HEAD: a base the model
 * chose.
 */

/**
 * The take's add. Its exit 1 is paths --ignore-errors skipped (a nested repository with no
 * commit); over 1 is git giving up (it cannot lock or write its index). LC_ALL=C: its words are
 * read (UNREADABLE_DIRECTORY), and the run's env may ask git for another language (LANGUAGE).
 */
const GIT_ADD = 'LC_ALL=C git -c core.splitIndex=false -c core.fsmonitor=false add --ignore-errors -A --intent-to-add .';

/**
 * What git add warns of a directory it cannot open (mode 000 to the take's user): it exits 0,
 * and every file under the directory is missing from the diff, which was kept as the whole change.
 * Only for want of permission (UNREADABLE_BECAUSE): a directory deleted while git read its parent
 * (a dev server's or a test's temporary one) warns the same, `No such file or directory`, and
 * none of its files can be missing.
 */
const UNREADABLE_DIRECTORY = 'could not open directory';
const UNREADABLE_BECAUSE = 'Permission denied';

/**
 * The add, its status in S and what it said in A, for the failure's message: its first line
 * (git's reason: the advice after it is long), the first warning of UNREADABLE_DIRECTORY for
 * UNREADABLE_BECAUSE (wherever it came: an embedded repository's hints after it would push it out of a tail), and
 * the last 250 bytes. Read through a pipe, not a file in /tmp, whose name the sandbox's code
 * could replace with a link or a FIFO.
 */
const addInto =
  `A=$(${GIT_ADD} 2>&1 >/dev/null | awk '!d && index($0, "${UNREADABLE_DIRECTORY}") && index($0, "${UNREADABLE_BECAUSE}") { d = substr($0, 1, 400) " ... " } ` +
  `NR == 1 { f = substr($0, 1, 200) " "; next } ` +
  `{ t = substr(t $0 " ", length(t $0 " ") - 249) } END { printf "%s%s%s", f, d, t }'; exit "\${PIPESTATUS[0]}"); S=$?`;

/** The command's exit status when git failed or left files out; its stderr then says why (after the size line). */
const GIT_FAILED_EXIT = 3;
/** The command's exit status when the repository's objects do not hold the base commit. */
const BASE_MISSING_EXIT = 4;

/** The repository's object format, and the base as the command names it: `$B` once the command has set it. */
const baseStep = (base: string) =>
  base === 'HEAD'
    ? [
        // No recorded base (a run from before the operator kept one): the model's HEAD, and the
        // format its config names (which, for a config git cannot parse, fails the take). Read
        // with the model's .git only here, and neither peeled nor looked up (a promisor remote in
        // its config would fetch a missing object): the lookup is the private repository's.
        `F=$(git --git-dir="$W/.git" rev-parse --show-object-format 2>&1) || { printf '0\\ngit rev-parse exited %s: %s' "$?" "\${F:0:300}" >&2; exit ${GIT_FAILED_EXIT}; }`,
        `B=$(git --git-dir="$W/.git" rev-parse --verify -q HEAD) || exit ${BASE_MISSING_EXIT}`,
      ]
    : [`B=${base}`, `F=${base.length === 64 ? 'sha256' : 'sha1'}`];

/** git init's option for the format: none for SHA-1, the default, which a git before 2.29 (a local run's) knows no option for. */
const FORMAT_OPTION = 'X=; [ "$F" = sha1 ] || X="--object-format=$F"';

const takeDiffCommand = (base: string) =>
  [
    OPERATOR_COMMAND_PREFIX,
    // The workspace: every operator command starts there (bash-script.ts's prelude).
    'W=$(pwd -P)',
    ...baseStep(base),
    FORMAT_OPTION,
    `[ -d "$W/.git/objects" ] || { printf '0\\nthe workspace has no .git/objects directory' >&2; exit ${GIT_FAILED_EXIT}; }`,
    // Private repositories (and index copies of takes before them) a SIGKILL left behind
    // (changed over 2 minutes ago: a take's bash runs at most 120 s). find opens nothing it
    // matches, and rm removes a planted link or FIFO itself, never what it leads to.
    `find /tmp "$W/.git" -maxdepth 1 \\( -name "chamvi-diff-index.*" -o -name "chamvi-diff-git.*" \\) -cmin +2 -exec rm -rf -- {} + 2>/dev/null`,
    'T=()',
    `trap 'rm -rf -- "\${T[@]}" 2>/dev/null' EXIT`,
    'export GIT_NO_REPLACE_OBJECTS=1 GIT_OBJECT_DIRECTORY="$W/.git/objects" GIT_WORK_TREE="$W"',
    'S=128',
    'A=',
    // In /tmp, else in the model's .git: git that gives up on one (no room for the repository
    // or its index, a planted lock) left every new file out of the diff, kept as the whole change.
    'for P in /tmp "$W/.git"; do ' +
      'D=$(mktemp -d "$P/chamvi-diff-git.XXXXXX" 2>/dev/null) || { A="no directory for git in $P"; continue; }; ' +
      'T+=("$D"); ' +
      // A link put in its place (same user) would have git init write into what it leads to, a
      // directory of the workspace included, and the diff would carry git's files. The check
      // leaves a moment before the init; a link planted then writes only files the model could.
      '{ [ -d "$D" ] && [ ! -L "$D" ]; } || { A="$D is no longer the directory mktemp made"; continue; }; ' +
      'export GIT_DIR="$D"; ' +
      // --template=: no hooks, no info/exclude. The objects and the work tree are the take's
      // only, not the new repository's: git init would write them into its config.
      'A=$(env -u GIT_DIR -u GIT_WORK_TREE -u GIT_OBJECT_DIRECTORY git init -q --bare --template= $X "$D" 2>&1 >/dev/null) || continue; ' +
      `git cat-file -e "$B^{commit}" 2>/dev/null || exit ${BASE_MISSING_EXIT}; ` +
      'A=$(LC_ALL=C git read-tree "$B" 2>&1 >/dev/null) || { S=128; continue; }; ' +
      'git -c core.fsmonitor=false update-index -q --refresh >/dev/null 2>&1; ' +
      `${addInto}; ` +
      '[ "$S" -le 1 ] && break; ' +
      'done',
    // The size, and whether git could diff at all: one that cannot (a workspace file it cannot
    // read) printed nothing, an empty diff taken for a run that changed no file. Nor is a diff
    // without a directory git could not open the change. The reasons (the add's words and the
    // diff's) on stderr, after the size line, and the take fails.
    `N=$(${GIT_DIFF} "$B" 2>/dev/null | wc -c; exit "\${PIPESTATUS[0]}") && [ "$S" -le 1 ] && [[ $A != *"${UNREADABLE_DIRECTORY}"*"${UNREADABLE_BECAUSE}"* ]] || { printf '0\\ngit add exited %s%s; ' "$S" "\${A:+: $A}" >&2; { ${GIT_DIFF} "$B" 2>&1 >/dev/null; echo "git diff exited $?"; } | tail -c 350 >&2; exit ${GIT_FAILED_EXIT}; }`,
    `printf '%s\\n' "$N" >&2`,
    `${GIT_DIFF} "$B" | head -c ${LIMITS.fullDiff}`,
  ].join('; ');

/** The bash's own timeout when the caller gives the call no deadline (the sandbox's default then bounds it). */
const BASH_TIMEOUT_MS = 120_000;
/** How long before the call's deadline the bash is stopped: time for the toolbox to answer. */
// The session's start and its wait (up to 2 s: bash-session.ts's OUTPUT_HOLDERS_WAIT) for what
// holds the command's output open both come after the bash's timeout, inside the call's deadline.
const ANSWER_MARGIN_MS = 10_000;

/**
 * The bash's timeout, inside the call's deadline: a call unanswered at its deadline discards the
 * toolbox session (serve-session.ts), so a slow take (a big repository) must be stopped by the
 * toolbox and answered as timed out, not left running past the deadline. Pure.
 */
export function bashTimeoutWithin(deadlineMs: number | undefined): number {
  if (deadlineMs === undefined) return BASH_TIMEOUT_MS;
  const margin = Math.min(ANSWER_MARGIN_MS, deadlineMs / 2);
  return Math.max(1, Math.min(BASH_TIMEOUT_MS, Math.floor(deadlineMs - margin)));
}

/** The call's options, and how its clean shell treats what the model left running (CleanShell). */
export interface TakeDiffOptions extends CallOptions {
  clean?: CleanShell;
}

/**
 * What git said when it failed (the command's stderr after its size line), bounded and on one
 * line: the sandbox wrote it, and it goes into a log line and the run's message. git fails alike
 * on a broken .git and on a workspace file or directory it cannot read (mode 000 to the take's
 * user, a FIFO where a file was): its words, which name the file, say which.
 */
function gitFailure(stderr: unknown): string {
  const said = typeof stderr === 'string' ? stderr.split('\n').slice(1).join(' ').replace(/\s+/g, ' ').trim() : '';
  return `git could not read the repository or a file in the workspace (${boundText(said, 1000).text || 'it said nothing'}): the change cannot be taken from it`;
}

/** A commit name safe in the command: a full SHA-1 or SHA-256, else HEAD. */
const baseOf = (revision: string | undefined) => (isCommitId(revision) ? revision : 'HEAD');

/** The run's change as taken: see KeptDiff (reconcile/kept-diff.ts) for truncated and notUtf8. */
export interface TakenDiff {
  diff: string;
  truncated: boolean;
  /** Bytes of the change are not UTF-8 (a file in another encoding): diff shows them as U+FFFD (reconcile/not-utf8-diff.ts). */
  notUtf8: boolean;
}

/**
 * The size from the command's stderr (its first line), the diff from its stdout (`taken`, as
 * decoded) and `rawBytes`, how many bytes the command wrote there (unset: the text's own UTF-8
 * bytes, which they are when it holds no U+FFFD). Whether the change is cut is decided from
 * the bytes, not the text: each byte that is not UTF-8 decodes as a three-byte U+FFFD, so such
 * a change well under the cut has text over it, which was said to be a change over 1 MiB. The
 * sandbox wrote both (code there can write the toolbox's answer line), so the text is cut at
 * LIMITS.fullDiff here too, the ConfigMap's bound (a 1 MiB change of such bytes is 3 MiB of
 * text, of which the first 1 MiB is kept; withDiffNote says so), and the size may say a change
 * is cut but never that one as long as the cut is whole.
 */
function parseTakenDiff(header: unknown, taken: unknown, utf8: boolean, rawBytes?: number): TakenDiff {
  if (typeof header !== 'string' || typeof taken !== 'string') throw new Error('taking the diff failed: the answer is not text');
  const [bytesLine = ''] = header.split('\n', 1);
  return {
    diff: boundText(taken, LIMITS.fullDiff).text,
    // A change as long as the cut is taken for a cut whatever the size line says, by the test
    // isCutDiff applies (reachesDiffCut): a forged size made the cut read as whole.
    truncated: reachesDiffCut(rawBytes ?? Buffer.byteLength(taken, 'utf8')) || reachesDiffCut(Number(bytesLine.trim()) || 0),
    notUtf8: !utf8,
  };
}

/** The answer's fields, when it is an object; the sandbox wrote it, so it may be anything. */
const objectOf = (result: unknown): Record<string, unknown> | undefined =>
  typeof result === 'object' && result !== null ? (result as Record<string, unknown>) : undefined;

/**
 * The change against `base` (the commit the run cloned; the model's HEAD when unknown; a base
 * the repository no longer holds throws DiffBaseMissingError), new files included
 * (intent-to-add), cut at 1 MiB, and marked when its bytes are not UTF-8 text. The bash stops
 * before options.timeoutMs (bashTimeoutWithin). options.clean: 'keep-jobs' (the default, a
 * snapshot) leaves what the model runs running; true (finalize's take) sweeps it first.
 */
export async function takeDiff(sandbox: Sandbox, options: TakeDiffOptions = {}, base?: string): Promise<TakenDiff> {
  const { clean = 'keep-jobs', ...callOptions } = options;
  const command = takeDiffCommand(baseOf(base));
  // A snapshot's clean shell keeps what the model runs: a snapshot follows every step that may
  // change files (diff-snapshot.ts), and the model's background jobs (a dev server) outlive
  // steps. Finalize's take sweeps them (the model is done; a daemon left running would outlast a
  // days-long wait for the publish approval), as the verify check does (verify-work.ts).
  // In the toolbox's own environment, not the run's (operatorEnvironment): the take runs after
  // every step, whatever the run gates, and the run's PATH (/workspace/.venv/bin first) ran the
  // repository's git for it, its HOME=/workspace a .gitconfig the model wrote (a clean filter
  // the add ran). The command clears the run's git environment and sets its repository itself
  // too (OPERATOR_COMMAND_PREFIX).
  const response = await sandbox.call(
    { tool: 'bash', input: { command, timeoutMs: bashTimeoutWithin(callOptions.timeoutMs) }, clean, operatorEnvironment: true },
    callOptions,
  );
  if (!response.ok) throw new Error(`taking the diff failed: ${response.error.code}: ${response.error.message}`);
  // The protocol lets an answer be {"ok":true,"result":null}: a result read without this check
  // threw a TypeError, which finalize retried until the run ended AgentFailed.
  const out = objectOf(response.result) as Partial<BashResult> | undefined;
  if (!out) throw new Error('taking the diff failed: the answer is not a bash result');
  // Stopped at its timeout, git printed part of the diff at most, which is not the run's change.
  if (out.timedOut === true) throw new Error('taking the diff failed: git timed out (the repository may be too large to diff in time)');
  // git could not add or diff: what it printed (nothing) is not the run's change. Nor is what a
  // command that did not end as the take ends printed (killed by the model's code, exitCode null).
  if (out.exitCode === GIT_FAILED_EXIT) throw new Error(`taking the diff failed: ${gitFailure(out.stderr)}`);
  if (out.exitCode === BASE_MISSING_EXIT) throw new DiffBaseMissingError(baseOf(base));
  if (out.exitCode !== 0) throw new Error(`taking the diff failed: its command exited ${String(out.exitCode)}`);
  // The toolbox decodes the output as UTF-8, each byte it cannot as U+FFFD: output without one
  // is the bytes git wrote. With one (a file in another encoding, or a U+FFFD in a UTF-8 file),
  // the bytes in the log decide.
  const replaced = typeof out.stdout === 'string' && out.stdout.includes('\uFFFD');
  if (out.stdoutTruncated !== true && !replaced) return parseTakenDiff(out.stderr, out.stdout, true);
  // The log holds the bytes, and all of a long stream, of which the result shows only head and tail.
  if (typeof out.stdoutLog !== 'string') throw new Error('taking the diff failed: the answer names no log to read the diff from');
  const read = await sandbox.call({ tool: 'read_file', input: { path: out.stdoutLog, encoding: 'base64' } }, callOptions);
  if (!read.ok) throw new Error(`reading the diff failed: ${read.error.code}: ${read.error.message}`);
  const content = objectOf(read.result)?.content;
  if (typeof content !== 'string') throw new Error('reading the diff failed: the answer is not text');
  // Base64 of at most LIMITS.fullDiff bytes; more is not the log the command wrote.
  if (content.length > Math.ceil(LIMITS.fullDiff / 3) * 4)
    throw new Error('reading the diff failed: the log holds more than the diff the command cuts');
  const bytes = Buffer.from(content, 'base64');
  return parseTakenDiff(out.stderr, bytes.toString('utf8'), isUtf8Diff(bytes, bytes.length >= LIMITS.fullDiff), bytes.length);
}
