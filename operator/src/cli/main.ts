// kubectl-codingrun: the entry point. Parses the command line, connects with the user's
// kubeconfig (or, for run --local, runs the CodingRun on this machine), runs the command,
// and turns errors into a message and an exit code
// (0 done, 1 error, 2 usage). `kubectl codingrun ...` finds it as a kubectl plugin on PATH.
import { KubeConfig } from '@kubernetes/client-node';
import { TerminalText } from './display-escape.ts';
import { CliError } from './errors/cli-error.ts';
import { UsageError } from './errors/usage-error.ts';
import { stdoutText } from './exact-output.ts';
import { executeCommand } from './execute-command.ts';
import { parseArguments, type Command } from './parse-arguments.ts';
import { createRunClient } from './run-client.ts';

const PROGRAM = 'kubectl-codingrun';

function loadKubeConfig(command: Exclude<Command, { command: 'help' | 'run' }>): KubeConfig {
  const kubeConfig = new KubeConfig();
  try {
    if (command.kubeconfig) kubeConfig.loadFromFile(command.kubeconfig);
    else kubeConfig.loadFromDefault();
  } catch (error) {
    throw new CliError(
      `cannot load the kubeconfig${command.kubeconfig ? ` ${command.kubeconfig}` : ''}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (command.context) {
    if (!kubeConfig.getContextObject(command.context)) throw new CliError(`context "${command.context}" is not in the kubeconfig`);
    kubeConfig.setCurrentContext(command.context);
  }
  if (!kubeConfig.getCurrentCluster()) throw new CliError('the kubeconfig names no cluster: set KUBECONFIG or pass --kubeconfig');
  return kubeConfig;
}

export async function main(argv: readonly string[]): Promise<number> {
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    return await runCommand(argv, abort.signal);
  } finally {
    // Ctrl-C while the output drains (below) must end the plugin, not abort a command that has ended.
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

async function runCommand(argv: readonly string[], signal: AbortSignal): Promise<number> {
  // Security #11.11: runs' text is model-controlled; a terminal shows its control characters
  // (escaped, with one warning) instead of obeying them. A redirected stdout keeps the exact
  // bytes only for data (exact-output.ts), so a diff saved to a file still applies; text for a
  // person is escaped through a pipe too. stderr is only ever read by people.
  const warn = (line: string) => process.stderr.write(`${line}\n`);
  const isTTY = process.stdout.isTTY === true;
  let stdout = stdoutText(undefined, { isTTY, warn });
  const stderr = new TerminalText({ terminal: true, warn });
  const io = {
    out: (text: string) => process.stdout.write(`${stdout.show(text)}\n`),
    err: (text: string) => process.stderr.write(`${stderr.show(text)}\n`),
    now: () => new Date(),
    signal,
  };
  // An error's message is one line: parts of it can come from objects anyone in the namespace
  // may edit (an ownerReference's uid in a refusal), and a newline there printed lines of their
  // choosing, such as a well-formed diff, under the plugin's name.
  const fail = (message: string) => process.stderr.write(`${stderr.show(`${PROGRAM}: ${message}`, 'inline')}\n`);
  try {
    const command = parseArguments(argv);
    stdout = stdoutText(command, { isTTY, warn });
    // run --local needs no cluster, hence no kubeconfig; its workers (BullMQ, the model SDKs)
    // load only for it, so the other commands start fast.
    if (command.command === 'run') {
      const { runLocally } = await import('./local/run-locally.ts');
      return await runLocally(command, {
        ...io,
        env: process.env,
        stdin: process.stdin,
        prompt: process.stderr,
        interrupt: () => process.kill(process.pid, 'SIGINT'),
      });
    }
    const client = command.command === 'help' ? undefined : createRunClient(loadKubeConfig(command));
    return await executeCommand(command, client!, io);
  } catch (error) {
    if (UsageError.isInstance(error)) {
      fail(error.message);
      io.err(`Run '${PROGRAM} ${error.command ? `${error.command} ` : ''}--help' for usage.`);
      return error.exitCode;
    }
    if (CliError.isInstance(error)) {
      fail(error.message);
      return error.exitCode;
    }
    io.err(`${PROGRAM}: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  }
}

/**
 * Resolves once all that was written to the stream has left the process, or the stream failed.
 * Node writes to a pipe asynchronously, and process.exit drops what is still queued: with an
 * exit 50 ms after the command, `diff NAME | less` showed the first 64 KiB of a large diff,
 * exit code 0, no mark. A write's callback runs after every write queued before it.
 */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) resolve();
    else stream.write('', () => resolve());
  });
}

// A reader that went away (`diff NAME | head`, less quit early) wants no more: stop at once
// and quietly, with the status of a program SIGPIPE ends (as kubectl's), not a stack trace
// for EPIPE, and not a `logs -f` that follows on for nobody.
const SIGPIPE_STATUS = 128 + 13;
for (const stream of [process.stdout, process.stderr])
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(SIGPIPE_STATUS);
  });

const code = await main(process.argv.slice(2));
process.exitCode = code;
await Promise.all([drained(process.stdout), drained(process.stderr)]);
// Then exit at once: the sockets of a watch that ended (client-node's keep-alive agent) may
// keep the loop alive long after.
process.exit(code);
