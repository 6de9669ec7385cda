// The egress proxy's caches of the CodingRuns: one informer per watched namespace (one across
// the cluster when none is named), each keeping a run as slimForEgress leaves it.
import type { CustomObjectsApi, Watch } from '@kubernetes/client-node';
import type { CodingRun } from '../api/index.ts';
import { Informer, type InformerHandlers, type InformerLogger } from '../controller/informer.ts';
import { egressRunSource } from './run-directory.ts';

/**
 * Runs per page of the proxy's lists. A page is read whole (its text and every object parsed
 * from it) before slimForEgress keeps a name and a host list of each, and a CodingRun may be up
 * to etcd's ~1.5 MiB: at the informers' default of 500, some 30 to 40 such runs filled the
 * proxy's 256 Mi at every start and every relist after a 410. Ten bound a page to ~15 MiB of
 * text; the price is a round trip per ten runs at start.
 */
export const EGRESS_RUN_PAGE_LIMIT = 10;

export function egressRunInformers(
  watch: Watch,
  custom: CustomObjectsApi,
  watchNamespaces: readonly string[],
  handlers: InformerHandlers<CodingRun>,
  logger: InformerLogger,
): Array<Informer<CodingRun>> {
  const namespaces: Array<string | undefined> = watchNamespaces.length > 0 ? [...watchNamespaces] : [undefined];
  return namespaces.map(
    (namespace) => new Informer<CodingRun>(watch, egressRunSource(custom, namespace), handlers, logger, undefined, EGRESS_RUN_PAGE_LIMIT),
  );
}
