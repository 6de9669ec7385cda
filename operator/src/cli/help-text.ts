// What `--help` prints, per command. Kept beside the parser's flag list so the two are read
// together; the exit codes and the annotation format are the plugin's contract (API.md).
import { PROVIDER_REGISTRY } from '../providers/provider-registry.ts';
import { APPROVAL_ANNOTATION, APPROVER_ANNOTATION } from '../reconcile/approval-answer.ts';
import { CANCEL_ANNOTATION } from '../reconcile/cancel-request.ts';
import { DIFF_GZIP_KEY, DIFF_KEY } from '../reconcile/diff-config-map.ts';
import { RECORD_LABEL } from '../record/transcript-chunks.ts';
import { MAX_RECORDED_STEPS } from '../record/transcript-entry.ts';
import type { CommandName } from './parse-arguments.ts';

const COMMON = `Flags for the cluster commands (get, approve, deny, diff, cancel, logs, eval; see run --help for run):
  -n, --namespace NS    namespace of the run (default: the kubeconfig context's, else "default")
      --kubeconfig FILE kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config)
      --context NAME    kubeconfig context to use
  -h, --help            show this help

Exit codes: 0 done, 1 error (unknown run, nothing pending, API error), 2 bad command line.`;

const OVERVIEW = `kubectl-codingrun: watch, approve and inspect CodingRuns (chamvi.dev/v1alpha1), or run one locally.

Usage:
  kubectl codingrun get [NAME] [-w] [-A]         phase, steps, tokens and pending approval, one line per run
  kubectl codingrun get NAME --input             print the pending call's whole input and its sha256
  kubectl codingrun approve NAME                 show the pending tool call and the command that approves it
  kubectl codingrun approve NAME --id ID --sha256 HASH --uid UID
                                                 let the pending call run: exactly the input and run you read
  kubectl codingrun deny NAME --reason R [--id ID] [--uid UID]
                                                 refuse it; the model gets the reason as a tool error
  kubectl codingrun diff NAME                    print the full diff of a finished run
  kubectl codingrun cancel NAME [--reason R]     stop the run: it ends Cancelled, keeping its diff
  kubectl codingrun logs NAME [-f] [--step N] [-o json]
                                                 what the agent did, step by step; -f follows a live run
  kubectl codingrun run -f FILE --local          run a CodingRun on this machine, no cluster: progress, then the diff
  kubectl codingrun eval report NAME [-o json] [--html FILE]
                                                 a CodingEval's pass rates, pass@k, tokens and failures per task × model
  kubectl codingrun help COMMAND                 help for one command

${COMMON}`;

/**
 * "openai OPENAI_API_KEY, deepseek DEEPSEEK_API_KEY, ...", from the provider registry, wrapped:
 * the providers with an endpoint of their own, the only ones run --local reads a variable for.
 */
const API_KEY_VARIABLES = (() => {
  const items = Object.values(PROVIDER_REGISTRY as Record<string, { name: string; apiKeyEnv?: string; defaultBaseURL?: string }>)
    .filter((provider) => provider.apiKeyEnv && provider.defaultBaseURL)
    .map((provider) => `${provider.name} ${provider.apiKeyEnv}`);
  const lines: string[] = [];
  for (const item of items) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last]!.length + item.length < 68) lines[last] += `, ${item}`;
    else lines.push(item);
  }
  return lines.map((line, index) => `                  ${line}${index < lines.length - 1 ? ',' : ''}`).join('\n');
})();

const TOPICS: Record<CommandName, string> = {
  get: `Usage: kubectl codingrun get [NAME] [-w] [-A] [-n NS]
       kubectl codingrun get NAME --input [-n NS]

One line per run: NAME, PHASE, REASON, STEPS, TOKENS, AGE and, while the run waits for a
human, PENDING (approval id, tool, the start of the input). TOKENS is usage.totalTokens;
"~" marks an estimate: some model call reported no usage, so the operator estimated its
share, which may be high or low. With NAME, a run waiting for approval also shows the
pending call's whole input, its size and sha256 (an input longer than 16 KiB is cut there,
with a mark and without its sha256: read it with --input).

  -w, --watch           keep printing a line whenever a run changes. With NAME, stops when
                        the run reaches Succeeded, Failed or Cancelled.
  -A, --all-namespaces  list runs in every namespace
      --input           print only the pending call's input, whole, on stdout (exact bytes
                        when redirected; on a terminal, long runs of blanks counted as
                        <N blanks>), and on stderr its sha256 and the approve command that
                        approves exactly it

Model-written text (inputs, diffs) is shown on a terminal with control, bidi and invisible
characters escaped (ESC as ^[, U+202E as <U+202E>, U+180B as <U+180B>), and blanks that are
not spaces too (a no-break space as <U+00A0>: bash does not split words at it), with a
warning; redirected, it keeps its exact bytes.

${COMMON}`,
  approve: `Usage: kubectl codingrun approve NAME [-n NS]
       kubectl codingrun approve NAME --id ID --sha256 HASH --uid UID [--reason TEXT] [-n NS]

Without --sha256, approve writes nothing: it shows the tool call the run is waiting for
(status.pendingApproval) as get NAME does, its whole input and sha256, and the command that
approves exactly that input of exactly that run, then exits 1. Run that command to approve.

With --sha256 it writes the annotation ${APPROVAL_ANNOTATION} =
{"id":"<pending id>","decision":"approve","sha256":"HASH"} and ${APPROVER_ANNOTATION} = your
user name as the API server knows it (kubectl auth whoami) in one merge patch, after checking
that HASH is the sha256 of the pending input: an approve never binds an input you have not read
(after a timeout the model may ask again with another one). With --uid it first checks that
the run holding NAME is the run you read: a run deleted and re-created under the name starts
again at call s1-c1, with the same input when its model asks the same first call, so neither
the id nor the sha256 tells the two apart. With the chart's approval policy, only users with
the approve verb may answer, and only in their own name (docs/approvals.md). The operator runs
the call only when that sha256 is the sha256 of the input it is about to run; otherwise it
refuses the approval (Warning Event ApprovalRefused) and the call keeps waiting.

An input longer than 16 KiB is not shown by approve or get NAME: read it whole with
kubectl codingrun get NAME --input, which prints its sha256 and the approve command.

      --id ID           approve only if this is the pending call's id (as printed by get);
                        refuses when the run waits for another call
      --sha256 HASH     approve only the input with this sha256 (printed by get NAME,
                        get NAME --input, or approve NAME); without it nothing is written
      --uid UID         approve only if the run named NAME is still the one with this uid
                        (metadata.uid, printed in the same command); refuses, writing
                        nothing, when the name now holds another run. Without it the answer
                        goes to whichever run holds the name when approve reads it
      --reason TEXT     note recorded with the answer

${COMMON}`,
  deny: `Usage: kubectl codingrun deny NAME --reason TEXT [--id ID] [--uid UID] [-n NS]

Denies the tool call the run is waiting for. The model receives the reason as the call's
tool error and the run goes on. Writes ${APPROVAL_ANNOTATION} =
{"id":"<pending id>","decision":"deny","reason":"TEXT"} and ${APPROVER_ANNOTATION}, as approve.

      --reason TEXT     required: why, in words the model can act on
      --id ID           deny only if this is the pending call's id
      --uid UID         deny only if the run named NAME is still the one with this uid
                        (as get NAME prints it); refuses when the name now holds another run

${COMMON}`,
  diff: `Usage: kubectl codingrun diff NAME [-n NS]

Prints the run's full unified diff: from the ConfigMap named in status.result.diffConfigMap
(key "${DIFF_KEY}" as plain text, or key "${DIFF_GZIP_KEY}" in binaryData as gzip), else the bounded copy in
status.result.diff, with a warning on stderr when that copy is truncated. On a terminal,
control and bidi characters and blanks that are not spaces are shown escaped (ESC as ^[, a
no-break space as <U+00A0>) with a warning; redirected (> change.diff), the diff keeps its
exact bytes and applies.

${COMMON}`,
  cancel: `Usage: kubectl codingrun cancel NAME [--reason TEXT] [-n NS]

Stops the run in whatever phase it is: writes the annotation ${CANCEL_ANNOTATION} (the reason,
as plain text) with a merge patch; whoever may patch the run may cancel it. The operator
takes the diff from the sandbox (or the last snapshot), ends the run Cancelled with it, and
removes the sandbox, which ends a tool call still running. A run that has already ended is
left as it is (exit 0). The operator never writes or removes the annotation, so a GitOps
sync that does not name it leaves it alone.

      --reason TEXT     why, shown in status.message

${COMMON}`,
  logs: `Usage: kubectl codingrun logs NAME [-f] [--step N] [-o json] [-n NS]

Prints the run's transcript: for each step the model's text, each tool call with its input
and a bounded result, the step's tokens and duration, compactions, approvals (what was
shown, the answer and when) and how a failed run ended. It is read from ConfigMaps the run
owns (label ${RECORD_LABEL}=transcript), so it needs only get/list/watch on ConfigMaps
in the run's namespace, and it is kept as long as the run is. Long fields are cut with their
size noted; past ${MAX_RECORDED_STEPS} steps one line says the record stops there.
Model-written text is shown escaped (ESC as ^[), tool output on one line.

  -f, --follow          print each step as it lands (in step order: the latest step once a
                        later one lands or after a second of quiet), then the run's
                        outcome; exit 0 when it Succeeded, 1 when it Failed or was
                        Cancelled (or was deleted)
      --step N          only the entries of step N
  -o, --output json     one JSON object per entry (as stored), and with -f a last
                        {"kind":"outcome",...} line

${COMMON}`,
  eval: `Usage: kubectl codingrun eval report NAME [-o json] [--html FILE] [-n NS]

Prints what a CodingEval (chamvi.dev/v1alpha1) measured, from its status: per task × model
the passed attempts, pass rate, pass@k (the unbiased estimator), tokens (mean/p50/p90),
seconds (p50) and failures by reason (the run's reason, such as VerificationFailed or
BudgetExceeded, else grader:NAME); then per model over every task; then each failed attempt
with why. An eval still running shows what is graded so far. Needs get on codingevals.

  -o, --output json     the same figures as one JSON document, for CI
      --html FILE       also write a self-contained HTML report (inline SVG charts: pass
                        rate against tokens per model, a task × model heat map; no script,
                        nothing fetched) to FILE

${COMMON}`,
  run: `Usage: kubectl codingrun run -f FILE --local [-n NS] [--redis-url URL]

Runs one CodingRun on this machine, without a cluster, through the operator's own parts:
the same validation, the same BullMQ workers on Redis, the same toolbox. The sandbox is
the toolbox as a local process in a temporary directory (removed at the end): it is NOT
the pod's isolation; the tools run as you, with your network. Progress (the run's Events,
and each step as \`kubectl codingrun logs -f\` shows it) goes to stderr; the diff goes to stdout,
so "... --local > change.diff" keeps it. Exit 0 when the run Succeeded, 1 when it Failed
(with its reason and message; a partial diff is still printed).

FILE ("-" for stdin) holds one CodingRun plus the ConfigMaps and Secrets it names, as
separate YAML documents: a scripted model's script, an API key, a git token. Only objects
in the run's namespace count.
  repository    any URL git can clone, a file:// URL, or a local path (/srv/repo, ./repo,
                ~/code/repo; relative to FILE's directory). allowRepo does not apply;
                URLs git would read as an option or a command (-..., ext::) are refused.
  API key       the Secret named by spec.model.apiKeySecretRef, from FILE; when FILE has
                none, from $CHAMVI_API_KEY, else, for a provider with an endpoint of its
                own, the provider's variable:
${API_KEY_VARIABLES}
                A run that names its endpoint (openai-compatible, spec.model.baseURL) gets
                $CHAMVI_API_KEY only, never OPENAI_API_KEY: FILE chose where it goes. The
                host the key is sent to is printed before the run starts, but not asked:
                $CHAMVI_API_KEY goes to whatever endpoint FILE names, so set it only for a
                command whose FILE you trust, never in a shell profile. A key from a
                variable is for the model only: FILE may not name its Secret in
                spec.repository or spec.publish credentialsSecretRef.
  approvals     calls of spec.approval.tools are asked on the terminal, their whole input
                shown escaped (y/N, then a reason for the model). Without a terminal (stdin
                not a TTY, or -f -) every such call is denied with the reason "no terminal to
                approve on" and the run goes on. When bash is gated, spec.sandbox.setup (run
                on this machine) is asked the same way; denied, the run fails SetupFailed.
  Redis         --redis-url, else $REDIS_URL (the run's keys, under a prefix of their own,
                are deleted at the end); else a redis-server from PATH (Debian package
                redis-server) started on a free loopback port without persistence, and
                stopped at the end, Ctrl-C included.
  toolbox       sandbox-image/dist/toolbox.mjs of this checkout (make toolbox), or
                $CHAMVI_TOOLBOX_PATH.

  -f, --filename FILE   the manifest
      --local           required: run on this machine
  -n, --namespace NS    namespace of the run when FILE gives none (default "default")
      --redis-url URL   a running Redis (redis:// or rediss://) instead of starting one
  -h, --help            show this help

Exit codes: 0 done, 1 error, 2 bad command line. Done: the run Succeeded. Error: the run
Failed or was Cancelled, a bad FILE, no Redis, no toolbox, or interrupted (Ctrl-C).`,
};

export function helpText(topic?: CommandName): string {
  return topic ? TOPICS[topic] : OVERVIEW;
}
