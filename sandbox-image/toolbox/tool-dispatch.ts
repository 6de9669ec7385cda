// Turns one protocol request into one response: validates the input with the contract's zod
// schema, runs the tool, and maps every failure to a stable error code. A tool never throws
// out of here; only a request that is not a request at all is a protocol failure. The line
// format is contract/protocol.ts.
import { z } from 'zod';
import { decodeRequest, type RequestLine } from './contract/protocol.ts';
import { toolInputSchemas, type ToolName } from './contract/tool-schemas.ts';
import type { ToolResponse } from './contract/tool-results.ts';
import { InvalidGlobError } from './contract/invalid-glob-error.ts';
import { protectedPaths, type ProtectedPaths } from './contract/protected-paths.ts';
import { bashKill, bashOutput } from './bash-jobs.ts';
import { journaled } from './call-journal.ts';
import { runBash } from './bash-session.ts';
import { editFile, multiEdit } from './edit-file.ts';
import { glob, listFiles } from './file-listing.ts';
import { gitDiff } from './git-diff.ts';
import { grep } from './grep.ts';
import { readFile } from './read-file.ts';
import { readRepositoryInstructions } from './repository-instructions.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { toolErrorResponse } from './toolbox-error.ts';
import { writeFile } from './write-file.ts';

type Handler = (context: ToolboxContext, input: never) => Promise<unknown>;

const handlers: Record<ToolName, Handler> = {
  read_file: readFile,
  write_file: writeFile,
  edit_file: editFile,
  multi_edit: multiEdit,
  grep,
  glob,
  list_files: listFiles,
  bash: runBash,
  bash_output: bashOutput,
  bash_kill: bashKill,
  git_diff: gitDiff,
  read_repository_instructions: readRepositoryInstructions,
};

/** A request line that cannot be answered with a tool result or tool error. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}

/** Parses one tool request line; throws ProtocolError for bad JSON, an unknown tool, or a session import (serve reads those itself). */
export function parseRequest(line: string): RequestLine {
  const reading = decodeRequest(line);
  if (reading.kind === 'invalid') throw new ProtocolError(reading.message);
  if (reading.kind === 'import') throw new ProtocolError('an import request is for a serve session; run the import command instead');
  return reading.request;
}

/** What a request line carries besides the tool and its input (the operator's, never the model's). */
export type RequestOptions = Pick<RequestLine, 'protect' | 'clean' | 'operatorEnvironment'>;

/** Runs one request; a mutating call with a callId runs once, its repeats answered from the call journal. */
export function dispatch(
  context: ToolboxContext,
  tool: ToolName,
  input: unknown,
  callId?: string,
  options: RequestOptions = {},
): Promise<ToolResponse> {
  let isProtected: ProtectedPaths | undefined;
  try {
    isProtected = options.protect ? protectedPaths(options.protect) : undefined;
  } catch (error) {
    // The operator validates spec.verify.protect, but a glob that still does not compile must
    // fail this call, not the session (serve would reject and every call of the run with it).
    return Promise.resolve(protectErrorResponse(error));
  }
  const requestContext: ToolboxContext = {
    ...context,
    ...(isProtected ? { isProtected } : {}),
    ...(options.clean && tool === 'bash' ? { cleanShell: options.clean } : {}),
    ...(options.operatorEnvironment && tool === 'bash' ? { operatorEnvironment: true } : {}),
  };
  // The journal's own failures (its lock, a repeat waiting too long) are tool errors too.
  return journaled(context.home, { tool, input, callId }, () => runTool(requestContext, tool, input)).catch(errorResponse);
}

async function runTool(context: ToolboxContext, tool: ToolName, input: unknown): Promise<ToolResponse> {
  const parsed = toolInputSchemas[tool].safeParse(input);
  if (!parsed.success) {
    return {
      ok: false,
      error: { code: 'INVALID_INPUT', message: `Invalid input for ${tool}: ${z.prettifyError(parsed.error).slice(0, 1_000)}` },
    };
  }
  try {
    const result = await handlers[tool](context, parsed.data as never);
    return { ok: true, result };
  } catch (error) {
    return errorResponse(error);
  }
}

const errorResponse = (error: unknown): ToolResponse =>
  InvalidGlobError.isInstance(error)
    ? { ok: false, error: { code: 'INVALID_INPUT', message: error.message } }
    : toolErrorResponse(error, 'the path');

const protectErrorResponse = (error: unknown): ToolResponse => ({
  ok: false,
  error: {
    code: 'INVALID_INPUT',
    message:
      `this run's spec.verify.protect is invalid (${error instanceof Error ? error.message : String(error)}): ` +
      'no tool can run in this run; stop and report that the run must be created again with the glob fixed',
  },
});
