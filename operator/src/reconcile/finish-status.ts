// The status of a run that has just ended, whoever ends it (the controller on a lost pod
// or a deadline, a worker on success or a budget): one function, so every terminal status
// has the same shape. Pure.
import type { CodingRunStatus } from '../api/index.ts';
import { findCondition, setCondition } from './conditions.ts';

export type TerminalPhase = 'Succeeded' | 'Failed' | 'Cancelled';

export function finishStatus(status: CodingRunStatus, phase: TerminalPhase, reason: string, message: string, generation: number, now: Date): CodingRunStatus {
  status.phase = phase;
  status.reason = reason;
  status.message = message.slice(0, 4096);
  status.completionTime = now.toISOString();
  delete status.pendingApproval;
  status.conditions = setCondition(status.conditions, { type: 'Complete', status: 'True', reason, message: status.message }, generation, now);
  if (findCondition(status.conditions, 'SandboxReady')?.status === 'True') {
    status.conditions = setCondition(status.conditions, { type: 'SandboxReady', status: 'False', reason: 'RunFinished', message: 'The sandbox is removed once the run ends.' }, generation, now);
  }
  if (findCondition(status.conditions, 'AwaitingApproval')?.status === 'True') {
    status.conditions = setCondition(status.conditions, { type: 'AwaitingApproval', status: 'False', reason, message: 'The run ended.' }, generation, now);
  }
  return status;
}
