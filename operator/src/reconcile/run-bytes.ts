// How large a run counts as against MAX_RUN_BYTES (decide.ts): its JSON as the API server
// stores it (text/stored-json-bytes.ts: Go writes `<`, `>`, `&` and control characters as six
// bytes, which UTF-8 counted as one), plus one byte for each `$` in its sandbox env values. The
// sandbox pod writes each such `$` as `$$` (sandbox-pod.ts: Kubernetes would expand $(NAME)), so
// env values of `$` alone made a run just under the limit and a pod twice its size, past etcd's
// 1.5 MiB: the API server answered 500 "request is too large", which reads as temporary, and the
// run waited Pending for ever. Pure.
import { storedJsonBytes } from '../text/stored-json-bytes.ts';

interface EnvCarrier {
  sandbox?: { env?: ReadonlyArray<{ value?: unknown }> };
}

/** The `$` the pod adds for the env values of one spec (the run's own or its template's copy). */
function escapedEnvBytes(spec: EnvCarrier | undefined): number {
  let dollars = 0;
  for (const variable of spec?.sandbox?.env ?? []) {
    if (typeof variable.value !== 'string') continue;
    for (const character of variable.value) if (character === '$') dollars += 1;
  }
  return dollars;
}

/** The run's bytes as stored, with the `$` its pod's env doubles counted twice. */
export function runBytes(run: { metadata?: unknown; spec?: unknown; status?: unknown }): number {
  const template = (run.status as { template?: { spec?: EnvCarrier } } | undefined)?.template;
  return storedJsonBytes(run) + escapedEnvBytes(run.spec as EnvCarrier | undefined) + escapedEnvBytes(template?.spec);
}
