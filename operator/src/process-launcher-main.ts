// The process launcher's helper (workers/process-launcher.ts says why it exists): spawns what
// the operator asks for and relays each child's output and exit over the IPC channel. Node's
// built-ins only, so the process stays small and a fork from it stays cheap. When the channel
// closes (the operator exited or closed it), every child still running is killed with it.
// Each child leads its own process group (spawnGroupLeader), so a kill ends what it started too.
// Their output waits while the channel is backlogged (output-relay.ts): what the operator has
// not read yet is never more than about 1 MiB here, whatever a child writes.
import { OutputRelay } from './workers/output-relay.ts';
import { spawnGroupLeader, type FromLauncher, type LaunchedProcess, type ToLauncher } from './workers/process-launcher.ts';

const children = new Map<number, LaunchedProcess>();

/** Sends `message`; `sent` is called once the channel has written it, or could not (it is closing: the helper exits). */
function send(message: FromLauncher, sent: () => void = () => undefined): void {
  if (process.connected) process.send!(message, () => sent());
  else sent();
}

const output = new OutputRelay(send);

function start(message: Extract<ToLauncher, { type: 'spawn' }>): void {
  const { id } = message;
  let child: LaunchedProcess;
  try {
    child = spawnGroupLeader(message.command, message.args, message.options);
  } catch (error) {
    // Arguments or an environment node refuses before any process exists (a NUL byte in one).
    // Its code only: node's message quotes the refused value, which may be a clone's token.
    const code = (error as NodeJS.ErrnoException).code;
    send({ type: 'error', id, message: `spawn ${message.command} refused (${code ?? 'no error code'})`, ...(code ? { code } : {}) });
    send({ type: 'close', id, code: null, signal: null });
    return;
  }
  children.set(id, child);
  if (child.stdout) output.relay(id, 'stdout', child.stdout);
  if (child.stderr) output.relay(id, 'stderr', child.stderr);
  // A child that exits before it has read all of its stdin closes the pipe: not an error here.
  child.stdin?.on('error', () => undefined);
  child.on('error', (error: NodeJS.ErrnoException) =>
    send({ type: 'error', id, message: error.message, ...(error.code ? { code: error.code } : {}) }),
  );
  child.on('close', (code, signal) => {
    children.delete(id);
    send({ type: 'close', id, code, signal });
  });
}

process.on('message', (message: ToLauncher) => {
  if (message.type === 'spawn') start(message);
  else if (message.type === 'stdin') children.get(message.id)?.stdin?.write(message.data);
  else if (message.type === 'stdin-end') children.get(message.id)?.stdin?.end();
  else children.get(message.id)?.kill(message.signal);
});

function stopAll(): never {
  for (const child of children.values()) child.kill('SIGKILL');
  process.exit(0);
}

process.on('disconnect', stopAll);
// A terminal's Ctrl-C reaches the operator and this helper, not the children in their own
// groups: they end with the helper, as they ended with the signal before they had groups.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, stopAll);
