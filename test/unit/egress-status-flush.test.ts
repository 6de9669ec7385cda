// How the egress proxy's audit writes status.egress when the API server will not take it
// (egress-audit.ts with the real egress-status-writer.ts over a fake API server): a refusal
// for good (too large to store, RBAC, the status policy, the schema) drops the counts at once
// with one log line; other failures are retried a bounded number of flushes; a run the proxy
// forgot gets one last try; a run whose writes fail does not hold up the others; and a flush
// tick that comes while the last flush still runs is skipped instead of queued.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { EgressRun } from '../../operator/src/egress/decide-connection.ts';
import { EgressAudit } from '../../operator/src/egress/egress-audit.ts';
import { EgressMetrics } from '../../operator/src/egress/egress-metrics.ts';
import { createEgressStatusWriter } from '../../operator/src/egress/egress-status-writer.ts';

/** An error as client-node throws it: the HTTP code and the API server's Status body. */
function apiError(code: number, message: string): Error {
  return Object.assign(new Error(`HTTP-Code: ${code} Message: ${message}`), { code, body: { kind: 'Status', code, message } });
}

const served = (name: string): EgressRun => ({ namespace: 'team', name, uid: `uid-${name}`, allow: [] });

/**
 * A fake API server holding runs by name. `refuse(name, version)` answers a status PATCH of that
 * run with an error (or undefined to take it); `gate`, when set, holds every GET until it resolves.
 */
function fakeKube(refuse: (name: string, version: number) => Error | undefined) {
  const versions = new Map<string, number>();
  const calls = { gets: 0, patches: [] as string[], written: [] as string[] };
  let gate: Promise<void> | undefined;
  const kube = {
    async getRun(namespace: string, name: string): Promise<CodingRun | undefined> {
      calls.gets++;
      if (gate) await gate;
      const version = versions.get(name) ?? 1;
      return { metadata: { namespace, name, uid: `uid-${name}`, resourceVersion: String(version) }, status: {} } as CodingRun;
    },
    async patchRunStatus(_namespace: string, name: string, operations: object[]): Promise<CodingRun> {
      calls.patches.push(name);
      const tested = Number((operations[0] as { value: string }).value);
      const version = versions.get(name) ?? 1;
      if (tested !== version) throw apiError(422, 'the server rejected our request: test failed');
      const error = refuse(name, version);
      if (error) throw error;
      versions.set(name, version + 1);
      calls.written.push(name);
      return {} as CodingRun;
    },
    /** Another writer (the operator) changes the run: our next `test` of the version fails. */
    bump(name: string) {
      versions.set(name, (versions.get(name) ?? 1) + 1);
    },
    hold(): () => void {
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      return () => {
        gate = undefined;
        release();
      };
    },
  };
  return { kube, calls };
}

function audit(kube: ReturnType<typeof fakeKube>['kube'], flushIntervalMs?: number) {
  const warnings: Array<{ fields: object; message: string }> = [];
  const subject = new EgressAudit({
    logger: { info: () => {}, warn: (fields, message) => void warnings.push({ fields, message }) },
    metrics: new EgressMetrics({ defaultMetrics: false }),
    addToStatus: createEgressStatusWriter(kube),
    recordEvent: async () => {},
    ...(flushIntervalMs ? { flushIntervalMs } : {}),
  });
  const connect = (name: string) =>
    subject.record({
      kind: 'connect',
      run: served(name),
      host: 'registry.npmjs.org',
      port: 443,
      allowed: true,
      bytesSent: 1,
      bytesReceived: 1,
      durationMs: 1,
    });
  return { audit: subject, connect, warnings };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('the egress audit drops counts the API server refuses for good', () => {
  const refusals: Array<[string, Error, number]> = [
    ['etcd: request is too large (500)', apiError(500, 'etcdserver: request is too large'), 1],
    ['too large (413)', apiError(413, 'Request entity too large: limit is 3145728'), 1],
    ['RBAC or the status policy (403)', apiError(403, 'the egress proxy may write only status.egress of a CodingRun'), 1],
    ['a bad request (400)', apiError(400, 'the body of the request was in an unknown format'), 1],
    // A 422 with the version unchanged is not our `test` failing: the schema refused the object.
    ['the schema (422, nobody wrote in between)', apiError(422, 'status.egress.hosts: Too many: 33: must have at most 32 items'), 2],
  ];

  it.each(refusals)('%s: one PATCH, one warning, never tried again', async (_case, error, gets) => {
    const { kube, calls } = fakeKube(() => error);
    const { audit: subject, connect, warnings } = audit(kube);
    connect('big');
    for (let flush = 0; flush < 10; flush++) await subject.flush();
    expect(calls.patches).toHaveLength(1);
    expect(calls.gets).toBe(gets);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/refused for good/);
    // The warning says what the API server said.
    expect((warnings[0]!.fields as { err: string }).err).toContain((error as unknown as { body: { message: string } }).body.message);
    expect(subject.runsPending).toBe(0);
    // A refusal for good of one run does not stop another's counts.
    connect('other');
    await subject.flush();
    expect(calls.patches).toEqual(['big', 'other']);
  });

  it('a run refused for good that goes on connecting costs no write until the proxy forgets it', async () => {
    const { kube, calls } = fakeKube((name) => (name === 'big' ? apiError(500, 'etcdserver: request is too large') : undefined));
    const { audit: subject, connect, warnings } = audit(kube);
    for (let flush = 0; flush < 10; flush++) {
      connect('big');
      await subject.flush();
    }
    expect(calls.gets).toBe(1);
    expect(calls.patches).toEqual(['big']);
    expect(warnings).toHaveLength(1);
    expect(subject.runsPending).toBe(0);
    // Forgotten (the run ended) and served again under the same uid: written again.
    subject.forget('uid-big');
    connect('big');
    await subject.flush();
    expect(calls.patches).toEqual(['big', 'big']);
  });

  it('still retries a 422 that is a concurrent write (the version moved) and adds the counts', async () => {
    let bumped = false;
    const { kube, calls } = fakeKube(() => undefined);
    const realPatch = kube.patchRunStatus.bind(kube);
    kube.patchRunStatus = async (namespace, name, operations) => {
      if (!bumped) {
        bumped = true;
        kube.bump(name);
      }
      return realPatch(namespace, name, operations);
    };
    const { audit: subject, connect, warnings } = audit(kube);
    connect('busy');
    await subject.flush();
    expect(calls.written).toEqual(['busy']);
    expect(calls.patches).toHaveLength(2);
    expect(warnings).toHaveLength(0);
  });
});

describe('the egress audit bounds its retries of failures that may clear', () => {
  it('retries a run answered 503 for a bounded number of flushes, warning twice, then drops its counts', async () => {
    const { kube, calls } = fakeKube(() => apiError(503, 'the server is currently unable to handle the request'));
    const { audit: subject, connect, warnings } = audit(kube);
    connect('unlucky');
    for (let flush = 0; flush < 100; flush++) await subject.flush();
    expect(calls.patches.length).toBeGreaterThan(1);
    expect(calls.patches.length).toBeLessThanOrEqual(30);
    expect(subject.runsPending).toBe(0);
    expect(warnings.map((w) => w.message)).toEqual([expect.stringMatching(/kept/), expect.stringMatching(/dropped/)]);
  });

  it('writes counts kept after a failure once the API server takes them again', async () => {
    let down = true;
    const { kube, calls } = fakeKube(() => (down ? apiError(503, 'unavailable') : undefined));
    const { audit: subject, connect } = audit(kube);
    connect('r');
    await subject.flush();
    connect('r');
    down = false;
    await subject.flush();
    expect(calls.written).toEqual(['r']);
    expect(subject.runsPending).toBe(0);
  });

  it('gives a run it forgot one last try, then drops its counts', async () => {
    const { kube, calls } = fakeKube(() => apiError(503, 'unavailable'));
    const { audit: subject, connect } = audit(kube);
    connect('ended');
    await subject.flush();
    expect(calls.patches).toHaveLength(1);
    subject.forget('uid-ended');
    for (let flush = 0; flush < 10; flush++) await subject.flush();
    expect(calls.patches).toHaveLength(2);
    expect(subject.runsPending).toBe(0);
  });

  it("writes a healthy run's counts before retrying runs whose writes keep failing", async () => {
    const { kube, calls } = fakeKube((name) => (name.startsWith('stuck') ? apiError(503, 'unavailable') : undefined));
    const { audit: subject, connect } = audit(kube);
    for (let run = 0; run < 5; run++) connect(`stuck-${run}`);
    await subject.flush();
    calls.patches.length = 0;
    connect('healthy');
    await subject.flush();
    expect(calls.patches[0]).toBe('healthy');
    expect(calls.written).toEqual(['healthy']);
  });
});

describe('the egress audit does not pile flushes up', () => {
  it('skips a flush tick while the last flush still waits on the API server', async () => {
    vi.useFakeTimers();
    const { kube, calls } = fakeKube(() => apiError(503, 'unavailable'));
    const { audit: subject, connect } = audit(kube, 100);
    connect('slow');
    const release = kube.hold();
    subject.start();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(calls.gets).toBe(1);
    release();
    // Let the held flush finish; no timer runs, so nothing queued behind it may start.
    for (let turn = 0; turn < 50; turn++) await Promise.resolve();
    expect(calls.gets).toBe(1);
    expect(calls.patches).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(calls.gets).toBe(2);
    await subject.stop();
  });

  it('stop() waits for the flush under way and then writes what came in meanwhile', async () => {
    const { kube, calls } = fakeKube(() => undefined);
    const { audit: subject, connect } = audit(kube, 60_000);
    connect('a');
    const release = kube.hold();
    const first = subject.flush();
    // Once the flush holds a's read: b comes in after it took what was pending.
    await vi.waitFor(() => expect(calls.gets).toBe(1));
    connect('b');
    const stopped = subject.stop();
    release();
    await Promise.all([first, stopped]);
    expect(calls.written.sort()).toEqual(['a', 'b']);
  });
});
