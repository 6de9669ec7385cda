// The schedule controller's door to the API server: read a schedule and its template, list
// the schedule's runs a page at a time (always from the API server: a cache could miss a run
// created a moment ago), create runs under the one name each time has (a second create for it
// is refused, and answered with the run that holds the name), delete runs, write the
// schedule's status.
// The chart's RBAC for CodingSchedules and CodingRunTemplates can be read off this file.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type CodingRun } from '../api/index.ts';
import { TEMPLATE_PLURAL, type CodingRunTemplate } from '../api/coding-run-template.ts';
import { SCHEDULE_LABEL, SCHEDULE_PLURAL, type CodingSchedule, type CodingScheduleStatus } from '../api/coding-schedule.ts';
import { clientNodePage, type ListPage } from './list-page.ts';
import { isAlreadyExists, isNotFound, unlessNotFound } from './api-errors.ts';
import { onlyUid } from './kube-gateway.ts';

/**
 * What a create of a run answered: the run as stored, or the run already under its name (the
 * schedule's own, made by a try whose answer or status write was lost, or another's; undefined
 * when it was gone again by the time it was read).
 */
export type CreateRunAnswer = { created: CodingRun } | { taken: CodingRun | undefined };

/**
 * One page of a schedule's runs, with the token of the next (none: the last page). An array, so
 * that a list answered whole (a fake, a source that does not page) is the one and last page.
 */
export type ScheduleRunPage = CodingRun[] & { continue?: string };

export interface ScheduleGateway {
  getSchedule(namespace: string, name: string): Promise<CodingSchedule | undefined>;
  getTemplate(namespace: string, name: string): Promise<CodingRunTemplate | undefined>;
  /**
   * One page of the runs labelled with the schedule's name (the first, of SCHEDULE_RUN_PAGE_LIMIT,
   * without `page`); the caller checks the owner's uid. Anyone who may create CodingRuns can put
   * the label on runs of ~1.5 MiB each: a page is what bounds what one answer holds.
   */
  listScheduleRuns(namespace: string, scheduleName: string, page?: ListPage): Promise<ScheduleRunPage>;
  /** Creates the run under its name; AlreadyExists is answered with the run holding the name, read from the API server. */
  createRun(run: object & { metadata: { namespace: string; name: string } }): Promise<CreateRunAnswer>;
  /** Deletes the run with this uid (a precondition): another run made under the name since is a 409, and stays. */
  deleteRun(namespace: string, name: string, uid: string): Promise<void>;
  /** Replaces the status; 409 when the schedule's resourceVersion is stale. */
  replaceScheduleStatus(schedule: CodingSchedule, status: CodingScheduleStatus): Promise<CodingSchedule>;
}

/**
 * Runs asked for per page. A page is held whole while it is read: 100 runs of ~1.5 MiB (anyone
 * who may create CodingRuns can label theirs with the schedule's name) ran a 160 MiB heap out
 * inside JSON.parse; 10 are ~15 MiB of text and its parse, as the egress proxy lists runs.
 */
export const SCHEDULE_RUN_PAGE_LIMIT = 10;

export function createScheduleGateway(kubeConfig: KubeConfig): ScheduleGateway {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const path = (plural: string, namespace: string, name: string) => ({ group: GROUP, version: VERSION, plural, namespace, name });
  return {
    getSchedule: (namespace, name) =>
      unlessNotFound(custom.getNamespacedCustomObject(path(SCHEDULE_PLURAL, namespace, name)) as Promise<CodingSchedule>),
    getTemplate: (namespace, name) =>
      unlessNotFound(custom.getNamespacedCustomObject(path(TEMPLATE_PLURAL, namespace, name)) as Promise<CodingRunTemplate>),
    async listScheduleRuns(namespace, scheduleName, page = { limit: SCHEDULE_RUN_PAGE_LIMIT }) {
      const list = (await custom.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        namespace,
        labelSelector: `${SCHEDULE_LABEL}=${scheduleName}`,
        ...clientNodePage(page),
      })) as { items: CodingRun[]; metadata?: { continue?: string; _continue?: string } };
      // Custom objects' lists are plain JSON: the token is `continue` (client-node's typed lists say `_continue`).
      const token = list.metadata?.continue || list.metadata?._continue;
      return Object.assign(list.items, token ? { continue: token } : {});
    },
    async createRun(run) {
      const { namespace, name } = run.metadata;
      try {
        return {
          created: (await custom.createNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            plural: PLURAL,
            namespace,
            body: run,
          })) as CodingRun,
        };
      } catch (error) {
        if (!isAlreadyExists(error)) throw error;
      }
      return { taken: await unlessNotFound(custom.getNamespacedCustomObject(path(PLURAL, namespace, name)) as Promise<CodingRun>) };
    },
    async deleteRun(namespace, name, uid) {
      try {
        await custom.deleteNamespacedCustomObject({ ...path(PLURAL, namespace, name), ...onlyUid(uid) });
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    },
    async replaceScheduleStatus(schedule, status) {
      const body = { ...schedule, status };
      return (await custom.replaceNamespacedCustomObjectStatus({
        ...path(SCHEDULE_PLURAL, schedule.metadata.namespace, schedule.metadata.name),
        body,
      })) as CodingSchedule;
    },
  };
}
