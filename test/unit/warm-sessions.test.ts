// The bookkeeping of tool sessions opened ahead into warm pool pods: one per ready pod, handed
// out once, kept a grace after its pod left the pool (the claimed run's job comes a moment
// later), then closed; never one of a pod that was replaced, ended or failed to open. The
// starter is a recorder of fake processes: what is under test is what WarmSessions decides.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { ToolboxProcess } from '../../operator/src/sandbox/toolbox-transport.ts';
import { LEFT_POOL_GRACE_MS, RETRY_AFTER_MS, WarmSessions, type PoolPodRef } from '../../operator/src/sandbox/warm-sessions.ts';

interface FakeProcess extends ToolboxProcess {
  pod: PoolPodRef;
  killed: boolean;
  end(): void;
}

function fakeProcess(pod: PoolPodRef): FakeProcess {
  let end!: () => void;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => (end = () => resolve({ code: 0, signal: null })));
  const process: FakeProcess = {
    pod,
    killed: false,
    stdin: new PassThrough(),
    stdout: new PassThrough(),
    stderr: new PassThrough(),
    exited,
    kill() {
      process.killed = true;
      end();
    },
    end: () => end(),
  };
  return process;
}

function world(options: { failFor?: string } = {}) {
  let now = 1_000_000;
  const started: FakeProcess[] = [];
  const warnings: string[] = [];
  const sessions = new WarmSessions(
    async (pod) => {
      if (pod.name === options.failFor) throw new Error('exec refused');
      const process = fakeProcess(pod);
      started.push(process);
      return process;
    },
    { logger: { warn: (_fields, message) => warnings.push(message) }, now: () => now },
  );
  return { sessions, started, warnings, advance: (ms: number) => (now += ms) };
}

const pod = (name: string, uid = `uid-${name}`): PoolPodRef => ({ namespace: 'team', name, uid });
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('WarmSessions', () => {
  it('opens one session per ready pool pod, and no second one for a pod it holds', async () => {
    const { sessions, started } = world();
    sessions.keep([pod('a'), pod('b')]);
    sessions.keep([pod('a'), pod('b')]);
    await settle();
    expect(started.map((process) => process.pod.name)).toEqual(['a', 'b']);
    expect(sessions.size).toBe(2);
  });

  it("hands a pod's session out once, with the uid of the pod it was opened in", async () => {
    const { sessions, started } = world();
    sessions.keep([pod('a')]);
    const held = await sessions.take('team', 'a');
    expect(held).toEqual({ podUid: 'uid-a', process: started[0] });
    expect(await sessions.take('team', 'a')).toBeUndefined();
    expect(await sessions.take('other', 'a')).toBeUndefined();
    expect(started[0]!.killed).toBe(false);
  });

  it('keeps the session of a pod that left the pool (claimed) for the grace, for its run to take, then closes it', async () => {
    const { sessions, started, advance } = world();
    sessions.keep([pod('a'), pod('b')]);
    await settle();
    sessions.keep([pod('b')]);
    advance(LEFT_POOL_GRACE_MS - 1);
    sessions.keep([pod('b')]);
    expect(started[0]!.killed).toBe(false);
    advance(1);
    sessions.keep([pod('b')]);
    await settle();
    expect(started[0]!.killed).toBe(true);
    expect(await sessions.take('team', 'a')).toBeUndefined();
    expect(started[1]!.killed).toBe(false);
  });

  it('closes the session of a pod replaced under the same name, and opens one in the new pod', async () => {
    const { sessions, started } = world();
    sessions.keep([pod('a', 'uid-1')]);
    sessions.keep([pod('a', 'uid-2')]);
    await settle();
    expect(started.map((process) => [process.pod.uid, process.killed])).toEqual([
      ['uid-1', true],
      ['uid-2', false],
    ]);
    expect(await sessions.take('team', 'a')).toMatchObject({ podUid: 'uid-2', process: started[1] });
  });

  it('hands out no session that ended or failed to open, and tries that pod again only after a while', async () => {
    const { sessions, started, warnings, advance } = world({ failFor: 'bad' });
    sessions.keep([pod('a'), pod('bad')]);
    await settle();
    started[0]!.end();
    await settle();
    expect(await sessions.take('team', 'a')).toBeUndefined();
    expect(await sessions.take('team', 'bad')).toBeUndefined();
    expect(warnings).toEqual(['could not open a tool session ahead in a warm pool pod; its run will open one']);
    // Not at every pass: a pool whose pods refuse the exec would cost one per pod each time.
    sessions.keep([pod('a'), pod('bad')]);
    await settle();
    expect(started).toHaveLength(1);
    expect(warnings).toHaveLength(1);
    advance(RETRY_AFTER_MS);
    sessions.keep([pod('a'), pod('bad')]);
    expect((await sessions.take('team', 'a'))?.process).toBe(started[1]);
    expect(warnings).toHaveLength(2);
  });

  it('closes every session it holds when told to (leadership lost, shutdown)', async () => {
    const { sessions, started } = world();
    sessions.keep([pod('a'), pod('b')]);
    sessions.closeAll();
    await settle();
    expect(started.map((process) => process.killed)).toEqual([true, true]);
    expect(sessions.size).toBe(0);
  });
});
