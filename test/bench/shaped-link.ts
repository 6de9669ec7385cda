// A network link of a set speed for `make bench-egress`: a network namespace joined to this
// one by a veth pair, with a token bucket (tc tbf) on the far end's sending side, so whatever
// runs in the namespace sends at most that many bits per second, as a registry across a
// network does. Over loopback nothing limits a download but the two cores, and a relay hop
// costs a share of them; across a link the link is the limit, as it is for a user's install.
//
// Needs root, `ip` and `tc` (iproute2) and the kernel's tbf qdisc. openShapedLink() says why
// not instead of throwing, so the benchmark can report the loopback figures alone.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

// Fixed names: a benchmark killed midway leaves them behind, and the next run removes them.
const NAMESPACE = 'chamvi-egress-bench';
const HOST_SIDE = 'chamvi-eb0';
const FAR_SIDE = 'chamvi-eb1';
const HOST_ADDRESS = '10.231.0.1';
/** The address the far end (the upstream) listens on. */
export const LINK_ADDRESS = '10.231.0.2';

export interface ShapedLink {
  /** Limits what the far end sends to `gbit` Gbit/s (replacing any earlier limit). */
  setRate(gbit: number): void;
  /** Starts `command` inside the namespace; resolves with it once it prints its first line. */
  start(command: string[]): Promise<{ child: ChildProcess; firstLine: string }>;
  close(): void;
}

const run = (args: string[]) => execFileSync(args[0]!, args.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });

function removeLeftovers(): void {
  try {
    run(['ip', 'netns', 'delete', NAMESPACE]); // deleting the namespace deletes the veth pair
  } catch {
    // none left
  }
}

export function openShapedLink(): { link: ShapedLink } | { unavailable: string } {
  if (process.getuid?.() !== 0) return { unavailable: 'not root (a network namespace needs it)' };
  removeLeftovers();
  const children: ChildProcess[] = [];
  const close = () => {
    for (const child of children) child.kill('SIGTERM');
    removeLeftovers();
  };
  try {
    run(['ip', 'netns', 'add', NAMESPACE]);
    run(['ip', 'link', 'add', HOST_SIDE, 'type', 'veth', 'peer', 'name', FAR_SIDE]);
    run(['ip', 'link', 'set', FAR_SIDE, 'netns', NAMESPACE]);
    run(['ip', 'addr', 'add', `${HOST_ADDRESS}/30`, 'dev', HOST_SIDE]);
    run(['ip', 'link', 'set', HOST_SIDE, 'up']);
    run(['ip', 'netns', 'exec', NAMESPACE, 'ip', 'addr', 'add', `${LINK_ADDRESS}/30`, 'dev', FAR_SIDE]);
    run(['ip', 'netns', 'exec', NAMESPACE, 'ip', 'link', 'set', FAR_SIDE, 'up']);
    // Proves tbf is there before any figure depends on it.
    setRate(1);
  } catch (error) {
    close();
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    return { unavailable: `setting up the link failed: ${stderr || (error as Error).message}` };
  }

  function setRate(gbit: number): void {
    // A bucket of 1 MiB per Gbit/s: at least one timer tick's worth of bytes (rate / HZ), so the
    // bucket, not the tick, sets the pace. latency bounds the queue in front of it.
    const burst = `${Math.max(1, Math.round(gbit))}mb`;
    run([
      'ip',
      'netns',
      'exec',
      NAMESPACE,
      'tc',
      'qdisc',
      'replace',
      'dev',
      FAR_SIDE,
      'root',
      'tbf',
      'rate',
      `${gbit}gbit`,
      'burst',
      burst,
      'latency',
      '20ms',
    ]);
  }

  async function start(command: string[]) {
    const child = spawn('ip', ['netns', 'exec', NAMESPACE, ...command], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const firstLine = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`${command.join(' ')} exited (${code}) before it printed a line`)));
    });
    return { child, firstLine };
  }

  return { link: { setRate, start, close } };
}
