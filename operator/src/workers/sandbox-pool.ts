// One kept sandbox connection per run's pod, shared by the jobs of that run in this
// process: a tool call then costs a message on an open exec session, not a new exec.
import type { ParsedCodingRun } from '../api/index.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';

export type SandboxFactory = (run: ParsedCodingRun) => Sandbox;

export class SandboxPool {
  private readonly sandboxes = new Map<string, Sandbox>();

  constructor(private readonly create: SandboxFactory) {}

  for(run: ParsedCodingRun): Sandbox {
    const key = run.metadata.uid;
    let sandbox = this.sandboxes.get(key);
    if (!sandbox) {
      sandbox = this.create(run);
      this.sandboxes.set(key, sandbox);
    }
    return sandbox;
  }

  async release(uid: string): Promise<void> {
    const sandbox = this.sandboxes.get(uid);
    this.sandboxes.delete(uid);
    await sandbox?.close().catch(() => undefined);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sandboxes.keys()].map((uid) => this.release(uid)));
  }
}
