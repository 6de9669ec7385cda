// Where an informer of one of the operator's custom resources lists and watches: in one
// namespace, or (namespace undefined) across the cluster, optionally narrowed by a label.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { API_VERSION, GROUP, VERSION } from '../api/index.ts';
import { clientNodePage, type InformerSource, type ListAnswer } from './informer.ts';

export function customObjectSource<T>(
  custom: CustomObjectsApi,
  namespace: string | undefined,
  plural: string,
  labelSelector?: string,
): Pick<InformerSource<T>, 'path' | 'labelSelector' | 'list'> {
  const selector = labelSelector ? { labelSelector } : {};
  return {
    path: `/apis/${API_VERSION}${namespace ? `/namespaces/${namespace}` : ''}/${plural}`,
    ...selector,
    list: (page) => {
      const query = { group: GROUP, version: VERSION, plural, ...selector, ...clientNodePage(page) };
      return (namespace ? custom.listNamespacedCustomObject({ ...query, namespace }) : custom.listClusterCustomObject(query)) as Promise<
        ListAnswer<T>
      >;
    },
  };
}
