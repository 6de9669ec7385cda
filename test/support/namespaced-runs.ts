// Objects and CodingRuns in one namespace through the real kubectl, for e2e tests that apply a
// run (and what it names) and then follow its status.
import { stringify } from 'yaml';
import { kubectl } from './cluster.ts';
import { eventually } from './operator-process.ts';

/** `kubectl apply -n <namespace>` of the objects as one YAML stream; throws with kubectl's stderr. */
export async function applyIn(namespace: string, objects: readonly object[]): Promise<void> {
  const result = await kubectl(['apply', '-n', namespace, '-f', '-'], { input: objects.map((object) => stringify(object)).join('---\n') });
  if (result.code !== 0) throw new Error(result.stderr);
}

/** A CodingRun's .status as the API server holds it; {} before the operator has written one. */
export async function runStatus<S extends object>(namespace: string, name: string): Promise<S> {
  const result = await kubectl(['get', 'crun', name, '-n', namespace, '-o', 'jsonpath={.status}']);
  return result.stdout ? (JSON.parse(result.stdout) as S) : ({} as S);
}

/**
 * The run's status once its phase is terminal (Succeeded, Failed or Cancelled); throws after `timeoutMs`
 * with the last status it saw, so a run that never finished says where it stood.
 */
export async function finishedRun<S extends { phase?: string }>(namespace: string, name: string, timeoutMs: number): Promise<S> {
  let last: S | undefined;
  try {
    return await eventually(
      async () => {
        last = await runStatus<S>(namespace, name);
        return last.phase === 'Succeeded' || last.phase === 'Failed' || last.phase === 'Cancelled' ? last : undefined;
      },
      timeoutMs,
      `${name} to finish`,
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}; its last status: ${JSON.stringify(last ?? null)}`, { cause: error });
  }
}

/** `kubectl get events --field-selector <selector>` in the namespace, printed as `output` (trimmed). */
export async function eventsOf(namespace: string, fieldSelector: string, output = 'name'): Promise<string> {
  const result = await kubectl(['get', 'events', '-n', namespace, '--field-selector', fieldSelector, '-o', output]);
  if (result.code !== 0) throw new Error(result.stderr);
  return result.stdout.trim();
}
