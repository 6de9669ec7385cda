// The API server refused a run's status.egress in a way that writing the same counts again
// cannot change: the run is too large to store (etcd's "request is too large", a 413), the
// proxy may not write it (RBAC, the chart's `-egress-proxy-status` policy: 403), or the object
// is invalid (the CRD's schema: 422, a 400). The audit drops such counts with one log line;
// retried, each was a GET of the whole run, a PATCH and a warning at every flush, for ever.
import { apiRefusal, statusCodeOf } from '../kube/api-errors.ts';
import type { EgressRun } from './decide-connection.ts';

const name = 'EgressStatusRefusedError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class EgressStatusRefusedError extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  /** The HTTP code of the refusal. */
  readonly code: number | undefined;

  constructor(run: EgressRun, cause: unknown) {
    const code = statusCodeOf(cause);
    const said = (apiRefusal(cause)?.message ?? (cause instanceof Error ? cause.message : String(cause))).slice(0, 512);
    super(
      `The API server refused status.egress of run ${run.namespace}/${run.name} (HTTP ${code ?? '?'}: ${said}); ` +
        'these counts are not written, and the proxy log lines still hold each connection. ' +
        'A run too large to store takes no more status; a 403 is the proxy ServiceAccount RBAC or the chart status policy ' +
        '(ending -egress-proxy-status); a 422 or 400 is the CodingRun schema.',
      { cause },
    );
    this.code = code;
  }

  static isInstance(error: unknown): error is EgressStatusRefusedError {
    return typeof error === 'object' && error !== null && (error as { [marker]?: unknown })[marker] === true;
  }
}
