// Where the control plane's programs live: build.sh builds them into a cache outside the
// repo and prints the directory. Everything that needs a binary asks here.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const buildScript = join(dirname(fileURLToPath(import.meta.url)), 'build.sh');

export const requiredBinaries = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubectl', 'kwok', 'helm'] as const;

/** The cache bin dir build.sh uses (it honours CHAMVI_CACHE and CHAMVI_K8S_VERSION). */
export function binDir(): string {
  return execFileSync('bash', [buildScript, '--print-bin-dir'], { encoding: 'utf8' }).trim();
}

/** The directory holding kwok's Exec/ClusterExec CRDs, copied there by build.sh. */
export function kwokCrdDir(bin: string): string {
  return join(dirname(bin), 'kwok-crds');
}

export function missingBinaries(bin: string): string[] {
  const missing: string[] = requiredBinaries.filter((name) => !existsSync(join(bin, name)));
  if (!existsSync(join(kwokCrdDir(bin), 'kwok.x-k8s.io_execs.yaml'))) missing.push('kwok-crds');
  return missing;
}

/**
 * Runs build.sh (a no-op taking seconds when everything is built) with its progress on
 * stderr, and returns the bin dir. The first build compiles Kubernetes: tens of minutes.
 */
export function ensureBinaries(): string {
  return execFileSync('bash', [buildScript], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .at(-1)!;
}

/** redis-server is a Debian package, not in the cache. */
export function redisServerPath(): string {
  for (const candidate of ['/usr/bin/redis-server', '/usr/local/bin/redis-server']) {
    if (existsSync(candidate)) return candidate;
  }
  try {
    return execFileSync('bash', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('redis-server not found: run test/support/control-plane/build.sh redis');
  }
}
