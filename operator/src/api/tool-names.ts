// The tools a run may allow or gate behind approval. The toolbox implements exactly these
// (sandbox-image/toolbox/contract); a unit test keeps the two lists equal.

export const TOOL_NAMES = [
  'read_file',
  'write_file',
  'edit_file',
  'multi_edit',
  'grep',
  'glob',
  'list_files',
  'bash',
  'bash_output',
  'bash_kill',
  'git_diff',
  'read_repository_instructions',
] as const;

export type ToolName = (typeof TOOL_NAMES)[number];
