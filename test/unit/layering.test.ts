// The layers of operator/src, as ARCHITECTURE.md draws them: reconcile/ holds pure decisions
// and imports no adapter; kube/ holds the Kubernetes adapters both halves share; the workers
// never reach into the controller (and the controller only into the workers' public port).
// Read from the source's import statements, so a new import across a layer fails here.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SOURCE = resolve(import.meta.dirname, '../../operator/src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

/** Every relative import of every file under operator/src/<folder>, as a path from operator/src. */
function importsOf(folder: string): Array<{ file: string; target: string }> {
  return sourceFiles(join(SOURCE, folder)).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return [...text.matchAll(/(?:import|export)[^'"]*?from\s+'(\.[^']+)'/g)].map((match) => ({
      file: relative(SOURCE, file),
      target: relative(SOURCE, resolve(file, '..', match[1]!)),
    }));
  });
}

const topFolder = (path: string) => path.split('/')[0]!;

describe('operator/src layering', () => {
  it.each([
    ['workers', ['controller', 'cli']],
    ['kube', ['controller', 'workers', 'cli']],
    ['reconcile', ['controller', 'workers', 'kube', 'cli', 'sandbox']],
    ['sandbox', ['controller', 'workers', 'cli']],
    // The transcript's format is shared by the workers that write it and the plugin that reads it.
    ['record', ['controller', 'workers', 'kube', 'cli', 'sandbox']],
    // Publishing's decisions and forge adapters; the worker drives them (workers/publish-job.ts).
    ['publish', ['controller', 'workers', 'kube', 'cli', 'sandbox']],
    // A CodingEval's graders and figures are pure: the controller reads, evals/ decides, the plugin reports.
    ['evals', ['controller', 'workers', 'kube', 'cli', 'sandbox']],
    // The types every layer reads: a pure helper the schema needs lives in api/, not above it.
    ['api', ['reconcile', 'controller', 'workers', 'kube', 'cli', 'sandbox', 'record', 'publish', 'evals', 'agent', 'providers', 'config']],
  ])('%s/ imports nothing from %j', (folder, forbidden) => {
    const crossings = importsOf(folder).filter(({ target }) => forbidden.includes(topFolder(target)));
    expect(crossings).toEqual([]);
  });

  it('sees the imports it checks (the scan is not vacuous)', () => {
    expect(importsOf('workers').some(({ target }) => topFolder(target) === 'kube')).toBe(true);
  });
});
