// What the egress proxy does with its CodingRun watch's changes (egress-run-watch.ts): the
// audit forgets a run's refused hosts once the run is no longer served (it ended), not only
// when the run is deleted, and keeps them while it is served, so a host is told once a run.
import { describe, expect, it } from 'vitest';
import type { CodingRun, EgressStatus, Phase } from '../../operator/src/api/index.ts';
import type { RunEvent } from '../../operator/src/reconcile/decision.ts';
import type { EgressRun } from '../../operator/src/egress/decide-connection.ts';
import { EgressAudit } from '../../operator/src/egress/egress-audit.ts';
import { EgressMetrics } from '../../operator/src/egress/egress-metrics.ts';
import { egressRunWatch } from '../../operator/src/egress/egress-run-watch.ts';
import { RunDirectory } from '../../operator/src/egress/run-directory.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const HOSTS = 64;

const run = (phase: Phase): CodingRun =>
  codingRunFixture({
    spec: { sandbox: { egress: { allow: ['registry.npmjs.org'] } } },
    status: { phase } as CodingRun['status'],
  });

function proxy() {
  const events: RunEvent[] = [];
  const written: Array<{ run: EgressRun; delta: EgressStatus }> = [];
  const noop = () => {};
  const audit = new EgressAudit({
    logger: { info: noop, warn: noop },
    metrics: new EgressMetrics({ defaultMetrics: false }),
    addToStatus: async (served, delta) => void written.push({ run: served, delta }),
    recordEvent: async (_run, event) => void events.push(event),
  });
  const directory = new RunDirectory();
  const watch = egressRunWatch(directory, audit);
  /** The sandbox asks for `host` on port 443 and is refused. */
  const refuse = (host: string) => {
    const served = directory.lookup('uid-1');
    expect(served).toBeDefined();
    audit.record({
      kind: 'connect',
      run: served,
      host,
      port: 443,
      allowed: false,
      rule: 'not-on-run-list',
      message: 'not on the run list',
      bytesSent: 0,
      bytesReceived: 0,
      durationMs: 1,
    });
  };
  return { audit, directory, watch, refuse, events, written };
}

describe('the egress proxy forgets a run when it stops serving it', () => {
  it("forgets an ended run's refused hosts at the change that ends it, and still writes its counts", async () => {
    const p = proxy();
    p.watch.onChange(run('Running'), undefined);
    for (let host = 0; host < HOSTS; host++) p.refuse(`h${host}.example`);
    expect(p.events).toHaveLength(HOSTS);
    expect(p.audit.runsRemembered).toBe(1);

    p.watch.onChange(run('Succeeded'), run('Running'));

    expect(p.directory.lookup('uid-1')).toBeUndefined();
    expect(p.audit.runsRemembered).toBe(0);
    await p.audit.flush();
    expect(p.written).toHaveLength(1);
    expect(p.written[0]!.delta.denied).toBe(HOSTS);
  });

  it('keeps the refused hosts of a run still served, so a host refused again is not told again', () => {
    const p = proxy();
    p.watch.onChange(run('Running'), undefined);
    p.refuse('h.example');
    p.watch.onChange(run('WaitingForApproval'), run('Running'));
    p.refuse('h.example');
    expect(p.audit.runsRemembered).toBe(1);
    expect(p.events).toHaveLength(1);
  });

  it('forgets a run deleted while it was served', () => {
    const p = proxy();
    p.watch.onChange(run('Running'), undefined);
    p.refuse('h.example');
    p.watch.onDelete(run('Running'));
    expect(p.directory.lookup('uid-1')).toBeUndefined();
    expect(p.audit.runsRemembered).toBe(0);
  });
});
