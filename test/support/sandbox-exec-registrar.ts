// Gives every operator sandbox pod on the local control plane a workspace: kwok runs a pod's
// exec'd commands on this machine, so each pod labelled app.kubernetes.io/name=chamvi-sandbox
// gets a temporary workspace and home directory and a kwok Exec object pointing its
// CHAMVI_WORKSPACE/CHAMVI_HOME there; when the pod goes, so do they (and its background jobs,
// which on a real node would have died with the pod). Used by e2e tests, `make run` and the demo.
//
//   npx tsx test/support/sandbox-exec-registrar.ts --kubeconfig K --root DIR
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { killBackgroundJobs } from '../../operator/src/sandbox/local-sandbox.ts';
import { podExecManifest } from './control-plane/pod-exec.ts';
import { EGRESS_ENV_NAMES } from '../../operator/src/reconcile/sandbox-egress.ts';

export const SANDBOX_POD_SELECTOR = 'app.kubernetes.io/name=chamvi-sandbox';

/**
 * The pod's egress proxy variables (issue #12): a kubelet gives the container its env, kwok's
 * exec gives only the Exec object's, so these are passed on to keep a run's egress real here.
 */
function egressEnvOf(pod: V1Pod): Record<string, string> {
  const container = pod.spec?.containers.find((candidate) => candidate.name === 'sandbox');
  return Object.fromEntries(
    (container?.env ?? [])
      .filter((variable) => EGRESS_ENV_NAMES.includes(variable.name))
      .map((variable) => [variable.name, variable.value ?? '']),
  );
}

export interface PodWorkspace {
  workspaceDir: string;
  homeDir: string;
}

export interface SandboxExecRegistrar {
  /** The workspace of a pod seen so far, or undefined. */
  workspaceOf(namespace: string, podName: string): PodWorkspace | undefined;
  /** Resolves once the pod has a registered Exec (the registrar watches; this waits). */
  waitForWorkspace(namespace: string, podName: string, timeoutMs?: number): Promise<PodWorkspace>;
  stop(): Promise<void>;
}

export interface SandboxExecRegistrarOptions {
  kubeconfig: string;
  /** Parent of the per-pod directories (created if missing). */
  rootDir: string;
  labelSelector?: string;
  log?: (message: string) => void;
}

const EXEC_GROUP = 'kwok.x-k8s.io';
const EXEC_VERSION = 'v1alpha1';
const EXEC_PLURAL = 'execs';
/** The waits between writes of a pod's Exec object that failed: 250 ms, doubled up to 4 s. */
const FIRST_RETRY_MS = 250;
const LONGEST_RETRY_MS = 4_000;

interface Entry {
  uid: string;
  workspace: Promise<PodWorkspace>;
}

export async function startSandboxExecRegistrar(options: SandboxExecRegistrarOptions): Promise<SandboxExecRegistrar> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(options.kubeconfig);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const labelSelector = options.labelSelector ?? SANDBOX_POD_SELECTOR;
  const log = options.log ?? (() => undefined);
  await mkdir(options.rootDir, { recursive: true });
  const rootDir = realpathSync(options.rootDir);
  const entries = new Map<string, Entry>();
  const ready = new Map<string, PodWorkspace>();
  const key = (namespace: string, podName: string) => `${namespace}/${podName}`;

  async function register(pod: V1Pod): Promise<PodWorkspace> {
    const { namespace = 'default', name = '', uid = '' } = pod.metadata ?? {};
    // Keyed by name, not uid: kwok matches Exec objects by pod name and may keep using an
    // Exec it cached a moment longer, so a pod re-created under the same name must find its
    // workspace at the same path. It starts empty: the previous pod's files are wiped.
    const base = path.join(rootDir, namespace, name);
    const workspace = { workspaceDir: path.join(base, 'workspace'), homeDir: path.join(base, 'home') };
    await killBackgroundJobs(workspace.homeDir).catch(() => undefined);
    await rm(base, { recursive: true, force: true });
    await mkdir(workspace.workspaceDir, { recursive: true });
    await mkdir(workspace.homeDir, { recursive: true });
    const manifest = podExecManifest({
      namespace,
      podName: name,
      workDir: workspace.workspaceDir,
      // The sandbox image's compile cache (sandbox-image/Dockerfile), one for every pod here:
      // the first toolbox start fills it, as the image's build does. Node writes it through a
      // rename and checks its hash when reading, so starts side by side are safe.
      env: {
        ...egressEnvOf(pod),
        CHAMVI_WORKSPACE: workspace.workspaceDir,
        CHAMVI_HOME: workspace.homeDir,
        NODE_COMPILE_CACHE: path.join(rootDir, 'node-compile-cache'),
      },
    });
    // Written again until the API server takes it: a write that failed once (an API server slow
    // under load, a refusal) left the pod with no Exec for its life, every exec into it failed,
    // and a run spent its job's tries (about 90 s) short of its phase. Not the directories:
    // a write that failed may still have landed, and kwok may already run commands in them.
    for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, LONGEST_RETRY_MS)) {
      try {
        await writeExec(namespace, name, manifest);
        break;
      } catch (error) {
        // Gone, or another pod under its name now (whose own registration follows this one).
        if (stopped || entries.get(key(namespace, name))?.uid !== uid) throw error;
        log(`could not register exec for ${namespace}/${name} (${String(error)}); trying again in ${wait} ms`);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
    ready.set(key(namespace, name), workspace);
    log(`registered exec for ${namespace}/${name} in ${base}`);
    return workspace;
  }

  /**
   * Creates the pod's Exec object, or replaces the one already under its name (an older pod's,
   * or this registration's own create whose answer was lost). The API server replaces a custom
   * object only at the resourceVersion it holds: a replace without one is refused (422).
   */
  async function writeExec(namespace: string, name: string, manifest: object): Promise<void> {
    const object = { group: EXEC_GROUP, version: EXEC_VERSION, namespace, plural: EXEC_PLURAL };
    try {
      await custom.createNamespacedCustomObject({ ...object, body: manifest });
    } catch (error) {
      if (statusCode(error) !== 409) throw error;
      const current = (await custom.getNamespacedCustomObject({ ...object, name })) as { metadata?: { resourceVersion?: string } };
      const metadata = { ...(manifest as { metadata: object }).metadata, resourceVersion: current.metadata?.resourceVersion };
      await custom.replaceNamespacedCustomObject({ ...object, name, body: { ...manifest, metadata } });
    }
  }

  async function release(namespace: string, name: string, entry: Entry): Promise<void> {
    const workspace = await entry.workspace.catch(() => undefined);
    if (ready.get(key(namespace, name)) === workspace) ready.delete(key(namespace, name));
    // A newer pod of the same name owns the Exec object and the directory now.
    if (entries.has(key(namespace, name))) return;
    await custom
      .deleteNamespacedCustomObject({ group: EXEC_GROUP, version: EXEC_VERSION, namespace, plural: EXEC_PLURAL, name })
      .catch((error: unknown) => statusCode(error) === 404 || log(`could not delete the Exec of ${namespace}/${name}: ${String(error)}`));
    if (!workspace) return;
    await killBackgroundJobs(workspace.homeDir);
    await rm(path.dirname(workspace.workspaceDir), { recursive: true, force: true });
    log(`released ${namespace}/${name}`);
  }

  const informer = makeInformer<V1Pod>(kubeConfig, '/api/v1/pods', () => core.listPodForAllNamespaces({ labelSelector }), labelSelector);
  // Work on one pod name runs one piece at a time: a release of the old pod must not wipe
  // the directory or delete the Exec that a new pod of the same name just got.
  const chains = new Map<string, Promise<unknown>>();
  const serially = <T>(podKey: string, work: () => Promise<T>): Promise<T> => {
    const next = (chains.get(podKey) ?? Promise.resolve()).then(work, work);
    chains.set(
      podKey,
      next.catch(() => undefined),
    );
    return next;
  };
  // client-node's informer reports its own stop as a watch error (the aborted request), and
  // the handler below restarted it a second later: a stopped registrar went on registering
  // every later test's pods into its removed root, and replaced their Exec objects, racing the
  // registrar that owned them. Nothing happens once stopped.
  let stopped = false;
  const onPod = (pod: V1Pod) => {
    if (stopped) return;
    const { namespace = 'default', name = '', uid = '' } = pod.metadata ?? {};
    const current = entries.get(key(namespace, name));
    if (current?.uid === uid) return;
    const workspace = serially(key(namespace, name), () => register(pod));
    workspace.catch((error: unknown) => log(`could not register exec for ${namespace}/${name}: ${String(error)}`));
    entries.set(key(namespace, name), { uid, workspace });
  };
  informer.on('add', onPod);
  informer.on('update', onPod);
  informer.on('delete', (pod) => {
    if (stopped) return;
    const { namespace = 'default', name = '', uid = '' } = pod.metadata ?? {};
    const current = entries.get(key(namespace, name));
    if (!current || current.uid !== uid) return;
    entries.delete(key(namespace, name));
    void serially(key(namespace, name), () => release(namespace, name, current));
  });
  informer.on('error', (error) => {
    if (stopped) return;
    log(`pod watch failed (${String(error)}); restarting it`);
    setTimeout(() => stopped || void informer.start().catch(() => undefined), 1_000).unref();
  });
  await informer.start();

  return {
    workspaceOf: (namespace, podName) => ready.get(key(namespace, podName)),
    async waitForWorkspace(namespace, podName, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const workspace = ready.get(key(namespace, podName));
        if (workspace) return workspace;
        if (Date.now() > deadline) throw new Error(`no sandbox workspace for ${namespace}/${podName} after ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async stop() {
      stopped = true;
      await informer.stop();
      const all = [...entries];
      entries.clear();
      await Promise.all(
        all.map(([podKey, entry]) => {
          const [namespace = '', name = ''] = podKey.split('/');
          return serially(podKey, () => release(namespace, name, entry));
        }),
      );
      await killPodProcesses(rootDir);
    },
  };
}

/** The pids of the processes whose environment puts their home under `rootDir`: the pods' toolboxes kwok started, and their children. */
async function podProcesses(rootDir: string): Promise<number[]> {
  const marker = `CHAMVI_HOME=${rootDir}${path.sep}`;
  const pids = (await readdir('/proc')).filter((entry) => /^\d+$/.test(entry)).map(Number);
  const found = await Promise.all(
    pids.map(async (pid) => {
      // Gone meanwhile, or a zombie (its environment reads empty): not a pod's any more.
      const environ = await readFile(`/proc/${pid}/environ`, 'latin1').catch(() => '');
      return environ.split('\0').some((entry) => entry.startsWith(marker)) ? pid : undefined;
    }),
  );
  return found.filter((pid): pid is number => pid !== undefined && pid !== process.pid);
}

/**
 * On a node a pod's processes die with it. kwok's exec'd toolbox does not: it lives until its
 * exec stream closes and can finish a call after its pod is gone, writing its call journal
 * into a home already removed, after the test removed the root too (the e2e endings and
 * deletion tests left such directories in /tmp). The registrar's stop kills what is left of
 * them, and waits until they are gone. Once, at the end, not per pod: a scan of /proc per
 * deleted pod would cost the N=1000 benchmark, which runs this registrar, seconds of CPU.
 */
async function killPodProcesses(rootDir: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let pids = await podProcesses(rootDir); pids.length > 0 && Date.now() < deadline; pids = await podProcesses(rootDir)) {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function statusCode(error: unknown): number | undefined {
  // client-node 1.x throws an ApiException carrying the HTTP status as `code`.
  return error && typeof error === 'object' && 'code' in error && typeof error.code === 'number' ? error.code : undefined;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { kubeconfig: { type: 'string' }, root: { type: 'string' } } });
  const kubeconfig = values.kubeconfig ?? process.env.KUBECONFIG;
  if (!kubeconfig || !values.root) {
    console.error('usage: sandbox-exec-registrar.ts --kubeconfig FILE --root DIR');
    process.exit(2);
  }
  const registrar = await startSandboxExecRegistrar({
    kubeconfig,
    rootDir: values.root,
    log: (message) => console.error(`sandbox-exec-registrar: ${message}`),
  });
  console.error(`sandbox-exec-registrar: watching pods (${SANDBOX_POD_SELECTOR}), workspaces under ${values.root}`);
  const stop = () => void registrar.stop().finally(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
