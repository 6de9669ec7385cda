// A toolbox scripted by the test, for unit tests of the operator's side of the toolbox protocol
// (sandbox/): its stdout is the test's to write, each request line is answered as the test says,
// and a transport hands such toolboxes out in turn, recording each start.
import { PassThrough } from 'node:stream';
import { LineSplitter } from '../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';

export interface ScriptedToolbox {
  process: ToolboxProcess;
  stdout: PassThrough;
  killed: boolean;
}

/** A toolbox whose stdout the test writes; `answer` replies to each request line. */
export function scriptedToolbox(answer: (request: { id?: number; tool: string }, stdout: PassThrough) => void): ScriptedToolbox {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  let exit!: (value: { code: number | null; signal: string | null }) => void;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => (exit = resolve));
  const toolbox: ScriptedToolbox = {
    stdout,
    killed: false,
    process: {
      stdin,
      stdout,
      stderr: new PassThrough(),
      exited,
      kill: () => {
        toolbox.killed = true;
        exit({ code: null, signal: 'SIGKILL' });
      },
    },
  };
  const splitter = new LineSplitter(1_000_000, {
    line: (line) => answer(JSON.parse(line) as { id?: number; tool: string }, stdout),
    oversized: () => undefined,
  });
  stdin.on('data', (chunk: Buffer) => splitter.push(chunk));
  stdin.on('finish', () => exit({ code: 0, signal: null }));
  return toolbox;
}

/** Answers every request with ok and the tool's name. */
export const honest = (request: { id?: number; tool: string }, stdout: PassThrough) =>
  stdout.write(
    `${JSON.stringify({ ...(request.id === undefined ? {} : { id: request.id }), ok: true, result: { tool: request.tool } })}\n`,
  );

/** A transport handing out the given toolboxes in turn, recording each start. */
export function transportOf(toolboxes: ScriptedToolbox[]): { transport: ToolboxTransport; starts: string[] } {
  const starts: string[] = [];
  const transport: ToolboxTransport = {
    start: (args) => {
      starts.push(args.join(' '));
      const next = toolboxes.shift();
      return next ? Promise.resolve(next.process) : Promise.reject(new Error('no toolbox left'));
    },
  };
  return { transport, starts };
}

/** Waits (polling) until `condition` holds. */
export const until = async (condition: () => boolean) => {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
};
