// A sandbox whose take (workers/take-diff.ts) makes its private repositories with a `mktemp` that
// then runs the model's code: watching /tmp (or its .git), it planted something at the name the
// take made, which no name check can prevent (same user, sticky /tmp notwithstanding). The take's
// PATH is the toolbox's, so the shim is put in the command in place of the real mktemp.
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';

/**
 * `inner` with the take's `mktemp -d` replaced by one that runs `plant` (sh given $N, the
 * directory made) after making it; the shim and the list of the names it made are kept in `dir`.
 */
export function plantingMktemp(inner: Sandbox, plant: string, dir: string): { sandbox: Sandbox; made: () => string[] } {
  const shim = path.join(dir, 'mktemp');
  const names = path.join(dir, 'names');
  const realMktemp = '/usr/bin/mktemp';
  writeFileSync(shim, `#!/bin/sh\nN=$(${realMktemp} "$@") || exit $?\necho "$N" >> ${names}\n${plant}\necho "$N"\n`);
  chmodSync(shim, 0o755);
  const sandbox: Sandbox = {
    ...inner,
    call: (request: ToolRequest, options) => {
      const input = request.input as { command: string };
      return inner.call({ ...request, input: { ...input, command: input.command.replace('mktemp -d', `${shim} -d`) } }, options);
    },
  };
  const made = () => (existsSync(names) ? readFileSync(names, 'utf8').split('\n').filter(Boolean) : []);
  return { sandbox, made };
}
