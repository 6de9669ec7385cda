// The plugin's command line, parsed without touching the cluster: argv in, a Command or a
// UsageError out. Flags follow kubectl's spelling (-n/--namespace, --kubeconfig, -w) and may
// come before or after the command, as `kubectl codingrun -n agents get` or `... get -n agents`.
import { UsageError } from './errors/usage-error.ts';
import { redisUrlProblem } from './local/redis-url.ts';

export const COMMAND_NAMES = ['get', 'approve', 'deny', 'diff', 'cancel', 'logs', 'run', 'eval'] as const;
export type CommandName = (typeof COMMAND_NAMES)[number];

export interface Connection {
  /** Undefined: the kubeconfig context's namespace, else "default". */
  namespace?: string;
  kubeconfig?: string;
  context?: string;
}

export type Command =
  | { command: 'help'; topic?: CommandName }
  | ({ command: 'get'; name?: string; watch: boolean; allNamespaces: boolean; input?: boolean } & Connection)
  | ({ command: 'approve'; name: string; id?: string; reason?: string; sha256?: string; uid?: string } & Connection)
  | ({ command: 'deny'; name: string; id?: string; reason: string; uid?: string } & Connection)
  | ({ command: 'diff'; name: string } & Connection)
  | ({ command: 'cancel'; name: string; reason?: string } & Connection)
  | ({ command: 'logs'; name: string; follow: boolean; step?: number; output: 'text' | 'json' } & Connection)
  | { command: 'run'; file: string; local: true; namespace?: string; redisUrl?: string }
  | ({ command: 'eval'; action: 'report'; name: string; output: 'text' | 'json'; html?: string } & Connection);

/** Flags and whether they take a value. Short forms map to the long name. */
const FLAGS: Record<string, { takesValue: boolean; commands?: readonly CommandName[] }> = {
  namespace: { takesValue: true },
  kubeconfig: { takesValue: true, commands: ['get', 'approve', 'deny', 'diff', 'cancel', 'logs', 'eval'] },
  context: { takesValue: true, commands: ['get', 'approve', 'deny', 'diff', 'cancel', 'logs', 'eval'] },
  help: { takesValue: false },
  watch: { takesValue: false, commands: ['get'] },
  'all-namespaces': { takesValue: false, commands: ['get'] },
  input: { takesValue: false, commands: ['get'] },
  sha256: { takesValue: true, commands: ['approve'] },
  reason: { takesValue: true, commands: ['approve', 'deny', 'cancel'] },
  id: { takesValue: true, commands: ['approve', 'deny'] },
  uid: { takesValue: true, commands: ['approve', 'deny'] },
  filename: { takesValue: true, commands: ['run'] },
  local: { takesValue: false, commands: ['run'] },
  'redis-url': { takesValue: true, commands: ['run'] },
  follow: { takesValue: false, commands: ['logs'] },
  step: { takesValue: true, commands: ['logs'] },
  output: { takesValue: true, commands: ['logs', 'eval'] },
  html: { takesValue: true, commands: ['eval'] },
};
const SHORT: Record<string, string> = { n: 'namespace', w: 'watch', A: 'all-namespaces', h: 'help', f: 'filename', o: 'output' };

const isCommandName = (word: string): word is CommandName => (COMMAND_NAMES as readonly string[]).includes(word);

export function parseArguments(argv: readonly string[]): Command {
  // -f is run's -f FILE, but logs's -f (follow), as with kubectl logs -f.
  const logs = commandWord(argv) === 'logs';
  const flags = new Map<string, string | true>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    let name: string;
    let inline: string | undefined;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
      inline = eq >= 0 ? arg.slice(eq + 1) : undefined;
    } else {
      // -n agents, -nagents, -w
      const short = logs && arg[1] === 'f' ? 'follow' : SHORT[arg[1]!];
      if (!short) throw new UsageError(`unknown flag ${arg}`, commandOf(positionals));
      name = short;
      inline = arg.length > 2 ? arg.slice(2).replace(/^=/, '') : undefined;
    }
    const spec = FLAGS[name];
    if (!spec) throw new UsageError(`unknown flag --${name}`, commandOf(positionals));
    if (spec.takesValue) {
      const value = inline ?? argv[++i];
      if (value === undefined || value === '') throw new UsageError(`flag --${name} needs a value`, commandOf(positionals));
      flags.set(name, value);
    } else {
      if (inline !== undefined && inline !== 'true') throw new UsageError(`flag --${name} takes no value`, commandOf(positionals));
      flags.set(name, true);
    }
  }

  const [first, ...rest] = positionals;
  if (first === 'help') {
    const topic = rest[0];
    if (topic !== undefined && !isCommandName(topic)) throw new UsageError(`unknown command "${topic}"`);
    return topic ? { command: 'help', topic } : { command: 'help' };
  }
  if (first === undefined) {
    if (flags.has('help')) return { command: 'help' };
    throw new UsageError('no command given');
  }
  if (!isCommandName(first)) throw new UsageError(`unknown command "${first}"`);
  if (flags.has('help')) return { command: 'help', topic: first };

  for (const name of flags.keys()) {
    const allowed = FLAGS[name]!.commands;
    if (allowed && !allowed.includes(first)) throw new UsageError(`flag --${name} does not apply to ${first}`, first);
  }
  const text = (name: string) => {
    const value = flags.get(name);
    return typeof value === 'string' ? value : undefined;
  };
  const connection: Connection = {};
  if (text('namespace')) connection.namespace = text('namespace');
  if (text('kubeconfig')) connection.kubeconfig = text('kubeconfig');
  if (text('context')) connection.context = text('context');

  const atMost = (count: number) => {
    if (rest.length > count) throw new UsageError(`unexpected argument "${rest[count]}"`, first);
  };
  const requireName = (): string => {
    atMost(1);
    const name = rest[0];
    if (!name) throw new UsageError(`${first} needs the name of a CodingRun`, first);
    return name;
  };

  switch (first) {
    case 'get': {
      atMost(1);
      const allNamespaces = flags.has('all-namespaces');
      if (allNamespaces && (rest[0] || connection.namespace)) {
        throw new UsageError('--all-namespaces lists every run: give no NAME and no --namespace with it', first);
      }
      if (flags.has('input') && (!rest[0] || flags.has('watch') || allNamespaces)) {
        throw new UsageError('--input prints the pending input of one run: give its NAME, without -w or -A', first);
      }
      const input = flags.has('input') ? { input: true } : {};
      return { command: 'get', ...connection, ...(rest[0] ? { name: rest[0] } : {}), watch: flags.has('watch'), allNamespaces, ...input };
    }
    case 'approve': {
      const name = requireName();
      const sha256 = text('sha256');
      if (sha256 !== undefined && !/^[0-9a-f]{64}$/.test(sha256)) {
        throw new UsageError(
          `--sha256 must be the 64 lowercase hex digits printed by kubectl codingrun get ${name} --input, got "${sha256}"`,
          first,
        );
      }
      return {
        command: 'approve',
        ...connection,
        name,
        ...(text('id') ? { id: text('id') } : {}),
        ...(text('reason') ? { reason: text('reason') } : {}),
        ...(sha256 ? { sha256 } : {}),
        ...(text('uid') ? { uid: text('uid') } : {}),
      };
    }
    case 'deny': {
      const name = requireName();
      const reason = text('reason');
      if (!reason) throw new UsageError('deny needs --reason: the model reads it and tries something else', first);
      return {
        command: 'deny',
        ...connection,
        name,
        reason,
        ...(text('id') ? { id: text('id') } : {}),
        ...(text('uid') ? { uid: text('uid') } : {}),
      };
    }
    case 'diff':
      return { command: 'diff', ...connection, name: requireName() };
    case 'cancel': {
      const name = requireName();
      return { command: 'cancel', ...connection, name, ...(text('reason') ? { reason: text('reason') } : {}) };
    }
    case 'logs': {
      const name = requireName();
      const output = text('output') ?? 'text';
      if (output !== 'json' && output !== 'text') throw new UsageError(`-o must be json (JSON lines) or text, got "${output}"`, first);
      const step = text('step');
      if (step !== undefined && !/^[0-9]{1,6}$/.test(step)) throw new UsageError(`--step must be a step number, got "${step}"`, first);
      return {
        command: 'logs',
        ...connection,
        name,
        follow: flags.has('follow'),
        output,
        ...(step !== undefined ? { step: Number(step) } : {}),
      };
    }
    case 'eval': {
      if (rest[0] !== 'report') throw new UsageError(`eval needs a subcommand: report NAME${rest[0] ? ` (got "${rest[0]}")` : ''}`, first);
      if (rest.length > 2) throw new UsageError(`unexpected argument "${rest[2]}"`, first);
      const name = rest[1];
      if (!name) throw new UsageError('eval report needs the name of a CodingEval', first);
      const output = text('output') ?? 'text';
      if (output !== 'json' && output !== 'text') throw new UsageError(`-o must be json or text, got "${output}"`, first);
      return { command: 'eval', action: 'report', ...connection, name, output, ...(text('html') ? { html: text('html') } : {}) };
    }
    case 'run': {
      atMost(0);
      const file = text('filename');
      if (!file) throw new UsageError('run needs -f FILE, a CodingRun manifest', first);
      if (!flags.has('local'))
        throw new UsageError('run needs --local (the only mode there is); to run on a cluster, kubectl apply -f the file instead', first);
      const redisUrl = text('redis-url');
      // The URL holds the password: the message says what is wrong with it, never what it is.
      const redisProblem = redisUrl === undefined ? undefined : redisUrlProblem(redisUrl);
      if (redisProblem) throw new UsageError(`--redis-url ${redisProblem}`, first);
      return {
        command: 'run',
        file,
        local: true,
        ...(connection.namespace ? { namespace: connection.namespace } : {}),
        ...(redisUrl ? { redisUrl } : {}),
      };
    }
  }
}

/**
 * The word that names the command: the first argument that is neither a flag nor a flag's
 * value. Any word that spelled a command was taken before, a flag's value too: `-n eval logs r
 * -f` read eval as the command, so -f took a value. Before the command, -f is read as run's
 * -f FILE, the only -f that takes one; logs's -f follows logs.
 */
function commandWord(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') return argv[i + 1];
    if (!arg.startsWith('-') || arg === '-') return arg;
    // --name VALUE and -x VALUE take the next argument; --name=VALUE and -xVALUE hold theirs.
    const name = arg.startsWith('--') ? (arg.includes('=') ? undefined : arg.slice(2)) : arg.length === 2 ? SHORT[arg[1]!] : undefined;
    if (name !== undefined && FLAGS[name]?.takesValue) i++;
  }
  return undefined;
}

/** The command word among the positionals seen so far, for pointing at its --help. */
function commandOf(positionals: readonly string[]): CommandName | undefined {
  const first = positionals[0];
  return first !== undefined && isCommandName(first) ? first : undefined;
}
