// A tool result as the text the model reads, within the tool result bound, without lying about
// what it holds. Cutting a read_file answer's JSON in the middle (the generic head-and-tail
// bound) would hand the model half a file that still says `endLine: 2000, truncated: false`;
// instead a text read loses whole repository-guidance sources first (each is whole or left
// out, as the tool contract says, with a diagnostic), then whole lines from its end, and its
// endLine and truncated say where it stopped, so `offset: endLine + 1` reads on. Other results,
// a read larger than the toolbox ever sends, and a single line too long to fit, fall back to
// boundToolResult. Pure.
import type { ReadFileTextResult, RepositoryInstructions } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import {
  INSTRUCTIONS_MAX_DIAGNOSTICS,
  INSTRUCTIONS_MAX_SOURCES,
  READ_MAX_CHARS,
  READ_MAX_LINES,
} from '../../../sandbox-image/toolbox/contract/limits.ts';
import { boundToolResult, TOOL_RESULT_LIMIT_BYTES } from './bound-tool-result.ts';

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/** `why`: what limited the result, for a cut's note (boundToolResult). */
export function toolResultText(toolName: string, result: unknown, limitBytes: number = TOOL_RESULT_LIMIT_BYTES, why?: string): string {
  const whole = JSON.stringify(result);
  if (Buffer.byteLength(whole, 'utf8') <= limitBytes) return whole;
  if (toolName === 'read_file' && isTextRead(result)) return fitted(result, limitBytes, why);
  if (toolName === 'read_repository_instructions' && isInstructions(result)) {
    const fit = dropSources(result, (instructions) => bytesOf(instructions) <= limitBytes);
    if (bytesOf(fit) <= limitBytes) return JSON.stringify(fit);
  }
  return boundToolResult(whole, limitBytes, why).text;
}

function fitted(result: ReadFileTextResult, limitBytes: number, why: string | undefined): string {
  const fit = fitTextRead(result, limitBytes);
  return fit ? JSON.stringify(fit) : boundToolResult(JSON.stringify(result), limitBytes, why).text;
}

/** The read with guidance sources and then lines dropped until it fits; undefined when not even one line does. */
export function fitTextRead(result: ReadFileTextResult, limitBytes: number): ReadFileTextResult | undefined {
  let read = result;
  if (read.instructions) {
    const instructions = dropSources(read.instructions, (kept) => bytesOf({ ...read, instructions: kept }) <= limitBytes);
    read = { ...read, instructions };
  }
  if (bytesOf(read) <= limitBytes) return read;
  const lines = read.content.split('\n');
  const withLines = (count: number): ReadFileTextResult => ({
    ...read,
    content: lines.slice(0, count).join('\n'),
    endLine: read.startLine + count - 1,
    truncated: true,
  });
  // The most whole lines that fit: the size grows with the count, so a binary search finds it.
  let low = 0;
  let high = lines.length - 1;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (bytesOf(withLines(middle)) <= limitBytes) low = middle;
    else high = middle - 1;
  }
  return low > 0 && bytesOf(withLines(low)) <= limitBytes ? withLines(low) : undefined;
}

/**
 * Leaves sources out from the last one back until `fits`; what was left out is named in the
 * diagnostics. Each source left out makes the whole smaller (its object goes, its path joins
 * the note), so the most sources that fit are found by a binary search: a few measures of the
 * whole, not one per source.
 */
export function dropSources(
  instructions: RepositoryInstructions,
  fits: (instructions: RepositoryInstructions) => boolean,
): RepositoryInstructions {
  if (fits(instructions)) return instructions;
  const keeping = (count: number): RepositoryInstructions => ({
    sources: instructions.sources.slice(0, count),
    complete: false,
    diagnostics: [
      ...instructions.diagnostics,
      `left out to fit the tool result limit: ${instructions.sources
        .slice(count)
        .map((source) => source.path)
        .join(', ')}`,
    ],
  });
  let low = 0;
  let high = instructions.sources.length - 1;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (fits(keeping(middle))) low = middle;
    else high = middle - 1;
  }
  return keeping(low);
}

/**
 * The answers' shapes are checked, not assumed: the toolbox shares its user with the model's
 * commands, which can write a whole answer line into its output. A read with a guidance part
 * that is not the contract's (more sources than the toolbox ever sends, a source that is not
 * text), or with more content than the toolbox ever sends (READ_MAX_CHARS, READ_MAX_LINES), is
 * bounded as any other result. fitTextRead measures the whole read for each count it tries: on
 * a forged 8 MiB read of four million lines that held the operator's one thread for seconds.
 */
function isTextRead(result: unknown): result is ReadFileTextResult {
  const read = result as Partial<ReadFileTextResult> | null;
  return (
    typeof read?.content === 'string' &&
    read.content.length <= READ_MAX_CHARS &&
    lineCount(read.content) <= READ_MAX_LINES &&
    typeof read.startLine === 'number' &&
    typeof read.endLine === 'number' &&
    (read.instructions === undefined || isInstructions(read.instructions))
  );
}

/** Lines in `content` as fitTextRead splits it; only called on content within READ_MAX_CHARS. */
function lineCount(content: string): number {
  let lines = 1;
  for (let at = content.indexOf('\n'); at >= 0; at = content.indexOf('\n', at + 1)) lines += 1;
  return lines;
}

export function isInstructions(result: unknown): result is RepositoryInstructions {
  const instructions = result as Partial<RepositoryInstructions> | null;
  return (
    Array.isArray(instructions?.sources) &&
    instructions.sources.length <= INSTRUCTIONS_MAX_SOURCES &&
    instructions.sources.every(
      (source: unknown) =>
        typeof (source as { path?: unknown } | null)?.path === 'string' && typeof (source as { content?: unknown }).content === 'string',
    ) &&
    Array.isArray(instructions.diagnostics) &&
    instructions.diagnostics.length <= INSTRUCTIONS_MAX_DIAGNOSTICS + 1 &&
    instructions.diagnostics.every((diagnostic: unknown) => typeof diagnostic === 'string')
  );
}
