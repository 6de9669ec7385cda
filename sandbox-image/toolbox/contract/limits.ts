// Limits of the tool contract (TOOLS.md). Shared by the toolbox, which enforces them, and the
// operator, which describes them to the model, so the two can never disagree.

export const READ_MAX_LINES = 2_000;
export const READ_MAX_CHARS = 65_536;
/** Largest text file read_file will open. */
export const READ_TEXT_MAX_BYTES = 16 * 1_048_576;
/** Largest file read_file returns with encoding: "base64". */
export const READ_BASE64_MAX_BYTES = 1_048_576;
/** Largest png/jpeg/gif/webp read_file returns as an image. */
export const READ_IMAGE_MAX_BYTES = 5 * 1_048_576;

export const SEARCH_DEFAULT_RESULTS = 100;
export const SEARCH_MAX_RESULTS = 500;
export const LIST_DEFAULT_RESULTS = 1_000;
export const LIST_MAX_RESULTS = 5_000;
/**
 * list_files, glob and grep stop adding entries once their JSON reaches this many bytes and
 * say `truncated`: 5,000 paths of 4,096 bytes, JSON-escaped up to six times over, would
 * otherwise pass the operator's 8 MiB answer line (DEFAULT_MAX_RESPONSE_BYTES) and lose the
 * sandbox instead of answering.
 */
export const RESULT_ENTRIES_MAX_BYTES = 2 * 1_048_576;
/** grep lines longer than this are cut. */
export const LINE_MAX_CHARS = 500;

/** Per stream; past it the command is killed and the result says outputCapped. */
export const OUTPUT_LOG_MAX_BYTES = 64 * 1_048_576;
export const BASH_HEAD_BYTES = 8 * 1_024;
export const BASH_TAIL_BYTES = 24 * 1_024;
export const BASH_DEFAULT_TIMEOUT_MS = 5 * 60_000;
export const BASH_MAX_TIMEOUT_MS = 30 * 60_000;
/** Largest slice of a background job's output one bash_output call returns. */
export const BASH_OUTPUT_MAX_BYTES = 32 * 1_024;

/** git_diff cuts status and diff at this many characters each. */
export const GIT_DIFF_MAX_CHARS = 65_536;

/** Repository instruction files are whole or left out. */
export const INSTRUCTIONS_SOURCE_MAX_BYTES = 32 * 1_024;
export const INSTRUCTIONS_TOTAL_MAX_BYTES = 128 * 1_024;
export const INSTRUCTIONS_MAX_SOURCES = 64;
export const INSTRUCTIONS_MAX_INCLUDE_DEPTH = 8;
export const INSTRUCTIONS_MAX_DIAGNOSTICS = 20;
export const INSTRUCTIONS_MAX_PATHS = 32;

/** A protocol line (request) longer than this is refused; a write_file body must fit in it. */
export const REQUEST_MAX_BYTES = 32 * 1_048_576;

/** Longest tool call id a request may carry for the call journal. */
export const CALL_ID_MAX_CHARS = 256;
/** Finished mutating calls the toolbox keeps in its journal; the oldest beyond this are dropped. */
export const JOURNAL_MAX_ENTRIES = 256;
/** A result larger than this is not journaled (bash, the largest mutating result, stays near 100 KiB). */
export const JOURNAL_ENTRY_MAX_BYTES = 512 * 1_024;
