// The Node flags the operator image starts the operator with, read from operator/Dockerfile's
// ENTRYPOINT, so every test operator runs under the same V8 settings as the product.
import { readFileSync } from 'node:fs';

const dockerfile = new URL('../../operator/Dockerfile', import.meta.url);

export function operatorNodeFlags(text: string = readFileSync(dockerfile, 'utf8')): string[] {
  const line = text.split('\n').find((candidate) => candidate.startsWith('ENTRYPOINT '));
  if (line === undefined) throw new Error('operator/Dockerfile has no ENTRYPOINT');
  const words = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[];
  const node = words.indexOf('node');
  if (node < 0) throw new Error(`operator/Dockerfile's ENTRYPOINT does not start node: ${line}`);
  return words.slice(node + 1).filter((word) => word.startsWith('--'));
}

/** NODE_OPTIONS as operator/Dockerfile's ENV sets it (the heap limit is there, for the chart to replace). */
export function operatorNodeOptions(text: string = readFileSync(dockerfile, 'utf8')): string {
  const match = /NODE_OPTIONS="([^"]*)"/.exec(text) ?? /NODE_OPTIONS=(\S+)/.exec(text);
  if (!match) throw new Error('operator/Dockerfile sets no NODE_OPTIONS');
  return match[1]!;
}
