// Entry point of toolbox.mjs: `[--root DIR] [--home DIR] call|serve|import [--prune GLOB]...`. Exit 0 whenever a
// response line was written (tool errors included); non-zero only when the protocol itself
// failed, with the reason on stderr.
import { callOnce } from './call.ts';
import { isToolboxCommand, TOOLBOX_COMMANDS, type ToolboxCommand } from './contract/protocol.ts';
import { serve } from './serve.ts';
import { ProtocolError } from './tool-dispatch.ts';
import { createContext, type ContextOptions } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';
import { writeResponse } from './response-writer.ts';
import { importWorkspace } from './workspace-import.ts';

const USAGE = `usage: toolbox.mjs [--root DIR] [--home DIR] [--output-log-max-bytes N] ${TOOLBOX_COMMANDS.join('|')} [--prune GLOB]...`;

interface Arguments extends ContextOptions {
  command: ToolboxCommand;
  /** import only: spec.verify.protect globs whose paths are removed before the tar is unpacked. */
  prune: string[];
}

export function parseArguments(argv: string[]): Arguments {
  const options: ContextOptions = {};
  const prune: string[] = [];
  let command: string | undefined;
  for (let index = 0; index < argv.length; index += 1) {
    const argument = argv[index] as string;
    const [flag, inline] = argument.startsWith('--') && argument.includes('=') ? argument.split(/=(.*)/s, 2) : [argument, undefined];
    const value = () => {
      const next = inline ?? argv[++index];
      if (next === undefined) throw new ProtocolError(`${flag} needs a value\n${USAGE}`);
      return next;
    };
    if (flag === '--root') options.root = value();
    else if (flag === '--home') options.home = value();
    else if (flag === '--output-log-max-bytes') {
      const bytes = Number(value());
      if (!Number.isSafeInteger(bytes) || bytes <= 0)
        throw new ProtocolError(`--output-log-max-bytes must be a positive integer\n${USAGE}`);
      options.outputLogMaxBytes = bytes;
    } else if (flag === '--prune') prune.push(value());
    else if (!flag?.startsWith('-') && command === undefined) command = flag;
    else throw new ProtocolError(`unknown argument ${argument}\n${USAGE}`);
  }
  if (!isToolboxCommand(command)) throw new ProtocolError(USAGE);
  if (prune.length > 0 && command !== 'import') throw new ProtocolError(`--prune is for import only\n${USAGE}`);
  return { ...options, command, prune };
}

async function main(): Promise<number> {
  const args = parseArguments(process.argv.slice(2));
  const context = createContext(args);
  if (args.command === 'call') await callOnce(context, process.stdin, process.stdout);
  else if (args.command === 'serve') await serve(context, process.stdin, process.stdout);
  else {
    try {
      const result = await importWorkspace(context, process.stdin, args.prune);
      await writeResponse(process.stdout, undefined, { ok: true, result });
    } catch (error) {
      if (!ToolboxError.isInstance(error)) throw error;
      await writeResponse(process.stdout, undefined, { ok: false, error: { code: error.code, message: error.message } });
    }
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`toolbox: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(error instanceof ProtocolError ? 2 : 1);
  },
);
