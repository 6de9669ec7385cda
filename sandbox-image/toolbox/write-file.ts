// write_file: replaces a whole file atomically, creating missing directories.
import { stat } from 'node:fs/promises';
import type { WriteFileResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { writeFileAtomic } from './atomic-write.ts';
import { withFileLock } from './file-locks.ts';
import { guardWritablePath } from './path-guard.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError, toolboxErrorFromFs } from './toolbox-error.ts';

export async function writeFile(context: ToolboxContext, input: ToolInput<'write_file'>): Promise<WriteFileResult> {
  const target = await guardWritablePath(context, input.path);
  if (target.relative === '') throw new ToolboxError('IS_DIRECTORY', 'The workspace root is a directory; name a file');
  const bytes = input.encoding === 'base64' ? decodeBase64(input.content) : Buffer.from(input.content, 'utf8');
  return withFileLock(context.home, target.real, async () => {
    try {
      const existing = await stat(target.real).catch(() => undefined);
      if (existing?.isDirectory()) throw new ToolboxError('IS_DIRECTORY', `${target.relative} is a directory; name a file`);
      await writeFileAtomic(target.real, bytes);
    } catch (error) {
      throw toolboxErrorFromFs(error, target.relative);
    }
    return { path: target.relative, bytes: bytes.length };
  });
}

function decodeBase64(content: string): Buffer {
  const compact = content.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 === 1) {
    throw new ToolboxError('INVALID_INPUT', 'content is not valid base64; send the bytes base64-encoded or use encoding "utf8"');
  }
  return Buffer.from(compact, 'base64');
}
