// The launcher helper's relay of its children's output (workers/output-relay.ts), with real
// children writing far more than the channel takes and a channel the test drains only when
// the relay waits for it: what the helper holds unsent stays bounded, every byte still arrives
// in order, and a child that starts while the channel is backlogged waits too.
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { FromLauncher } from '../../operator/src/workers/process-launcher.ts';
import { spawnGroupLeader, type LaunchedProcess } from '../../operator/src/workers/process-launcher.ts';
import { OutputRelay } from '../../operator/src/workers/output-relay.ts';

const MiB = 1024 * 1024;
/** The most a pipe's read hands over at once (libuv reads 64 KiB). */
const PIPE_READ_BYTES = 64 * 1024;

/** A channel that writes nothing until the relay waits for it, then everything it holds: the slowest reader that still reads. */
function slowChannel(getRelay: () => OutputRelay) {
  const unsent: Array<() => void> = [];
  const received = new Map<string, number>();
  let drains = 0;
  let draining = false;
  const send = (message: FromLauncher, sent: () => void) => {
    if (message.type === 'stdout' || message.type === 'stderr') {
      const key = `${message.id} ${message.type}`;
      received.set(key, (received.get(key) ?? 0) + message.data.byteLength);
    }
    unsent.push(sent);
    if (!getRelay().waiting || draining) return;
    draining = true;
    setImmediate(() => {
      drains++;
      draining = false;
      for (const done of unsent.splice(0)) done();
    });
  };
  return { send, received, drains: () => drains };
}

function closed(child: LaunchedProcess): Promise<number | null> {
  return new Promise((resolve) => child.on('close', (code) => resolve(code)));
}

const options = { cwd: tmpdir(), env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] };

describe('OutputRelay', () => {
  it('pauses the children while the channel holds more than its bound, and relays every byte once it drains', async () => {
    const maxHeldBytes = 256 * 1024;
    let relay: OutputRelay | undefined;
    const channel = slowChannel(() => relay!);
    relay = new OutputRelay(channel.send, maxHeldBytes);
    const writer = spawnGroupLeader('/bin/sh', ['-c', `head -c ${16 * MiB} /dev/zero`], options);
    relay.relay(1, 'stdout', writer.stdout!);
    relay.relay(1, 'stderr', writer.stderr!);
    const writing = closed(writer);
    // Started while the first is held back: its output waits for the same channel.
    const late = spawnGroupLeader('/bin/sh', ['-c', `head -c ${4 * MiB} /dev/zero >&2`], options);
    relay.relay(2, 'stdout', late.stdout!);
    relay.relay(2, 'stderr', late.stderr!);
    expect(await Promise.all([writing, closed(late)])).toEqual([0, 0]);
    expect(channel.received.get('1 stdout')).toBe(16 * MiB);
    expect(channel.received.get('2 stderr')).toBe(4 * MiB);
    // Never holding more than the bound and the chunk that passed it, and held back each time.
    expect(relay.mostHeldBytes).toBeLessThanOrEqual(maxHeldBytes + PIPE_READ_BYTES);
    expect(relay.mostHeldBytes).toBeGreaterThan(maxHeldBytes);
    expect(channel.drains()).toBeGreaterThan((20 * MiB) / (maxHeldBytes + PIPE_READ_BYTES) - 1);
  });
});
