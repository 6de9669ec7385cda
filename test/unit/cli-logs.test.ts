// `kubectl codingrun logs`: the transcript listed a page at a time through the real RunClient
// against a recording HTTP server (stopping once the reader is full), problems with chunks
// anyone in the namespace may write printed one line each, and `logs -f` that ends when the run
// is deleted while its watch is down.
import { createServer, type Server } from 'node:http';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { executeCommand, type CliOutput } from '../../operator/src/cli/execute-command.ts';
import { parseArguments } from '../../operator/src/cli/parse-arguments.ts';
import { printLogs, readerColumns } from '../../operator/src/cli/print-logs.ts';
import { createRunClient, TRANSCRIPT_PAGE_CHUNKS, type RunClient, type RunWatch } from '../../operator/src/cli/run-client.ts';
import {
  buildTranscriptChunk,
  encodeEntry,
  ENTRY_MAX_INFLATED,
  TRANSCRIPT_MAX_INFLATED_BYTES,
} from '../../operator/src/record/transcript-chunks.ts';
import type { TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';
import { loopbackKubeConfig } from '../support/loopback-kube-config.ts';
import { loopbackServers } from '../support/loopback-servers.ts';

const RUN_PATH = '/apis/chamvi.dev/v1alpha1/namespaces/team/codingruns/r';
const CONFIGMAPS_PATH = '/api/v1/namespaces/team/configmaps';

const run: CodingRun = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'r', namespace: 'team', uid: 'uid-1', resourceVersion: '10' },
  spec: {} as CodingRun['spec'],
  status: { phase: 'Succeeded', steps: 12 },
};

const step = (number: number): TranscriptEntry => ({
  key: `s${String(number).padStart(6, '0')}`,
  kind: 'step',
  step: number,
  at: '2026-03-01T12:00:00.000Z',
  text: { text: `step ${number} says hello` },
});

/** A chunk of the run's, as its writer makes it, holding these entries (key → bytes, base64 in the ConfigMap). */
const chunk = (index: number, entries: Record<string, Buffer>): V1ConfigMap => buildTranscriptChunk(run, index, entries);

/**
 * An API server holding the run and these ConfigMaps (all labelled as its transcript), which
 * serves a list `limit` at a time with a continue token, as the API server does, and all at
 * once when no limit is asked. Records each list's query.
 */
async function fakeApiServer(configMaps: V1ConfigMap[]) {
  const lists: Array<{ limit: string | null; continue: string | null }> = [];
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url!, 'http://localhost');
    const reply = (code: number, value: unknown) => {
      response.writeHead(code, { 'content-type': 'application/json' });
      response.end(JSON.stringify(value));
    };
    if (url.pathname === RUN_PATH) return reply(200, run);
    if (url.pathname !== CONFIGMAPS_PATH) return reply(404, { kind: 'Status', code: 404, message: `${url.pathname} not found` });
    const limit = url.searchParams.get('limit');
    const from = Number(url.searchParams.get('continue') ?? 0);
    lists.push({ limit, continue: url.searchParams.get('continue') });
    const to = limit ? from + Number(limit) : configMaps.length;
    return reply(200, {
      kind: 'ConfigMapList',
      apiVersion: 'v1',
      metadata: { resourceVersion: '20', ...(to < configMaps.length ? { continue: String(to) } : {}) },
      items: configMaps.slice(from, to),
    });
  });
  const kubeConfig = loopbackKubeConfig(await servers.listen(server), { namespace: 'team', token: 't' });
  return { client: createRunClient(kubeConfig), lists };
}

const servers = loopbackServers();

function output(signal?: AbortSignal) {
  const lines: string[] = [];
  const errors: string[] = [];
  const io: CliOutput = {
    out: (text) => lines.push(text),
    err: (text) => errors.push(text),
    now: () => new Date(),
    ...(signal ? { signal } : {}),
  };
  return { lines, errors, io };
}

/** The warnings on stderr, each put back on one line from the rows it was cut into (print-logs.ts). */
const joinedRows = (rows: string[]) =>
  rows.reduce<string[]>((lines, row) => {
    if (row.startsWith('  ↳ ') && lines.length > 0) lines[lines.length - 1] += row.slice('  ↳ '.length);
    else lines.push(row);
    return lines;
  }, []);

const logs = (argv: string[]) => parseArguments(['logs', ...argv]) as Extract<ReturnType<typeof parseArguments>, { command: 'logs' }>;

describe('logs lists the transcript a page at a time', () => {
  it('asks for pages of a bounded size, follows the continue tokens, and prints every entry in key order', async () => {
    // Twelve chunks; the API lists them by name, here the later steps first.
    const chunks = Array.from({ length: 12 }, (_, index) => {
      const { key, value } = encodeEntry(step(12 - index));
      return chunk(index, { [key]: value });
    });
    const api = await fakeApiServer(chunks);
    const { lines, errors, io } = output();
    expect(await executeCommand(logs(['r', '-n', 'team']), api.client, io)).toBe(0);

    expect(api.lists).toEqual([
      { limit: String(TRANSCRIPT_PAGE_CHUNKS), continue: null },
      { limit: String(TRANSCRIPT_PAGE_CHUNKS), continue: String(TRANSCRIPT_PAGE_CHUNKS) },
    ]);
    const said = lines.filter((line) => / says hello$/.test(line)).map((line) => Number(/step (\d+) says/.exec(line)![1]));
    expect(said).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(errors).toEqual([]);
  });

  it('stops listing once the reader is full: ConfigMaps past its bound are never fetched', async () => {
    // Unreadable entries count against the reader's bound as readable ones do, each as the
    // megabyte it may have inflated before it was found unreadable.
    const perChunk = 5;
    const full = Math.ceil(TRANSCRIPT_MAX_INFLATED_BYTES / ENTRY_MAX_INFLATED / perChunk);
    const junk = Buffer.from('not gzip');
    const owned = Array.from({ length: full }, (_, index) =>
      chunk(
        index,
        Object.fromEntries(
          Array.from({ length: perChunk }, (_, entry) => [
            `s${String(index + 1).padStart(6, '0')}-c${String(entry).padStart(6, '0')}`,
            junk,
          ]),
        ),
      ),
    );
    // Then as many again, labelled as the run's by anyone who may create ConfigMaps.
    const more = Array.from({ length: 40 }, (_, index) => ({
      ...chunk(0, { s000001: junk }),
      metadata: { ...chunk(0, {}).metadata, name: `zz-more-${String(index).padStart(3, '0')}` },
    }));
    const api = await fakeApiServer([...owned, ...more]);
    const { errors, io } = output();
    expect(await executeCommand(logs(['r', '-n', 'team']), api.client, io)).toBe(0);

    expect(api.lists.length).toBe(Math.ceil(full / TRANSCRIPT_PAGE_CHUNKS));
    expect(api.lists.every((list) => list.limit === String(TRANSCRIPT_PAGE_CHUNKS))).toBe(true);
    expect(joinedRows(errors)).toContainEqual(expect.stringMatching(/read up to 10000 entries .* the rest was left out/));
  });

  it('prints a problem with a chunk on one line, cut short: an ownerReference is free text to whoever wrote the ConfigMap', async () => {
    const { key, value } = encodeEntry(step(1));
    const mine = chunk(0, { [key]: value });
    const forged = `x\n\nstep 2 at 12:00:00\n  | all tests pass, approve the publish\n${'#'.repeat(3000)}`;
    const foreign = {
      ...chunk(1, {}),
      metadata: { ...chunk(1, {}).metadata, ownerReferences: [{ ...chunk(1, {}).metadata!.ownerReferences![0]!, uid: forged }] },
    };
    const api = await fakeApiServer([mine, foreign]);
    const { errors, io } = output();
    expect(await executeCommand(logs(['r', '-n', 'team']), api.client, io)).toBe(0);

    // One warning, cut into rows as the record is: each further row is marked, so none starts like a record line.
    expect(errors[0]).toMatch(/^warning: ignored ConfigMap \S+, labelled as /);
    expect(errors.slice(1).every((row) => row.startsWith('  ↳ '))).toBe(true);
    expect(joinedRows(errors)).toHaveLength(1);
    const warning = joinedRows(errors)[0]!;
    expect(warning).toMatch(/which the run does not own: .*x\^J\^Jstep 2 at/);
    expect(warning).not.toMatch(/[\n\r]/);
    expect(warning.length).toBeLessThan(600);
  });

  it("security: cuts a problem and the outcome into rows the reader's terminal holds, each further row marked", async () => {
    const forged = `${'y'.repeat(30)} step 2 approval s2-c1 of bash approved (sha256 ab) by alice at 12:00:01 (asked 11:59:50)`;
    const { key, value } = encodeEntry(step(1));
    const foreign = {
      ...chunk(1, {}),
      metadata: { ...chunk(1, {}).metadata, ownerReferences: [{ ...chunk(1, {}).metadata!.ownerReferences![0]!, uid: forged }] },
    };
    const api = await fakeApiServer([chunk(0, { [key]: value }), foreign]);
    for (const columns of [40, 80, 120]) {
      const { lines, errors, io } = output();
      expect(await printLogs(api.client, io, 'team', logs(['r']), columns)).toBe(0);
      for (const row of [...lines, ...errors]) expect(row.length).toBeLessThan(columns);
      expect(errors.slice(1).every((row) => row.startsWith('  ↳ '))).toBe(true);
      expect(lines.at(-1)).toMatch(/^(  ↳ |codingrun\/r Succeeded)/);
    }
  });
});

describe('readerColumns', () => {
  it("is stdout's width on a terminal, else stderr's (logs | less), else none: lines left whole for a file or a program", () => {
    expect(readerColumns({ isTTY: true, columns: 132 }, { isTTY: true, columns: 90 })).toBe(132);
    expect(readerColumns({}, { isTTY: true, columns: 90 })).toBe(90);
    expect(readerColumns({}, {})).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('logs -f when the run is deleted while its watch is down', () => {
  /** A watch that ends after `ms`, saying where to take up from (undefined: it failed). */
  const watchEnding = (ms: number, resumeFrom: string | undefined): RunWatch => ({
    ended: new Promise<void>((resolve) => setTimeout(resolve, ms)),
    stop: () => {},
    resumeFrom,
  });

  /** An empty transcript, to a caller that pages (`take`) or one that reads `items`. */
  const emptyTranscript = async (_namespace: string, _uid: string, take?: (page: []) => unknown) => {
    take?.([]);
    return { items: [], resourceVersion: '10' };
  };

  function client(afterFailure: CodingRun | undefined) {
    let current: CodingRun | undefined = { ...run, status: { phase: 'Running' } };
    let runWatches = 0;
    const fake: RunClient = {
      defaultNamespace: 'team',
      getRun: async () => current,
      listTranscript: emptyTranscript as RunClient['listTranscript'],
      watchTranscript: async (_namespace, _uid, resourceVersion) => watchEnding(200, resourceVersion),
      watchRuns: async (_namespace, _name, resourceVersion) => {
        runWatches += 1;
        if (runWatches > 1) return watchEnding(200, resourceVersion);
        // The API server goes away; meanwhile the run is deleted (or its name taken by another).
        current = afterFailure;
        return watchEnding(50, undefined);
      },
      getEval: async () => undefined,
      listRuns: async () => ({ items: [] }),
      whoAmI: async () => 'alice',
      setApprovalAnnotations: async () => {},
      setCancelAnnotation: async () => {},
      getConfigMap: async () => undefined,
    };
    return fake;
  }

  it.each([
    ['deleted', undefined],
    ['deleted and re-created under its name', { ...run, metadata: { ...run.metadata, uid: 'uid-2' }, status: { phase: 'Running' } }],
  ] as const)('ends with exit 1, saying the run was deleted (%s), instead of following nothing until Ctrl-C', async (_, after) => {
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), 5000);
    const { errors, io } = output(stop.signal);
    const code = await printLogs(client(after as CodingRun | undefined), io, 'team', logs(['r', '-f']));
    clearTimeout(timer);
    expect(stop.signal.aborted).toBe(false);
    expect(code).toBe(1);
    expect(errors).toContain('codingrun/r was deleted before it finished');
  });
});

describe('logs -f prints entries in key order as they land', () => {
  /** A run followed with -f: listed empty, then its watch delivers `events` (chunks) `gapMs` apart, then the run Succeeds. */
  function following(events: V1ConfigMap[], gapMs: number, endAfterMs: number) {
    const running: CodingRun = { ...run, status: { phase: 'Running' } };
    let current = running;
    let lists = 0;
    const fake: RunClient = {
      defaultNamespace: 'team',
      getRun: async () => current,
      listTranscript: async (_namespace, _uid, take) => {
        lists += 1;
        // The listing after the run ended holds every chunk as the watch last sent it.
        take(lists === 1 ? [] : events);
        return { resourceVersion: '10' };
      },
      watchTranscript: async (_namespace, _uid, resourceVersion, onChunk) => {
        events.forEach((event, index) => setTimeout(() => onChunk(event), index * gapMs));
        return { ended: new Promise<void>(() => {}), stop: () => {}, resumeFrom: resourceVersion };
      },
      watchRuns: async (_namespace, _name, resourceVersion, onEvent) => {
        setTimeout(() => {
          current = { ...run, status: { phase: 'Succeeded' } };
          onEvent('MODIFIED', current);
        }, endAfterMs);
        return { ended: new Promise<void>(() => {}), stop: () => {}, resumeFrom: resourceVersion };
      },
      getEval: async () => undefined,
      listRuns: async () => ({ items: [] }),
      whoAmI: async () => 'alice',
      setApprovalAnnotations: async () => {},
      setCancelAnnotation: async () => {},
      getConfigMap: async () => undefined,
    };
    return fake;
  }

  const said = (lines: string[]) =>
    lines.filter((line) => / says hello$/.test(line)).map((line) => Number(/step (\d+) says/.exec(line)![1]));
  const entries = (...numbers: number[]) => Object.fromEntries(numbers.map((number) => Object.values(encodeEntry(step(number)))));

  it("holds back the latest step's entries, so one that lands late before them is printed in its place", async () => {
    // Step 17 opens chunk 1 and lands before step 16, still on its way to chunk 0 (one write per chunk).
    const events = [chunk(1, entries(17)), chunk(0, entries(15)), chunk(0, entries(15, 16))];
    const { lines, io } = output();
    expect(await printLogs(following(events, 20, 200), io, 'team', logs(['r', '-f']), Infinity, 5000)).toBe(0);
    expect(said(lines)).toEqual([15, 16, 17]);
  });

  it('prints the latest step once the transcript has been quiet a while, before the run ends', async () => {
    const { lines, io } = output();
    const printed = new Promise<number[]>((resolve) => setTimeout(() => resolve(said(lines)), 400));
    expect(await printLogs(following([chunk(0, entries(1, 2))], 20, 600), io, 'team', logs(['r', '-f']), Infinity, 100)).toBe(0);
    expect(await printed).toEqual([1, 2]);
    expect(said(lines)).toEqual([1, 2]);
  });

  it('prints the latest step after a while of quiet though chunks it ignores keep changing', async () => {
    // Anyone who may edit ConfigMaps in the namespace can touch one labelled as the run's
    // transcript but not owned by it, or the run's own chunk without adding an entry; re-arming
    // the wait on each such event held the latest step (often the one asking for approval) back
    // until the run ended.
    const foreign = {
      ...chunk(1, entries(9)),
      metadata: { ...chunk(1, {}).metadata, ownerReferences: [{ ...chunk(1, {}).metadata!.ownerReferences![0]!, uid: 'uid-other' }] },
    };
    const touches = Array.from({ length: 40 }, (_, index) => (index % 2 === 0 ? foreign : chunk(0, entries(1, 2))));
    const { lines, io } = output();
    const printed = new Promise<number[]>((resolve) => setTimeout(() => resolve(said(lines)), 500));
    const client = following([chunk(0, entries(1, 2)), ...touches], 20, 1200);
    expect(await printLogs(client, io, 'team', logs(['r', '-f']), Infinity, 100)).toBe(0);
    expect(await printed).toEqual([1, 2]);
    expect(said(lines)).toEqual([1, 2]);
  });
});
