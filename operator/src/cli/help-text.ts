// What `--help` prints, per command. Kept beside the parser's flag list so the two are read
// together; the exit codes and the annotation format are the plugin's contract (API.md).
import type { CommandName } from './parse-arguments.ts';

const COMMON = `Flags for every command:
  -n, --namespace NS    namespace of the run (default: the kubeconfig context's, else "default")
      --kubeconfig FILE kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config)
      --context NAME    kubeconfig context to use
  -h, --help            show this help

Exit codes: 0 done, 1 error (unknown run, nothing pending, API error), 2 bad command line.`;

const OVERVIEW = `kubectl-codingrun: watch, approve and inspect CodingRuns (chamvi.dev/v1alpha1).

Usage:
  kubectl codingrun get [NAME] [-w] [-A]         phase, steps, tokens and pending approval, one line per run
  kubectl codingrun approve NAME [--id ID]       let the pending tool call run
  kubectl codingrun deny NAME --reason R [--id ID]
                                                 refuse it; the model gets the reason as a tool error
  kubectl codingrun diff NAME                    print the full diff of a finished run
  kubectl codingrun run -f FILE --local          run a CodingRun without a cluster (not in this build yet)
  kubectl codingrun help COMMAND                 help for one command

${COMMON}`;

const TOPICS: Record<CommandName, string> = {
  get: `Usage: kubectl codingrun get [NAME] [-w] [-A] [-n NS]

One line per run: NAME, PHASE, REASON, STEPS, TOKENS, AGE and, while the run waits for a
human, PENDING (approval id, tool, input). TOKENS is usage.totalTokens; ">=" marks a lower
bound (some model call reported no usage).

  -w, --watch           keep printing a line whenever a run changes. With NAME, stops when
                        the run reaches Succeeded, Failed or Cancelled.
  -A, --all-namespaces  list runs in every namespace

${COMMON}`,
  approve: `Usage: kubectl codingrun approve NAME [--id ID] [--reason TEXT] [-n NS]

Approves the tool call the run is waiting for (status.pendingApproval). Writes the
annotation chamvi.dev/approval = {"id":"<pending id>","decision":"approve"} with a merge
patch; whoever may patch the run may approve.

      --id ID           approve only if this is the pending call's id (as printed by get);
                        refuses when the run waits for another call
      --reason TEXT     note recorded with the answer

${COMMON}`,
  deny: `Usage: kubectl codingrun deny NAME --reason TEXT [--id ID] [-n NS]

Denies the tool call the run is waiting for. The model receives the reason as the call's
tool error and the run goes on. Writes chamvi.dev/approval =
{"id":"<pending id>","decision":"deny","reason":"TEXT"}.

      --reason TEXT     required: why, in words the model can act on
      --id ID           deny only if this is the pending call's id

${COMMON}`,
  diff: `Usage: kubectl codingrun diff NAME [-n NS]

Prints the run's full unified diff: from the ConfigMap named in status.result.diffConfigMap
(key "diff" as plain text, or key "diff.gz" in binaryData as gzip), else the bounded copy in
status.result.diff, with a warning on stderr when that copy is truncated.

${COMMON}`,
  run: `Usage: kubectl codingrun run -f FILE --local

Runs one CodingRun without a cluster: a local sandbox in a temporary directory, the same
workers and queue, printing progress and the diff. Not in this build yet.

  -f, --filename FILE   the CodingRun manifest
      --local           required: run on this machine

${COMMON}`,
};

export function helpText(topic?: CommandName): string {
  return topic ? TOPICS[topic] : OVERVIEW;
}
