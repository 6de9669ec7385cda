// Result shapes of the tools, as plain types: the toolbox produces them, the operator passes
// them to the model.
import type { ToolErrorCode } from './error-codes.ts';

export interface InstructionSource {
  path: string;
  sha256: string;
  content: string;
  includedBy?: string;
}

export interface RepositoryInstructions {
  sources: InstructionSource[];
  complete: boolean;
  diagnostics: string[];
}

export interface ReadFileTextResult {
  path: string;
  content: string;
  startLine: number;
  endLine: number;
  totalLines: number;
  truncated: boolean;
  instructions?: RepositoryInstructions;
}

export interface ReadFileBase64Result {
  path: string;
  encoding: 'base64';
  content: string;
  bytes: number;
}

export interface ReadFileImageResult {
  path: string;
  type: 'image';
  mediaType: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
  bytes: number;
  content: string;
}

export type ReadFileResult = ReadFileTextResult | ReadFileBase64Result | ReadFileImageResult;

export interface WriteFileResult {
  path: string;
  bytes: number;
}

export interface EditFileResult {
  path: string;
  replacements: number;
}

export interface MultiEditResult {
  path: string;
  edits: number;
  replacements: number;
}

export type GrepEngine = 'rg' | 'git-grep' | 'grep';

export interface GrepMatch {
  path: string;
  line: number;
  text: string;
}

export interface GrepResult {
  matches: GrepMatch[];
  /** More matches than shown may exist: past limit, or part of the tree was not searched. */
  truncated: boolean;
  engine: GrepEngine;
  /** Present when part of the tree was not searched (with truncated): what, and what to do. */
  diagnostics?: string[];
}

export interface FileListResult {
  files: string[];
  truncated: boolean;
}

export interface BashResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  stdoutBytes: number;
  stderrBytes: number;
  stdoutLog: string;
  stderrLog: string;
  cwd: string;
  outputCapped: boolean;
  timedOut: boolean;
  durationMs: number;
}

export type BashJobStatus = 'running' | 'exited' | 'killed' | 'lost';

export interface BashJobResult {
  job: string;
  status: 'running';
  outputLog: string;
}

export interface BashOutputResult {
  job: string;
  status: BashJobStatus;
  exitCode?: number | null;
  output: string;
  offset: number;
  nextOffset: number;
  size: number;
  truncated: boolean;
  outputCapped: boolean;
}

export interface BashKillResult {
  job: string;
  status: BashJobStatus;
  exitCode?: number | null;
}

export interface GitDiffResult {
  status: string;
  diff: string;
  truncated: boolean;
}

/** One line of the toolbox protocol in answer to a request. */
export type ToolResponse = { ok: true; result: unknown } | { ok: false; error: { code: ToolErrorCode; message: string } };
