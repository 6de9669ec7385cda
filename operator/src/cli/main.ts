// kubectl-codingrun: the entry point. Parses the command line, connects with the user's
// kubeconfig (or, for run --local, runs the CodingRun on this machine), runs the command,
// and turns errors into a message and an exit code
// (0 done, 1 error, 2 usage). `kubectl codingrun ...` finds it as a kubectl plugin on PATH.
import { KubeConfig } from '@kubernetes/client-node';
import { TerminalText } from './display-escape.ts';
import { CliError } from './errors/cli-error.ts';
import { UsageError } from './errors/usage-error.ts';
import { exactTextHint, printsExactBytes } from './exact-output.ts';
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
  process.once('SIGINT', () => abort.abort());
  process.once('SIGTERM', () => abort.abort());
  // Security #11.11: runs' text is model-controlled; a terminal shows its control characters
  // (escaped, with one warning) instead of obeying them. A redirected stdout keeps the exact
  // bytes only for data (exact-output.ts), so a diff saved to a file still applies; text for a
  // person is escaped through a pipe too. stderr is only ever read by people.
  const warn = (line: string) => process.stderr.write(`${line}\n`);
  const stdoutText = (command?: Command) =>
    new TerminalText({
      terminal: process.stdout.isTTY === true || (command !== undefined && !printsExactBytes(command)),
      warn,
      hint: exactTextHint(command),
    });
  let stdout = stdoutText();
  const stderr = new TerminalText({ terminal: true, warn });
  const io = {
    out: (text: string) => process.stdout.write(`${stdout.show(text)}\n`),
    err: (text: string) => process.stderr.write(`${stderr.show(text)}\n`),
    now: () => new Date(),
    signal: abort.signal,
  };
  try {
    const command = parseArguments(argv);
    stdout = stdoutText(command);
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
      io.err(`${PROGRAM}: ${error.message}`);
      io.err(`Run '${PROGRAM} ${error.command ? `${error.command} ` : ''}--help' for usage.`);
      return error.exitCode;
    }
    if (CliError.isInstance(error)) {
      io.err(`${PROGRAM}: ${error.message}`);
      return error.exitCode;
    }
    io.err(`${PROGRAM}: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  }
}

// Flush stdout before exiting: a piped `diff` of a large change must not be cut short.
const code = await main(process.argv.slice(2));
process.exitCode = code;
// The watch's sockets may keep the loop alive after a named watch ends.
setTimeout(() => process.exit(code), 50).unref();
