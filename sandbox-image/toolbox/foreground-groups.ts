// The process groups of foreground bash commands (and of grep's second pass, whose xargs
// starts the engine) this toolbox process is waiting on. They run detached (their own group, so
// a timeout kills the whole tree), which also means they would outlive the toolbox; when the
// toolbox is told to stop (SIGTERM, SIGINT, SIGHUP: a client timeout, a closed session) it takes
// them down first. Background jobs are not in here: they are meant to outlive it.
const groups = new Set<number>();
let installed = false;

export function trackForegroundGroup(pid: number): () => void {
  installIfNeeded();
  groups.add(pid);
  return () => groups.delete(pid);
}

export function killForegroundGroups(): void {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  groups.clear();
}

function installIfNeeded(): void {
  if (installed) return;
  installed = true;
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killForegroundGroups();
      process.exit(128 + (signal === 'SIGHUP' ? 1 : signal === 'SIGINT' ? 2 : 15));
    });
  }
}
