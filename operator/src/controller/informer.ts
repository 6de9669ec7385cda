// A watch-based cache of one kind of object (client-go's reflector + store, small):
// list once (in pages, as client-go's reflector does), then watch from the list's
// resourceVersion; resume from the last seen
// resourceVersion when a watch ends; relist only on 410 Gone; back off on errors (an API
// server restart). No polling. The server closes each watch after `timeoutSeconds`, and
// client-node's Watch ends one that brought nothing for 30 s (its inactivity timer), so a
// connection that died silently is noticed within half a minute.
import type { Watch } from '@kubernetes/client-node';
import { isClientTimeout, isGone } from '../kube/api-errors.ts';
import { isListRefused } from './list-refused.ts';
import type { ListPage } from '../kube/list-page.ts';

// The page types live in kube/ (gateways page their lists too); re-exported for the informer's users.
export { clientNodePage, type ListPage } from '../kube/list-page.ts';

export interface InformerSource<T> {
  /** Watch path, e.g. /api/v1/pods or /apis/chamvi.dev/v1alpha1/namespaces/x/codingruns */
  path: string;
  labelSelector?: string;
  /** e.g. metadata.name=x: one object of a kind by its name, in every watched namespace. */
  fieldSelector?: string;
  /**
   * One page of the list: at most `page.limit` objects, from `page.continue` (the token the
   * page before gave). A source may answer with everything at once (no token).
   */
  list(page: ListPage): Promise<ListAnswer<T>>;
  /**
   * What the cache keeps of each object (client-go's transform): the parts the reconciler
   * reads. Without it every object is kept whole for as long as it exists (less its
   * managedFields, which no cache keeps: withoutManagedFields).
   */
  slim?(object: T): T;
}

export interface ListAnswer<T> {
  items: T[];
  /** client-node's typed lists (V1PodList, ...) name the token `_continue`; the JSON, and so the custom objects' lists, `continue`. */
  metadata?: { resourceVersion?: string; continue?: string; _continue?: string };
}

/**
 * Objects per page of a list. A list answered whole is held whole: the answer's text and every
 * object parsed from it, before slim and withoutManagedFields take what the cache keeps. So a
 * start beside thousands of kept runs needed their whole list's size at once on top of the
 * cache (docs/benchmarks.md, "Kept runs"). client-go's reflector pages by 500 too.
 */
export const LIST_PAGE_LIMIT = 500;

/**
 * Objects per page of the operator's lists of CodingRuns, CodingEvals and CodingSchedules. One
 * may be up to etcd's ~1.5 MiB (a run's task and env, a schedule's run template), and a page is
 * held whole until its objects are in the cache: the answer's text and everything parsed from
 * it, about twice the text for long strings (3x allowed for). The bound is the operator's V8
 * heap, 160 MiB (the chart's heapLimitMiB, the image's --max-old-space-size), of which a settled
 * operator uses about 70: 10 such objects are 15 MiB of text, at most ~45 MiB held, under a
 * third of it. 100 were 150 MiB of text, past the limit by themselves (a schedule's runs listed
 * 100 a page ran the 160 MiB heap out inside JSON.parse); 20, ~90 MiB, would not leave the
 * settled operator room. The cost is a list round trip per 10 objects at a start and at a relist
 * (410 Gone) only; changes come by the watch. The egress proxy and a schedule's runs listing
 * page by 10 too (EGRESS_RUN_PAGE_LIMIT, SCHEDULE_RUN_PAGE_LIMIT).
 */
export const CODING_RUN_PAGE_LIMIT = 10;

export interface InformerHandlers<T> {
  onChange(object: T, previous: T | undefined): void;
  onDelete(object: T): void;
}

export interface InformerLogger {
  warn(fields: object, message: string): void;
}

/**
 * Told how the first list goes, for whoever decides whether to wait for this cache
 * (watched-namespaces.ts). Until the first list is in, its failures go here instead of the
 * log: the one told logs once per namespace, not once per informer and retry.
 */
export interface ListingProgress {
  /** A try at the first list failed; the informer tries again after its back-off. */
  listFailed(error: unknown): void;
  /** The first list is in the cache. */
  listed(): void;
}

/** The longest back-off between tries. */
export const RETRY_MAX_MS = 10_000;
/**
 * The longest back-off between tries at a list refused for good (list-refused.ts): only a change
 * to RBAC or to the namespace clears it, and an informer of a namespace whose RoleBinding a
 * tenant deleted would otherwise ask every 10 s for as long as the operator runs.
 */
export const REFUSED_RETRY_MAX_MS = 30_000;

/** What the informer needs of an object: its identity and version. */
export interface CachedObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
}

/**
 * Every cache drops `metadata.managedFields` (as controller-runtime's caches do with
 * TransformStripManagedFields): the API server's record of which client set which field. No
 * reader here uses it, and it is half of a finished run's JSON (3.1 of 6.4 KB; in the heap,
 * 9 of 13 MiB for 1000 runs). A cached object sent back in a PUT without it keeps the
 * server's: an update that leaves the field out does not change it.
 */
function withoutManagedFields<T extends CachedObject>(object: T): T {
  const metadata = object.metadata as (CachedObject['metadata'] & { managedFields?: unknown }) | undefined;
  if (metadata?.managedFields === undefined) return object;
  // A new metadata object, not a `delete`: V8 keeps an object with a deleted property in the slower dictionary form.
  const { managedFields: _dropped, ...rest } = metadata;
  return { ...object, metadata: rest };
}

const keyOf = (object: CachedObject) => `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;

export class Informer<T extends CachedObject> {
  private readonly store = new Map<string, T>();
  private resourceVersion = '';
  private stopped = false;
  private abort: AbortController | undefined;
  private synced = false;
  private readonly syncWaiters: Array<() => void> = [];
  private progress: ListingProgress | undefined;

  constructor(
    private readonly watch: Watch,
    private readonly source: InformerSource<T>,
    private readonly handlers: InformerHandlers<T>,
    private readonly logger: InformerLogger,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    private readonly pageLimit = LIST_PAGE_LIMIT,
  ) {}

  get hasSynced(): boolean {
    return this.synced;
  }

  /** Where it lists and watches, for log lines about it. */
  get path(): string {
    return this.source.path;
  }

  /** Tells `progress` of each failed try at the first list and of its success (see ListingProgress). */
  reportListing(progress: ListingProgress): void {
    this.progress = progress;
  }

  get(namespace: string, name: string): T | undefined {
    return this.store.get(`${namespace}/${name}`);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  /** Starts the loop; resolves once the first list is in the cache. */
  start(): Promise<void> {
    void this.loop();
    return this.synced ? Promise.resolve() : new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  private async loop(): Promise<void> {
    let backoffMs = 250;
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) await this.relist();
        await this.watchOnce();
        backoffMs = 250;
      } catch (error) {
        if (this.stopped) return;
        if (isGone(error)) {
          this.resourceVersion = '';
          continue;
        }
        if (!this.synced && this.progress) this.progress.listFailed(error);
        else this.logger.warn({ path: this.source.path, err: String(error), retryInMs: backoffMs }, 'watch failed; retrying');
        await this.sleep(backoffMs);
        backoffMs = Math.min(backoffMs * 2, isListRefused(error) ? REFUSED_RETRY_MAX_MS : RETRY_MAX_MS);
      }
    }
  }

  /**
   * Lists every object, page by page, each page's objects into the cache as it comes. The
   * pages are one snapshot of the API server's (one resourceVersion), so the watch goes on
   * from the last page's. A page that fails (a token expired after minutes: 410) ends this
   * list; the loop lists again from the first page.
   */
  private async relist(): Promise<void> {
    const seen = new Set<string>();
    let token: string | undefined;
    let resourceVersion = '';
    do {
      const list = await this.source.list({ limit: this.pageLimit, ...(token ? { continue: token } : {}) });
      for (const item of list.items) {
        const key = keyOf(item);
        seen.add(key);
        this.upsert(key, this.slim(item));
      }
      resourceVersion = list.metadata?.resourceVersion ?? '';
      token = list.metadata?.continue || list.metadata?._continue || undefined;
    } while (token);
    for (const [key, object] of this.store) {
      if (!seen.has(key)) {
        this.store.delete(key);
        this.handlers.onDelete(object);
      }
    }
    this.resourceVersion = resourceVersion;
    if (!this.synced) {
      this.synced = true;
      for (const resolve of this.syncWaiters.splice(0)) resolve();
      this.progress?.listed();
    }
  }

  private slim(object: T): T {
    const kept = withoutManagedFields(object);
    return this.source.slim ? this.source.slim(kept) : kept;
  }

  private upsert(key: string, object: T): void {
    const previous = this.store.get(key);
    if (previous?.metadata?.resourceVersion === object.metadata?.resourceVersion && previous) return;
    this.store.set(key, object);
    this.handlers.onChange(object, previous);
  }

  private watchOnce(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const query: Record<string, string | number | boolean> = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: 240 + Math.floor(Math.random() * 120),
      };
      if (this.source.labelSelector) query.labelSelector = this.source.labelSelector;
      if (this.source.fieldSelector) query.fieldSelector = this.source.fieldSelector;
      let failed: unknown;
      // Set once client-node has the answer's headers: from then on a TimeoutError is its
      // inactivity timer, not a connect that never came back.
      let connected = false;
      const onEvent = (type: string, object: T & { code?: number }) => {
        if (type === 'ERROR') {
          // A 410 inside the stream: our resourceVersion is too old; relist.
          failed =
            object.code === 410 ? Object.assign(new Error('resourceVersion too old'), { code: 410 }) : new Error(JSON.stringify(object));
          this.abort?.abort();
          return;
        }
        if (object.metadata?.resourceVersion) this.resourceVersion = object.metadata.resourceVersion;
        if (type === 'BOOKMARK') return;
        const key = keyOf(object);
        if (type === 'DELETED') {
          this.store.delete(key);
          this.handlers.onDelete(this.slim(object));
        } else {
          this.upsert(key, this.slim(object));
        }
      };
      const onDone = (error: unknown) => {
        const reason = failed ?? error;
        if (reason && !this.stopped && !(connected && isClientTimeout(reason))) reject(reason);
        else resolve();
      };
      this.watch
        .watch(this.source.path, query, onEvent, onDone)
        .then((abort) => {
          connected = true;
          this.abort = abort;
          if (this.stopped) abort.abort();
        })
        .catch(reject);
    });
  }
}
