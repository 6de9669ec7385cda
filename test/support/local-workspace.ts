// Where a `kubectl codingrun run --local` test works: a temporary directory with a repository
// to run against and the plugin's own TMPDIR, so a test can see what the plugin leaves there.
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRepository } from './git-fixture.ts';

export const toolboxPath = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

export interface LocalWorkspace {
  /** The temporary directory holding the rest; the test removes it. */
  work: string;
  /** The plugin's TMPDIR: sandboxes and a started redis-server put their directories here. */
  pluginTmp: string;
  /** work/hello: README.md "Hello\n" in one commit on main. */
  repo: string;
}

export function createLocalWorkspace(prefix: string): LocalWorkspace {
  if (!existsSync(toolboxPath)) throw new Error(`${toolboxPath} is missing: run make toolbox`);
  const work = mkdtempSync(join(tmpdir(), prefix));
  const pluginTmp = join(work, 'tmp');
  mkdirSync(pluginTmp);
  const repo = join(work, 'hello');
  createRepository(repo);
  return { work, pluginTmp, repo };
}

/** One model turn of the scripted provider: tool calls to make, or a final text. */
export interface ScriptedTurn {
  toolCalls?: Array<{ toolName: string; input: unknown }>;
  text?: string;
  usage?: { inputTokens: number; outputTokens: number };
}

export interface LocalManifest {
  name: string;
  task: string;
  turns: ScriptedTurn[];
  /** Merged over the run's spec (repository, scripted model, a small budget). */
  spec?: Record<string, unknown>;
  /** More documents after the run, e.g. a Secret it names. */
  extra?: object[];
}

/** work/<name>.yaml: the script ConfigMap, then the CodingRun on the workspace's repository (JSON documents are YAML too). */
export function writeLocalManifest(workspace: Pick<LocalWorkspace, 'work' | 'repo'>, manifest: LocalManifest): string {
  const { name, task, turns, spec = {}, extra = [] } = manifest;
  const documents = [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-script` }, data: { 'script.json': JSON.stringify({ turns }) } },
    {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name },
      spec: {
        task,
        repository: { url: `file://${workspace.repo}` },
        model: { provider: 'scripted', scriptRef: { name: `${name}-script` } },
        budget: { maxSteps: 10, timeout: '2m' },
        ...spec,
      },
    },
    ...extra,
  ];
  const file = join(workspace.work, `${name}.yaml`);
  writeFileSync(file, documents.map((document) => JSON.stringify(document, null, 2)).join('\n---\n'));
  return file;
}
