// The run's variables (spec.sandbox.env) that the sandbox pod holds back from its container's
// own environment, and the toolbox gives back to the model's commands only. pods/exec starts the
// toolbox with the container's environment, and node and the dynamic loader read these before
// any of the toolbox's code runs: NODE_OPTIONS=--require ./.pnp.cjs (Yarn PnP's usual setting),
// LD_PRELOAD or LD_LIBRARY_PATH naming the workspace ran the repository's code in the toolbox,
// and in every git and rg it starts, before any approval. Held, they reach the container as
// HELD_ENV_PREFIX + name, which node and the loader ignore, and bash (setup, verify and the
// model's commands) gets them back under their own names, so the run's shell is as it wrote it.
// Refusing them instead would refuse runs that set a larger heap for jest or tsc, which stored
// runs do. The run cannot set the prefixed names itself: the schema refuses CHAMVI_*.
// Shared by the operator (sandbox-pod.ts) and the toolbox (bash-session.ts, bash-jobs.ts). Pure.

/** Where a held variable is in the container's environment: this prefix, then its own name. */
export const HELD_ENV_PREFIX = 'CHAMVI_RUN_ENV_';

/** Prefixes of the names held back, with what reads them when the toolbox starts. */
const HELD: ReadonlyArray<readonly [prefix: string, readBy: string]> = [
  ['NODE_', 'node (NODE_OPTIONS can load any code, NODE_COMPILE_CACHE names compiled code to run)'],
  ['LD_', 'the dynamic loader, for node and every program the toolbox starts'],
  ['OPENSSL_', 'node at start (a config can load a module)'],
  ['GCONV_PATH', "the C library's iconv, which loads modules from it"],
];

/** True for a run variable the container's own environment must not hold. */
export function isHeldEnvName(name: string): boolean {
  return HELD.some(([prefix]) => name.startsWith(prefix));
}

/**
 * The environment of the model's commands from the toolbox's own: each held variable back under
 * its name (over whatever the image set), and no HELD_ENV_PREFIX names.
 */
export function releasedEnvironment(environment: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const released: NodeJS.ProcessEnv = {};
  const held: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(environment)) {
    if (!name.startsWith(HELD_ENV_PREFIX)) released[name] = value;
    else if (isHeldEnvName(name.slice(HELD_ENV_PREFIX.length))) held[name.slice(HELD_ENV_PREFIX.length)] = value;
  }
  return { ...released, ...held };
}
