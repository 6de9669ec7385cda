// A serve-mode sandbox over the bundled toolbox as a real local process, its transport counted,
// made fresh in a fresh workspace for each test of the file: the tests of the kept session (which
// toolbox processes a run starts, and when) read `starts` and `processes` to see how many
// sessions were opened and what became of each. Call at the top level of the file.
import { afterEach, beforeEach } from 'vitest';
import { LocalProcessTransport } from '../../operator/src/sandbox/local-process-transport.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';

/** The directories the toolbox runs in, removed by `cleanup`. */
export interface ServeWorkspace {
  readonly root: string;
  readonly home: string;
  cleanup(): void;
}

export interface CountedServeSandbox<W extends ServeWorkspace> {
  readonly workspace: W;
  readonly sandbox: ToolboxSandbox;
  /** The arguments of each toolbox started, joined ('serve' per session), in order. */
  readonly starts: readonly string[];
  /** Each toolbox process started, in order. */
  readonly processes: readonly ToolboxProcess[];
}

/** Before each test, a workspace from `makeWorkspace` and a sandbox in it; after it, both closed and removed. */
export function countedServeSandboxPerTest<W extends ServeWorkspace>(makeWorkspace: () => W): CountedServeSandbox<W> {
  let current: CountedServeSandbox<W> | undefined;
  beforeEach(() => {
    const workspace = makeWorkspace();
    const starts: string[] = [];
    const processes: ToolboxProcess[] = [];
    const local = new LocalProcessTransport({ toolboxPath: DEFAULT_TOOLBOX_PATH, workspaceDir: workspace.root, homeDir: workspace.home });
    const counted: ToolboxTransport = {
      start: async (args) => {
        starts.push(args.join(' '));
        const started = await local.start(args);
        processes.push(started);
        return started;
      },
    };
    current = { workspace, sandbox: new ToolboxSandbox(counted, { mode: 'serve' }), starts, processes };
  });
  afterEach(async () => {
    await current?.sandbox.close();
    current?.workspace.cleanup();
    current = undefined;
  });
  const made = (): CountedServeSandbox<W> => {
    if (!current) throw new Error('the sandbox is made for each test: use it inside a test or a hook');
    return current;
  };
  return {
    get workspace() {
      return made().workspace;
    },
    get sandbox() {
      return made().sandbox;
    },
    get starts() {
      return made().starts;
    },
    get processes() {
      return made().processes;
    },
  };
}
