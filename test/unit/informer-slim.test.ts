import type { Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Informer, type CachedObject } from '../../operator/src/controller/informer.ts';

interface ConfigMap extends CachedObject {
  data?: Record<string, string>;
}

const bigDiff = 'x'.repeat(1_000_000);
const configMap = (name: string, resourceVersion: string): ConfigMap => ({
  metadata: { name, namespace: 'ns', resourceVersion, labels: { 'chamvi.dev/run': name } },
  data: { diff: bigDiff },
});

/** A Watch that delivers the given events once, then stays open until aborted. */
function watchDelivering(events: Array<[string, ConfigMap]>): Watch {
  return {
    watch: async (_path: string, _query: object, onEvent: (type: string, object: ConfigMap) => void, onDone: (error: unknown) => void) => {
      const controller = new AbortController();
      controller.signal.addEventListener('abort', () => onDone(undefined));
      queueMicrotask(() => events.splice(0).forEach(([type, object]) => onEvent(type, object)));
      return controller;
    },
  } as unknown as Watch;
}

describe('Informer with slim', () => {
  it('keeps only what slim returns, for listed objects and for watch events alike', async () => {
    const seen: ConfigMap[] = [];
    const informer = new Informer<ConfigMap>(
      watchDelivering([['ADDED', configMap('from-watch', '2')]]),
      {
        path: '/api/v1/namespaces/ns/configmaps',
        list: async () => ({ items: [configMap('from-list', '1')], metadata: { resourceVersion: '1' } }),
        slim: (object) => ({ metadata: object.metadata }),
      },
      { onChange: (object) => seen.push(object), onDelete: () => undefined },
      { warn: () => undefined },
    );
    await informer.start();
    await new Promise((resolve) => setTimeout(resolve, 10));
    informer.stop();

    expect(informer.get('ns', 'from-list')).toEqual({ metadata: configMap('from-list', '1').metadata });
    expect(informer.get('ns', 'from-watch')).toEqual({ metadata: configMap('from-watch', '2').metadata });
    expect(seen.every((object) => object.data === undefined)).toBe(true);
    expect(seen).toHaveLength(2);
  });

  it('keeps objects whole without slim', async () => {
    const informer = new Informer<ConfigMap>(
      watchDelivering([]),
      {
        path: '/api/v1/namespaces/ns/configmaps',
        list: async () => ({ items: [configMap('whole', '1')], metadata: { resourceVersion: '1' } }),
      },
      { onChange: () => undefined, onDelete: () => undefined },
      { warn: () => undefined },
    );
    await informer.start();
    informer.stop();
    expect(informer.get('ns', 'whole')?.data?.diff).toHaveLength(1_000_000);
  });
});

describe('Informer and managedFields', () => {
  const managed = (name: string, resourceVersion: string): ConfigMap => {
    const object = configMap(name, resourceVersion);
    return {
      ...object,
      metadata: { ...object.metadata, managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:data': {} } }] },
    } as ConfigMap;
  };
  const fieldsOf = (object: ConfigMap | undefined) => (object?.metadata as { managedFields?: unknown } | undefined)?.managedFields;

  it('keeps no managedFields, with or without slim, and everything else as it came', async () => {
    const seen: ConfigMap[] = [];
    const whole = new Informer<ConfigMap>(
      watchDelivering([['ADDED', managed('from-watch', '2')]]),
      {
        path: '/api/v1/namespaces/ns/configmaps',
        list: async () => ({ items: [managed('from-list', '1')], metadata: { resourceVersion: '1' } }),
      },
      { onChange: (object) => seen.push(object), onDelete: () => undefined },
      { warn: () => undefined },
    );
    const slimmed = new Informer<ConfigMap>(
      watchDelivering([]),
      {
        path: '/api/v1/namespaces/ns/configmaps',
        list: async () => ({ items: [managed('slimmed', '1')], metadata: { resourceVersion: '1' } }),
        slim: (object) => ({ metadata: object.metadata }),
      },
      { onChange: (object) => seen.push(object), onDelete: () => undefined },
      { warn: () => undefined },
    );
    await Promise.all([whole.start(), slimmed.start()]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    whole.stop();
    slimmed.stop();

    expect(seen).toHaveLength(3);
    for (const object of seen) expect(fieldsOf(object)).toBeUndefined();
    expect(whole.get('ns', 'from-list')).toEqual(configMap('from-list', '1'));
    expect(whole.get('ns', 'from-watch')).toEqual(configMap('from-watch', '2'));
    expect(slimmed.get('ns', 'slimmed')).toEqual({ metadata: configMap('slimmed', '1').metadata });
  });
});
