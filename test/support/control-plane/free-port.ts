// Free loopback TCP ports for the control plane's listeners, so several control planes
// (a dev cluster and a test run) can coexist on one machine.
import { freePort } from '../../../operator/src/cli/local/free-port.ts';

/** `count` distinct free ports. Another program could still take one before we bind it. */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}
