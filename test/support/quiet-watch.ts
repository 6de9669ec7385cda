// client-node's Watch ends a watch that brought no data for `requestTimeoutMs` (30 s; the API
// server's bookmarks come about once a minute), so a quiet watch ends every half minute. Tests
// of what follows such an end shorten the timer so it ends every second, and count the ends:
// a test that sees none fails rather than passes if a client-node upgrade stops this working.
import { Watch, type KubeConfig } from '@kubernetes/client-node';

export function quietWatch(kubeConfig: KubeConfig, timeoutMs = 1000): { watch: Watch; timeouts(): number } {
  const watch = new Watch(kubeConfig);
  Object.assign(watch, { requestTimeoutMs: timeoutMs });
  const ends: string[] = [];
  const watchOnce = watch.watch.bind(watch);
  watch.watch = (path, query, onEvent, onDone) =>
    watchOnce(path, query, onEvent, (error) => {
      ends.push((error as { name?: string } | null)?.name ?? 'closed');
      onDone(error);
    });
  return { watch, timeouts: () => ends.filter((name) => name === 'TimeoutError').length };
}
