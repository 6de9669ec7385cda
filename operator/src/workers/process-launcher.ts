// The child processes the workers start (git and tar for a run's clone, import and publish),
// launched by a small helper process instead of by the operator itself.
//
// Why: Node starts a child with fork() and exec() (libuv), on the event loop's thread. fork()
// copies the page tables of the whole parent, and the loop then waits until the child has
// exec'd, which on a busy machine means waiting for the child to be scheduled. The operator
// holds 150-250 MiB and starts seven children per run (five git, a rev-parse, a tar): in a CPU
// profile of 200 runs on two cores (docs/benchmarks.md) its event loop stood in spawn() for
// 12.3 s of 67 s, every step and reconcile waiting behind it. The helper
// (process-launcher-main.ts) is a bare Node process started once; it spawns on request and
// relays the child's output and exit over its IPC channel, so the operator's loop only sends
// and receives messages.
//
// The helper is the operator's own child, reached over a private pipe: what crosses it (a
// clone's environment with its token) never leaves the operator's container. It exits, with
// every child it started, when the operator goes (its channel closes).
//
// Every child leads its own process group (spawnGroupLeader), and a kill ends the group: git
// over https or ssh runs a helper (git-remote-https, ssh) that shares its stdout and stderr. A
// kill of git alone left that helper running, holding the clone's token in its environment and
// the pipes open, so 'close' never came while the server held the connection, and the job hung.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { absolutePath } from './absolute-path.ts';
import { EventEmitter } from 'node:events';
import { Readable, Writable } from 'node:stream';

export interface LaunchOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** stdin and stdout piped or ignored; stderr is always piped. */
  stdio: ['ignore' | 'pipe', 'ignore' | 'pipe', 'pipe'];
}

/** What the workers use of a child process: node's ChildProcess has all of it. */
export interface LaunchedProcess {
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /** Signals the child's whole process group; once killed, 'close' follows the child's exit. */
  kill(signal: NodeJS.Signals): boolean;
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: 'close', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
}

export type Launch = (command: string, args: readonly string[], options: LaunchOptions) => LaunchedProcess;

/** The group leaders this process runs: killed with it when it exits. */
const leaders = new Set<GroupLeader>();
let killedOnExit = false;

/**
 * A child spawned as the leader of a new process group (a new session: `detached`), so that
 * kill() reaches whatever it started that still shares its group.
 */
class GroupLeader extends EventEmitter implements LaunchedProcess {
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  private killed = false;
  private exited = false;
  private closed = false;

  constructor(private readonly child: ChildProcess) {
    super();
    this.stdin = child.stdin;
    this.stdout = child.stdout;
    this.stderr = child.stderr;
    child.on('error', (error) => this.emit('error', error));
    child.on('exit', (code, signal) => {
      this.exited = true;
      if (this.killed) this.release();
      this.emit('exit', code, signal);
    });
    child.on('close', (code, signal) => {
      this.closed = true;
      leaders.delete(this);
      this.emit('close', code, signal);
    });
  }

  kill(signal: NodeJS.Signals): boolean {
    // Not started, or closed: its pid (the group's id) may belong to another process by now.
    if (this.child.pid === undefined || this.closed) return false;
    this.killed = true;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // ESRCH: nothing of the group is left.
    }
    if (this.exited) this.release();
    return true;
  }

  /**
   * After a kill, the child's exit is its end: a process outside the group (one that made its
   * own session) may still hold the pipes, and 'close' would wait for it. Destroying our ends
   * of them lets node emit 'close' now; output still unread is dropped, as a kill means.
   */
  private release(): void {
    for (const stream of [this.stdin, this.stdout, this.stderr]) stream?.destroy();
  }
}

/**
 * Spawns `command` as the leader of its own process group, as both launchers do. A detached
 * child outlives its parent (no terminal's signal reaches it), so every leader still running is
 * killed, with its group, when this process exits. `detached` changes nothing else: node still
 * waits for the child, as for any other.
 */
export function spawnGroupLeader(command: string, args: readonly string[], options: LaunchOptions): LaunchedProcess {
  if (!killedOnExit) process.on('exit', killLeaders);
  killedOnExit = true;
  const leader = new GroupLeader(spawn(command, [...args], { ...options, detached: true }));
  leaders.add(leader);
  return leader;
}

function killLeaders(): void {
  for (const leader of leaders) leader.kill('SIGKILL');
}

/** Spawned from this process: for tests, the local CLI, and any caller given no launcher. */
export const launchHere: Launch = spawnGroupLeader;

/** The helper went away (crashed, killed, or could not be reached or started) while the child ran: what became of it is not known, so the job is retried. */
export class LauncherLostError extends Error {
  override readonly name = 'LauncherLostError';
  static isInstance(error: unknown): error is LauncherLostError {
    return error instanceof LauncherLostError;
  }
}

/** Messages to the helper. Output bytes travel as Uint8Array (advanced serialization). */
export type ToLauncher =
  | { type: 'spawn'; id: number; command: string; args: string[]; options: LaunchOptions }
  | { type: 'stdin'; id: number; data: Uint8Array }
  | { type: 'stdin-end'; id: number }
  | { type: 'kill'; id: number; signal: NodeJS.Signals };

/** Messages from the helper, in the order its child's events happened. */
export type FromLauncher =
  | { type: 'stdout' | 'stderr'; id: number; data: Uint8Array }
  | { type: 'error'; id: number; message: string; code?: string }
  | { type: 'close'; id: number; code: number | null; signal: NodeJS.Signals | null };

/** A child the helper runs, seen from the operator. */
class RelayedProcess extends EventEmitter implements LaunchedProcess {
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable;
  private closed = false;

  constructor(
    options: LaunchOptions,
    private readonly send: (message: ToLauncher) => void,
    private readonly id: number,
  ) {
    super();
    const source = () => new Readable({ read() {} });
    this.stdout = options.stdio[1] === 'pipe' ? source() : null;
    this.stderr = source();
    this.stdin =
      options.stdio[0] === 'pipe'
        ? new Writable({
            write: (chunk: Buffer, _encoding, done) => {
              this.send({ type: 'stdin', id, data: chunk });
              done();
            },
            final: (done) => {
              this.send({ type: 'stdin-end', id });
              done();
            },
          })
        : null;
  }

  kill(signal: NodeJS.Signals): boolean {
    if (this.closed) return false;
    this.send({ type: 'kill', id: this.id, signal });
    return true;
  }

  /** A message from the helper about this child. */
  receive(message: FromLauncher): void {
    if (message.type === 'stdout') this.stdout?.push(Buffer.from(message.data.buffer, message.data.byteOffset, message.data.byteLength));
    else if (message.type === 'stderr')
      this.stderr.push(Buffer.from(message.data.buffer, message.data.byteOffset, message.data.byteLength));
    else if (message.type === 'error')
      this.emit('error', Object.assign(new Error(message.message), message.code ? { code: message.code } : {}));
    else if (message.type === 'close') this.finish(message.code, message.signal);
  }

  /** The helper is gone: the child's fate is unknown. */
  lost(why: string): void {
    if (this.closed) return;
    if (this.listenerCount('error') > 0)
      this.emit('error', new LauncherLostError(`the process launcher was lost (${why}) while the child ran`));
    this.finish(null, null);
  }

  /** As node's ChildProcess: 'close' after the output streams have ended. */
  private finish(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.closed) return;
    this.closed = true;
    const streams = [this.stdout, this.stderr].filter((stream): stream is Readable => stream !== null);
    let open = streams.length;
    for (const stream of streams) {
      stream.once('end', () => {
        if (--open === 0) this.emit('close', code, signal);
      });
      // Output nobody reads is dropped, as a piped child's would be once it exits.
      if (stream.readableFlowing !== true) stream.resume();
      stream.push(null);
    }
  }
}

/**
 * Launches children through the helper, started on first use and again after it is lost.
 * `entry` is the helper's script (process-launcher-main); it runs with `execArgv`, by default
 * this process's Node flags, so under tsx a .ts entry works too.
 *
 * The helper is lost when it exits, when a message to it cannot be written, or when it cannot
 * be started at all: each fails the children it ran with LauncherLostError, and the next launch
 * starts a new helper. Node reports only EACCES, EAGAIN, EMFILE, ENFILE and ENOENT of a fork as
 * an 'error' event; fork() throws any other failure (ENOMEM, E2BIG) itself, and the launch that
 * forked fails its child the same way rather than throw it. None of them may be an 'error'
 * event nobody hears: a send to a helper that died before its channel's end was read failed
 * with EPIPE as such an event, which ended the operator and every namespace's work with it.
 */
export class ProcessLauncher {
  private helper: ChildProcess | undefined;
  /** The children in flight, each with the helper that runs it (a lost helper fails only its own). */
  private readonly running = new Map<number, { child: RelayedProcess; helper: ChildProcess }>();
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly entry: string,
    private readonly execArgv: readonly string[] = process.execArgv,
  ) {}

  /** The helper's pid while it runs (for diagnostics and tests). */
  get helperPid(): number | undefined {
    return this.helper?.pid;
  }

  readonly launch: Launch = (command, args, options) => {
    if (this.closed) throw new Error('the process launcher is closed');
    const id = this.nextId++;
    let helper: ChildProcess;
    try {
      helper = this.started();
    } catch (error) {
      // fork() threw (ENOMEM: no memory, for now, to copy the operator into a new process): no
      // helper runs and the child never starts. It fails as a lost helper's children do, once its
      // caller listens, so its job is retried; the next launch forks again.
      const child = new RelayedProcess(options, () => undefined, id);
      queueMicrotask(() => child.lost(`it could not be started: ${error instanceof Error ? error.message : String(error)}`));
      return child;
    }
    const send = (message: ToLauncher) => {
      // With a callback, a failed write is this call's, not an 'error' event of the helper.
      if (helper.connected) helper.send(message, (error) => error && this.lose(helper, `its channel failed: ${error.message}`));
    };
    const child = new RelayedProcess(options, send, id);
    this.running.set(id, { child, helper });
    child.on('close', () => this.running.delete(id));
    // Copied out of the caller's objects: the environment is sent as plain strings.
    const env = Object.fromEntries(Object.entries(options.env).filter((entry): entry is [string, string] => entry[1] !== undefined));
    send({ type: 'spawn', id, command, args: [...args], options: { cwd: options.cwd, env, stdio: options.stdio } });
    if (!helper.connected) queueMicrotask(() => this.lose(helper, 'not connected'));
    return child;
  };

  /** Closes the channel: the helper kills what it still runs and exits. */
  close(): void {
    this.closed = true;
    if (this.helper?.connected) this.helper.disconnect();
    this.helper = undefined;
  }

  /** The helper, forked when there is none; throws what fork() throws. */
  private started(): ChildProcess {
    if (this.helper) return this.helper;
    const helper = fork(this.entry, [], {
      execArgv: [...this.execArgv],
      // Each child gets the environment its caller gives; the helper itself needs none of the
      // operator's (its Redis password, its state key).
      env: { PATH: process.env.PATH },
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    helper.on('message', (message: FromLauncher) => this.running.get(message.id)?.child.receive(message));
    helper.on('exit', (code, signal) => this.lose(helper, signal ?? `exit ${code}`));
    // It is going (it exits when its channel closes): the next launch starts another. What it
    // ran fails at its exit, which says how it went.
    helper.on('disconnect', () => {
      if (this.helper === helper) this.helper = undefined;
    });
    // Not started (EACCES, EAGAIN, EMFILE, ENFILE, ENOENT: no 'exit' follows; fork() throws the
    // rest, launch catches them), or a message that could not be sent.
    helper.on('error', (error) => this.lose(helper, error.message));
    // The helper must not keep the operator alive, nor be what a shutdown waits for.
    helper.unref();
    helper.channel?.unref();
    this.helper = helper;
    return helper;
  }

  /** The helper is gone, or no use: fail what it ran, and start another for the next launch. Idempotent. */
  private lose(helper: ChildProcess, why: string): void {
    if (this.helper === helper) this.helper = undefined;
    // One still up but unreachable is told to go: it kills what it runs when its channel closes.
    if (helper.connected) {
      try {
        helper.disconnect();
      } catch {
        // Already closing.
      }
    }
    for (const [, entry] of [...this.running]) if (entry.helper === helper) entry.child.lost(why);
  }
}

/**
 * Runs a command to its end; rejects with its stderr (or exit status) when it fails. The
 * command gets PATH (its absolute entries: absolute-path.ts) and nothing else of the
 * operator's environment (which holds its Redis password and state key): tar needs none of it.
 */
export function launchToEnd(launch: Launch, command: string, args: readonly string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = launch(command, args, { cwd, env: { PATH: absolutePath(process.env.PATH) }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} failed: ${stderr.trim() || (signal ? `killed by ${signal}` : `exit ${code}`)}`));
    });
  });
}
