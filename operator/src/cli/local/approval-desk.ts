// Approvals of a local run: the controller would wait for the chamvi.dev/approval
// annotation; here the desk watches the run, asks its Approver once per pending call, and
// hands the answer to the agent the way the controller hands on the annotation's. A
// question whose call is no longer pending (the run ended, or spec.approval.timeout passed
// and the reconciler denied it) is withdrawn.
import type { CodingRun } from '../../api/index.ts';
import type { ApprovalAnswer } from '../../reconcile/run-agent.ts';
import type { Approver } from './terminal-approver.ts';

export class ApprovalDesk {
  private readonly asked = new Set<string>();
  private asking: { id: string; abort: AbortController } | undefined;

  constructor(
    private readonly approver: Approver,
    private readonly answer: (run: CodingRun, answer: ApprovalAnswer) => Promise<void>,
    private readonly note: (message: string) => void,
  ) {}

  observe(run: CodingRun): void {
    const pending = run.status?.phase === 'WaitingForApproval' ? run.status.pendingApproval : undefined;
    if (this.asking && this.asking.id !== pending?.id) {
      this.note(`approval ${this.asking.id} is no longer pending; question withdrawn`);
      this.withdraw();
    }
    if (!pending || this.asked.has(pending.id)) return;
    this.asked.add(pending.id);
    const abort = new AbortController();
    this.asking = { id: pending.id, abort };
    const request = { runName: run.metadata.name, id: pending.id, toolName: pending.toolName, input: pending.input };
    this.approver(request, abort.signal).then(
      async (answer) => {
        if (abort.signal.aborted) return;
        this.asking = undefined;
        try {
          await this.answer(run, answer);
        } catch (error) {
          this.note(`could not pass on the answer to approval ${answer.id}: ${error instanceof Error ? error.message : String(error)}`);
        }
      },
      (error: unknown) => {
        if (abort.signal.aborted) return;
        this.asking = undefined;
        this.note(`could not ask about approval ${pending.id}: ${error instanceof Error ? error.message : String(error)}`);
      },
    );
  }

  /** Stops asking (the run ended or the plugin stops). */
  close(): void {
    this.withdraw();
  }

  private withdraw(): void {
    this.asking?.abort.abort();
    this.asking = undefined;
  }
}
