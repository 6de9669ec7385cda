// Job ids built from the run's UID and the step: adding a job whose id exists is a no-op in
// BullMQ, which makes every enqueue idempotent. BullMQ reserves ":" in ids, so none here.

export const QUEUE_NAME = 'chamvi-agent';

export type AgentJobName = 'prepare' | 'step' | 'finalize' | 'resume';

export interface AgentJobData {
  uid: string;
  namespace: string;
  name: string;
  /** step: the number of steps already completed when this job runs. */
  step?: number;
  /** resume: the approval answered. */
  approval?: { id: string; decision: 'approve' | 'deny'; reason?: string };
}

export const jobId = {
  prepare: (uid: string) => `${uid}-prepare`,
  step: (uid: string, completed: number) => `${uid}-step-${completed}`,
  finalize: (uid: string) => `${uid}-finalize`,
  resume: (uid: string, approvalId: string) => `${uid}-resume-${approvalId.replace(/[^A-Za-z0-9_-]/g, '_')}`,
};
