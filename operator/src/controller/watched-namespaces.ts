// A controller's informers grouped by watched namespace (with watchNamespaces empty, one group:
// the whole cluster). A namespace's keys are reconciled only once every informer of it has its
// first list: a run whose pod cache is still empty looks as if its pod were gone. One namespace
// whose lists fail must not hold back the others, though: a tenant with `admin` in a watched
// namespace may delete the operator's RoleBinding there (the chart makes one per namespace), and
// a watched namespace deleted takes its Role with it; each answers every list with 403, for good.
// Such a namespace is set aside at once and the controller starts without it; any other failure
// (a 5xx, a dropped connection: an API server still starting) is waited for up to
// LISTING_GRACE_MS first, as a flaky API server at boot should not make a partial start. A
// namespace set aside is listed again in the background (the informer's back-off) and joins as
// soon as all its lists are in: the keys its objects queued meanwhile are handed back then.
import type { Informer } from './informer.ts';
import { isListRefused } from './list-refused.ts';
import { statusCodeOf } from '../kube/api-errors.ts';
import type { ReadinessDegraded } from '../observability/health-server.ts';

/** How long a namespace whose lists fail otherwise than refused (list-refused.ts) is waited for before the controller starts without it. */
export const LISTING_GRACE_MS = 60_000;

/** How a namespace's first lists stand: all in, worth waiting for, or set aside (the controller starts without it). */
export type NamespaceListing = 'listed' | 'waiting' | 'setAside';

/** One informer's first list, as namespaceListing reads it. */
export interface InformerListing {
  listed: boolean;
  /** The last failure of its first list, while it has not listed. */
  failure?: unknown;
}

/**
 * Pure: where a namespace stands, from its informers' first lists and how long the controller
 * has waited for them. A list that neither answers nor fails (a large one, page by page) is
 * waited for: only a failure says the namespace may never list.
 */
export function namespaceListing(informers: readonly InformerListing[], waitedMs: number, graceMs: number): NamespaceListing {
  if (informers.every((each) => each.listed)) return 'listed';
  const failing = informers.filter((each) => !each.listed && each.failure !== undefined);
  if (failing.some((each) => isListRefused(each.failure))) return 'setAside';
  return failing.length > 0 && waitedMs >= graceMs ? 'setAside' : 'waiting';
}

/** A namespace the controller started without, and why (the last failure of its lists). */
export interface UnlistedNamespace {
  /** The namespace; `*` for the whole cluster (watchNamespaces empty). */
  namespace: string;
  problem: string;
}

/**
 * Pure: what /readyz says of the caches. Not ready until the controller has started, nor when
 * no namespace listed at all (the operator reconciles nothing). Ready with a namespace set
 * aside: readiness gates the pod's Service and the rollouts, neither of which a tenant's
 * RoleBinding should hold up, and the leader would not list the namespace any sooner for being
 * taken out of them; the answer names it, as does the log.
 */
export function cachesReadiness(
  started: boolean,
  namespaces: number,
  unlisted: readonly UnlistedNamespace[],
): string | ReadinessDegraded | undefined {
  if (!started) return 'caches not synced yet';
  if (unlisted.length === 0) return undefined;
  const named = unlisted.map(({ namespace, problem }) => `${namespace} (${problem})`).join(', ');
  if (unlisted.length >= namespaces) return `no watched namespace could be listed: ${named}`;
  return { degraded: `reconciling without namespaces it cannot list, until they list: ${named}` };
}

export interface WatchedNamespacesLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface WatchedNamespacesOptions {
  /** Which controller's informers, for the log lines: runs, schedules, evals. */
  controller: string;
  logger: WatchedNamespacesLogger;
  /**
   * A namespace listed after the controller started without it, with the keys of it that
   * mayReconcile held back meanwhile: queue them.
   */
  onListed?: (namespace: string, heldKeys: string[]) => void;
  graceMs?: number;
  now?: () => number;
  setTimer?: (callback: () => void, ms: number) => unknown;
  clearTimer?: (timer: unknown) => void;
}

interface Group {
  /** The namespace; undefined for the whole cluster. */
  namespace: string | undefined;
  informers: Array<InformerListing & { path: string }>;
  listing: NamespaceListing;
  /** Whether its first failure was logged (once per namespace, not per informer and retry). */
  failureLogged: boolean;
  /** Keys of it that came while it had not listed, to hand back once it does. */
  held: Set<string>;
}

/** What the group needs of an informer (informer.ts), whatever kind it caches. */
export type WatchedInformer = Pick<Informer<never>, 'path' | 'reportListing' | 'start' | 'stop'>;

/** The key of the cluster-wide group: every namespace's keys belong to it. */
const CLUSTER = '*';

export class WatchedNamespaces {
  private readonly groups = new Map<string, Group>();
  private readonly informers: WatchedInformer[] = [];
  private readonly graceMs: number;
  private readonly now: () => number;
  private startedAt: number | undefined;
  private started = false;
  private stopped = false;
  private onStarted: (() => void) | undefined;
  private timer: unknown;

  constructor(private readonly options: WatchedNamespacesOptions) {
    this.graceMs = options.graceMs ?? LISTING_GRACE_MS;
    this.now = options.now ?? Date.now;
  }

  /** An informer of `namespace` (undefined: of the whole cluster); before start(). */
  add(namespace: string | undefined, informer: WatchedInformer): void {
    const name = namespace ?? CLUSTER;
    let group = this.groups.get(name);
    if (!group) {
      group = { namespace, informers: [], listing: 'waiting', failureLogged: false, held: new Set() };
      this.groups.set(name, group);
    }
    const entry: InformerListing & { path: string } = { listed: false, path: informer.path };
    group.informers.push(entry);
    const owner = group;
    informer.reportListing({
      listFailed: (error) => {
        entry.failure = error;
        this.update(owner);
      },
      listed: () => {
        entry.listed = true;
        delete entry.failure;
        this.update(owner);
      },
    });
    this.informers.push(informer);
  }

  /**
   * Starts every informer; resolves once each namespace has listed or is set aside (and at
   * stop(), so a start waiting on a replica that lost its lease returns).
   */
  start(): Promise<void> {
    this.startedAt = this.now();
    const started = new Promise<void>((resolve) => (this.onStarted = resolve));
    for (const informer of this.informers) void informer.start();
    // The grace's end is a change too: a namespace still failing then is set aside.
    const setTimer = this.options.setTimer ?? ((callback, ms) => setTimeout(callback, ms).unref());
    this.timer = setTimer(() => {
      for (const group of this.groups.values()) this.update(group);
    }, this.graceMs);
    this.settle();
    return started;
  }

  stop(): void {
    this.stopped = true;
    const clearTimer = this.options.clearTimer ?? ((timer) => clearTimeout(timer as NodeJS.Timeout));
    if (this.timer !== undefined) clearTimer(this.timer);
    for (const informer of this.informers) informer.stop();
    this.onStarted?.();
  }

  /** Whether every informer of the namespace has its first list. */
  listed(namespace: string): boolean {
    return this.groupOf(namespace)?.listing === 'listed';
  }

  /**
   * Whether the key (namespace/name) may be reconciled now: its namespace has listed. If not,
   * the key is kept, and handed to onListed when the namespace lists.
   */
  mayReconcile(key: string): boolean {
    const slash = key.indexOf('/');
    const group = slash < 0 ? undefined : this.groupOf(key.slice(0, slash));
    if (!group || group.listing === 'listed') return true;
    group.held.add(key);
    return false;
  }

  /** The namespaces not listed, once start() has resolved (before, every one is still waited for). */
  unlisted(): UnlistedNamespace[] {
    if (!this.started) return [];
    return [...this.groups.entries()]
      .filter(([, group]) => group.listing !== 'listed')
      .map(([namespace, group]) => ({ namespace, problem: problemOf(group) }));
  }

  /** What /readyz says of these caches (cachesReadiness). */
  readiness(): string | ReadinessDegraded | undefined {
    return cachesReadiness(this.started, this.groups.size, this.unlisted());
  }

  private groupOf(namespace: string): Group | undefined {
    return this.groups.get(namespace) ?? this.groups.get(CLUSTER);
  }

  /** A change to one of the group's informers, or the grace's end: logs a change of state, once. */
  private update(group: Group): void {
    if (this.startedAt === undefined || group.listing === 'listed') return;
    const was = group.listing;
    const is = namespaceListing(group.informers, this.now() - this.startedAt, this.graceMs);
    // Set aside stays set aside until it lists: a refusal that turns into a 5xx is no reason to wait again.
    if (is === 'waiting' && was === 'setAside') return;
    const fields = { controller: this.options.controller, namespace: group.namespace ?? CLUSTER };
    if (is === 'waiting' && !group.failureLogged && group.informers.some((each) => each.failure !== undefined)) {
      group.failureLogged = true;
      this.options.logger.warn(
        { ...fields, ...failureFields(group), waitMs: this.graceMs },
        'cannot list a watched namespace yet; waiting for it before reconciling without it',
      );
    }
    if (is === was) return;
    group.listing = is;
    if (is === 'setAside') {
      this.options.logger.warn(
        { ...fields, ...failureFields(group) },
        'cannot list a watched namespace: reconciling the other namespaces without it, and listing it again in the background. ' +
          "If the answer is 403, the operator's RoleBinding in it is gone: restore it (helm upgrade makes it again), or remove the namespace from watchNamespaces",
      );
    } else if (was === 'setAside') {
      const held = [...group.held];
      group.held.clear();
      this.options.logger.info({ ...fields, keys: held.length }, 'a watched namespace set aside has listed; reconciling it');
      if (!this.stopped) this.options.onListed?.(group.namespace ?? CLUSTER, held);
    }
    this.settle();
  }

  /** Resolves start() once no namespace is waited for. */
  private settle(): void {
    if (this.started || this.startedAt === undefined) return;
    if ([...this.groups.values()].some((group) => group.listing === 'waiting')) return;
    this.started = true;
    this.onStarted?.();
  }
}

function failureFields(group: Group): { paths: string[]; code: number | undefined; err: string } {
  const failing = group.informers.filter((each) => !each.listed && each.failure !== undefined);
  const first = failing[0]?.failure;
  return { paths: failing.map((each) => each.path), code: statusCodeOf(first), err: messageOf(first) };
}

function problemOf(group: Group): string {
  const failure = group.informers.find((each) => !each.listed && each.failure !== undefined)?.failure;
  if (failure === undefined) return 'not listed yet';
  const code = statusCodeOf(failure);
  return code === undefined ? messageOf(failure) : `HTTP ${code}`;
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 200);
}
