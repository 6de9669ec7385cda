// How GitOps tools read a CodingRun's health, by their own code: Argo CD's health script in
// the gopher-lua VM Argo CD uses, and kstatus (sigs.k8s.io/cli-utils, what Flux's health
// checks use). test/support/gitops-health/ is a small Go program over both; it is built once
// through the Go module proxy into the cache beside the control plane's tools, keyed by a
// digest of its sources, so a fresh machine (CI) builds it and a warm one reuses it.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';

const SOURCE_DIR = new URL('./gitops-health/', import.meta.url).pathname;
const ARGO_CM = new URL('../../docs/argocd/argocd-cm-codingrun-health.yaml', import.meta.url).pathname;
/** The argocd-cm key Argo CD reads a CodingRun's health script from. */
export const ARGO_HEALTH_KEY = 'resource.customizations.health.chamvi.dev_CodingRun';

export interface HealthVerdict {
  status: string;
  message: string;
  error?: string;
}

export function gitopsHealthBinary(): string {
  const digest = createHash('sha256');
  for (const file of readdirSync(SOURCE_DIR).sort()) digest.update(file).update(readFileSync(path.join(SOURCE_DIR, file)));
  const dir = path.join(
    process.env.CHAMVI_CACHE ?? path.join(homedir(), '.cache/chamvi-operator'),
    'tools',
    `gitops-health-${digest.digest('hex').slice(0, 16)}`,
  );
  const binary = path.join(dir, 'gitops-health');
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  // A minute or two on a cold Go module cache (apimachinery); seconds after.
  execFileSync('go', ['build', '-o', `${binary}.tmp`, '.'], {
    cwd: SOURCE_DIR,
    env: { ...process.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0', GOFLAGS: '-mod=readonly -buildvcs=false' },
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 280_000,
  });
  execFileSync('mv', [`${binary}.tmp`, binary]);
  return binary;
}

/** The Lua script of docs/argocd/argocd-cm-codingrun-health.yaml: what users paste into argocd-cm. */
export function argoHealthScript(): string {
  const data = (parse(readFileSync(ARGO_CM, 'utf8')) as { data: Record<string, string> }).data;
  return data[ARGO_HEALTH_KEY]!;
}

function judge(args: string[], objects: readonly object[]): HealthVerdict[] {
  const out = execFileSync(gitopsHealthBinary(), args, {
    input: objects.map((object) => JSON.stringify(object)).join('\n') + '\n',
    encoding: 'utf8',
    timeout: 30_000,
  });
  return out
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as HealthVerdict);
}

/** Argo CD's health of each object, from `scriptFile` (the argocd-cm script written to a file). */
export const argoHealth = (scriptFile: string, objects: readonly object[]) => judge(['argo', scriptFile], objects);
/** kstatus's status.Compute of each object: InProgress, Current, Failed, Terminating... */
export const kstatusHealth = (objects: readonly object[]) => judge(['kstatus'], objects);
