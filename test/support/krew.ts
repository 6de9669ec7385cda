// krew itself, for the release test: the plugin's manifest and archive are installed by the
// real krew, not by an imitation of its rules. Built from source through the Go module proxy
// (`go install`, as the control plane's tools are) into the cache beside them, once.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

// v0.4.5 is not served by the Go module proxy; v0.4.4 reads the same v1alpha2 manifests.
export const KREW_VERSION = 'v0.4.4';

export function krewBinary(): string {
  const dir = path.join(process.env.CHAMVI_CACHE ?? path.join(homedir(), '.cache/chamvi-operator'), 'tools', `krew-${KREW_VERSION}`);
  const binary = path.join(dir, 'krew');
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  // A few minutes on a cold Go build cache; seconds after.
  execFileSync('go', ['install', `sigs.k8s.io/krew/cmd/krew@${KREW_VERSION}`], {
    env: { ...process.env, GOBIN: dir, GOTOOLCHAIN: 'local', CGO_ENABLED: '0', GOFLAGS: '-buildvcs=false' },
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 280_000,
  });
  return binary;
}
