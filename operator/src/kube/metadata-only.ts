// Objects read as metadata only (PartialObjectMetadata, what client-go's metadata informers
// ask for). The controller keeps only the name and owner of its own ConfigMaps: a run's diff
// (up to 1 MiB, written again after each step that may have changed files) and its transcript
// chunks (written after every step). Watched whole, each of those writes carried the whole
// object to the leader, which parsed it to keep its metadata; listed whole, a start or a
// relist read every kept diff of every finished run in one answer, more than the operator's
// heap limit holds once a few hundred large diffs are kept (docs/benchmarks.md). Asked for as
// metadata, the API server sends about a kilobyte per object, whatever its data.
import { Watch, type KubeConfig, type RequestContext, type V1ObjectMeta } from '@kubernetes/client-node';
import type { JsonRequests } from './json-requests.ts';

/** The Accept of a watch, or a get, of metadata only. No fallback: a server that cannot answer so refuses (406), it does not send whole objects. */
export const METADATA_ONLY = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
export const METADATA_ONLY_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/** An object as metadata only: any kind's form without its body. */
export interface ObjectMetadata {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
}

/**
 * A Watch whose requests ask for metadata only. client-node's Watch takes the address and
 * the credentials from its KubeConfig (getCurrentCluster, applySecurityAuthentication: the
 * two it calls) and sets no Accept of its own; this config adds one to the request the
 * credentials went into. The integration test of this file fails if a client-node upgrade
 * stops sending it.
 */
export function metadataOnlyWatch(kubeConfig: KubeConfig): Watch {
  const config: Pick<KubeConfig, 'getCurrentCluster' | 'applySecurityAuthentication'> = {
    getCurrentCluster: () => kubeConfig.getCurrentCluster(),
    applySecurityAuthentication: async (context: RequestContext) => {
      await kubeConfig.applySecurityAuthentication(context);
      context.setHeaderParam('Accept', METADATA_ONLY);
    },
  };
  return new Watch(config as KubeConfig);
}

/** Lists `path` (a collection, e.g. /api/v1/namespaces/x/configmaps) as metadata only; one page of it with `page`. */
export async function listMetadata(
  requests: Pick<JsonRequests, 'get'>,
  path: string,
  labelSelector?: string,
  page?: { limit: number; continue?: string },
): Promise<{ items: ObjectMetadata[]; metadata?: { resourceVersion?: string; continue?: string } }> {
  const query = new URLSearchParams();
  if (labelSelector) query.set('labelSelector', labelSelector);
  if (page) query.set('limit', String(page.limit));
  if (page?.continue) query.set('continue', page.continue);
  const list = await requests.get<{ items?: ObjectMetadata[] | null; metadata?: { resourceVersion?: string; continue?: string } }>(
    query.size > 0 ? `${path}?${query}` : path,
    METADATA_ONLY_LIST,
  );
  // An empty PartialObjectMetadataList comes as `"items": null` (a nil slice in Go), not [].
  return { ...list, items: list.items ?? [] };
}
