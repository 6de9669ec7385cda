// The one table of `make bench`: reads what each benchmark wrote (toolbox.json, exec.json,
// step.json, scale.json, real-node.json, egress.json, replicas.json, warm-pool.json, warm-pool-real-node.json in test/bench/results/), puts every figure next to the peer it was
// measured against in the same run, writes test/bench/results/latest.json and prints the
// table (Markdown, so docs/benchmarks.md can take it as it is).
//
//   npx tsx test/bench/bench-report.ts [--started <unix seconds when make bench began>]
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ScaleGoal, ScaleGoals } from './scale-goals.ts';
import { stepOverheadGoal } from './step-cycles.ts';

const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));

interface Figure {
  benchmark: 'toolbox' | 'exec' | 'step' | 'scale' | 'real-node' | 'egress' | 'replicas' | 'warm-pool';
  figure: string;
  unit: string;
  value: number | string;
  peer: { what: string; value: number | string } | null;
  goal?: string;
  met?: boolean;
}

// The results files are our own JSON, read loosely: a missing field shows as n/a or throws.
type Json = Record<string, any>;

function read(name: string): Json | undefined {
  const file = path.join(resultsDir, `${name}.json`);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Json) : undefined;
}

const p50p99 = (figure: { p50: number; p99: number } | undefined) => (figure ? `${figure.p50} / ${figure.p99}` : 'n/a');
const seconds = (ms: number | null | undefined) => (ms === null || ms === undefined ? 'n/a' : Math.round(ms / 100) / 10);
const p50p99Seconds = (figure: { p50: number; p99: number } | undefined) =>
  figure ? `${seconds(figure.p50)} / ${seconds(figure.p99)}` : 'n/a';

function toolboxFigures(toolbox: Json): Figure[] {
  return [
    {
      benchmark: 'toolbox',
      figure: 'read_file through a kept `serve` session, p50 / p99',
      unit: 'ms',
      value: p50p99(toolbox.readFile.serve),
      peer: { what: '`call`, one process per request', value: p50p99(toolbox.readFile.call) },
      goal: `serve p50 < ${toolbox.goals.serveP50UnderMs} ms`,
      met: toolbox.goals.serveP50Met,
    },
    {
      benchmark: 'toolbox',
      figure: `grep for a literal, ${toolbox.grep.files} files (${toolbox.grep.engine}), p50`,
      unit: 'ms',
      value: toolbox.grep.toolboxP50Ms,
      peer: { what: 'rg run directly on the same tree', value: toolbox.grep.rgP50Ms },
      goal: `within ${toolbox.goals.grepRatioAtMost}x of rg (${toolbox.grep.ratio}x)`,
      met: toolbox.goals.grepRatioMet,
    },
    // The toolbox's own cost of a call when the sandbox is full of processes (its scans of /proc).
    ...((toolbox.bashWithIdleProcesses ?? []) as Json[]).flatMap((level): Figure[] => [
      {
        benchmark: 'toolbox',
        figure: `bash "true" through serve, ${level.idleProcesses} idle processes in the sandbox, p50 / p95`,
        unit: 'ms',
        value: `${level.bashTrue.toolbox.p50} / ${level.bashTrue.toolbox.p95}`,
        peer: { what: '`bash -c true` spawned directly', value: `${level.bashTrue.bareBash.p50} / ${level.bashTrue.bareBash.p95}` },
      },
      {
        benchmark: 'toolbox',
        figure: `bash_kill of a job, ${level.idleProcesses} idle processes, p50 / p95`,
        unit: 'ms',
        value: `${level.bashKill.toolbox.p50} / ${level.bashKill.toolbox.p95}`,
        peer: {
          what: 'SIGTERM to a plain process group, to its exit',
          value: `${level.bashKill.bareGroupKill.p50} / ${level.bashKill.bareGroupKill.p95}`,
        },
      },
    ]),
  ];
}

/** The real node's figures, next to the same paths on kwok (exec.json) where there is one; or why it was skipped. */
function realNodeFigures(realNode: Json, exec: Json | undefined): Figure[] {
  if (realNode.skipped) {
    return [
      { benchmark: 'real-node', figure: 'skipped: the real node could not start', unit: '', value: String(realNode.skipped), peer: null },
    ];
  }
  const { podCreateToReady, podCreateToFirstToolCall, serveSession, perCallExec, kubectlExec } = realNode.results;
  const onKwok = (figure: { p50: number; p99: number } | undefined) =>
    figure ? { what: 'the same path on kwok (exec)', value: p50p99(figure) } : null;
  const n = (figure: { n?: number }) => `, n=${figure.n}`;
  const firstAndP50 = (figure: Json) => `${seconds(figure.first)} / ${seconds(figure.p50)}`;
  return [
    {
      benchmark: 'real-node',
      figure: `sandbox pod create to Ready, first (cold) / p50${n(podCreateToReady)}`,
      unit: 's',
      value: firstAndP50(podCreateToReady),
      peer: null,
    },
    {
      benchmark: 'real-node',
      figure: `sandbox pod create to the first tool call answered, first (cold) / p50${n(podCreateToFirstToolCall)}`,
      unit: 's',
      value: firstAndP50(podCreateToFirstToolCall),
      peer: null,
    },
    {
      benchmark: 'real-node',
      figure: `tool call, kept \`serve\` session through the kubelet, p50 / p99${n(serveSession)}`,
      unit: 'ms',
      value: p50p99(serveSession),
      peer: onKwok(exec?.results?.serveSession),
    },
    {
      benchmark: 'real-node',
      figure: `tool call, one pods/exec per call through the kubelet, p50 / p99${n(perCallExec)}`,
      unit: 'ms',
      value: p50p99(perCallExec),
      peer: { what: `kubectl exec -i of the same call into the same container${n(kubectlExec)}`, value: p50p99(kubectlExec) },
      goal: 'faster than kubectl exec',
      met: realNode.goals.perCallExecFasterThanKubectlExec,
    },
    ...(realNode.archive ? archiveFigures(realNode.archive, 'into the pod through the kubelet', 'real-node') : []),
  ];
}

function execFigures(exec: Json): Figure[] {
  const { perCallExec, serveSession, kubectlExec } = exec.results;
  const parts = exec.breakdown;
  const n = (figure: { n?: number } | undefined) => (figure?.n ? `, n=${figure.n}` : '');
  return [
    {
      benchmark: 'exec',
      figure: `tool call through the API server, kept \`serve\` session (the operator's path), p50 / p99${n(serveSession)}`,
      unit: 'ms',
      value: p50p99(serveSession),
      peer: { what: `kubectl exec -i of the same call${n(kubectlExec)}`, value: p50p99(kubectlExec) },
      goal: 'serve p50 < 5 ms',
      met: exec.goals.servePerCallP50Under5ms,
    },
    ...(parts
      ? [
          {
            benchmark: 'exec' as const,
            figure: '  serve: request to first byte of the answer',
            unit: 'ms',
            value: p50p99(parts.serveSession.firstByte),
            peer: null,
          },
          {
            benchmark: 'exec' as const,
            figure: '  serve: the toolbox alone (a local serve session, same call)',
            unit: 'ms',
            value: p50p99(parts.serveSession.toolboxAloneLocalServe),
            peer: null,
          },
        ]
      : []),
    {
      benchmark: 'exec',
      figure: `tool call through the API server, one pods/exec per call, p50 / p99${n(perCallExec)}`,
      unit: 'ms',
      value: p50p99(perCallExec),
      peer: { what: `kubectl exec -i of the same call${n(kubectlExec)}`, value: p50p99(kubectlExec) },
      goal: 'faster than kubectl exec',
      met: exec.goals.perCallExecFasterThanKubectlExec,
    },
    ...(parts
      ? [
          {
            benchmark: 'exec' as const,
            figure: '  per call: connection upgrade (WebSocket open through the API server)',
            unit: 'ms',
            value: p50p99(parts.perCallExec.connectionUpgrade),
            peer: null,
          },
          {
            benchmark: 'exec' as const,
            figure: '  per call: upgrade to first byte (toolbox start and call)',
            unit: 'ms',
            value: p50p99(parts.perCallExec.upgradeToFirstByte),
            peer: null,
          },
          {
            benchmark: 'exec' as const,
            figure: '  per call: the toolbox alone (`toolbox call` as a local process)',
            unit: 'ms',
            value: p50p99(parts.perCallExec.toolboxAloneLocalCall),
            peer: { what: 'kubectl alone (`kubectl version --client`)', value: p50p99(parts.kubectlExec.kubectlProcessAlone) },
          },
        ]
      : []),
    ...(exec.archive ? archiveFigures(exec.archive, 'into the pod') : []),
  ];
}

/** A workspace archive into the pod: wall and the sender's CPU, beside kubectl exec -i of the same archive. */
function archiveFigures(archive: Json, where: string, benchmark: Figure['benchmark'] = 'exec'): Figure[] {
  const size = `${(archive.archiveBytes / 1_048_576).toFixed(1)} MiB in ${archive.files} files, n=${archive.sessionImportOverExec.wallMs.n}`;
  const { sessionImportOverExec: ours, kubectlExecImport: peer } = archive;
  return [
    {
      benchmark,
      figure: `workspace archive (${size}) ${where}, session import over pods/exec, wall p50`,
      unit: 'ms',
      value: ours.wallMs.p50,
      peer: { what: 'kubectl exec -i of the archive into `toolbox import`', value: peer.wallMs.p50 },
    },
    {
      benchmark,
      figure: '  its CPU in the sending process (the operator), p50',
      unit: 'ms',
      value: ours.clientCpuMs.p50,
      peer: { what: "kubectl's CPU, its process start included", value: peer.clientCpuMs.p50 },
    },
    ...(archive.localSessionImport
      ? [
          {
            benchmark,
            figure: '  the toolbox alone: a local session import of the archive, wall p50',
            unit: 'ms',
            value: archive.localSessionImport.wallMs.p50,
            peer: null,
          },
        ]
      : []),
  ];
}

/**
 * The step goal, judged from the figure itself (a step.json written before the goal moved is
 * judged by today's), with every run's p50 when the figure is the median of several.
 */
function stepJudged(step: Json): { goal: string; met: boolean } {
  const verdict = stepOverheadGoal(step.overheadMs.p50);
  const runs = Array.isArray(step.runs) ? ` (the median run of ${step.runs.map((run: Json) => run.overheadP50Ms).join(', ')} ms)` : '';
  return { goal: `${verdict.goal}${runs}`, met: verdict.met };
}

function stepFigures(step: Json): Figure[] {
  const parts = step.breakdownMs;
  return [
    {
      benchmark: 'step',
      figure: `step overhead, pickup to next pickup less model and tools (${step.samples ?? step.steps} steps), p50 / p99`,
      unit: 'ms',
      value: p50p99(step.overheadMs),
      peer: { what: 'the whole cycle, same steps', value: p50p99(step.cycleMs ?? step.totalMs) },
      ...stepJudged(step),
    },
    ...(parts
      ? [
          {
            benchmark: 'step' as const,
            figure: '  pickup to step start (dispatch, sealed state loaded from Redis)',
            unit: 'ms',
            value: p50p99(parts.pickupToStart),
            peer: null,
          },
          {
            benchmark: 'step' as const,
            figure: '  in the step, outside model and tools (run read, saves, status, enqueue)',
            unit: 'ms',
            value: p50p99(parts.inStep),
            peer: null,
          },
          {
            benchmark: 'step' as const,
            figure: '  step done to the next pickup (BullMQ hand-over)',
            unit: 'ms',
            value: p50p99(parts.handOver),
            peer: null,
          },
        ]
      : []),
  ];
}

function scaleFigures(scale: Json): Figure[] {
  const { runs, n } = scale;
  // The peer at the operator's client limits (none); older results (and --peer-limits default) have only the default one.
  const jobs = scale.jobs ?? scale.jobsAtDefaultLimits;
  const limits = (phase: Json) =>
    phase.clientLimits ? `client QPS ${phase.clientLimits.qps}, burst ${phase.clientLimits.burst}` : 'client QPS 20, burst 30';
  const jobPeer = (value: number | string) => ({ what: `${n} Jobs, kube-controller-manager's Job controller (${limits(jobs)})`, value });
  const defaults = scale.jobs ? scale.jobsAtDefaultLimits : undefined;
  const defaultPeer = (value: number | string) => ({ what: `${n} Jobs, the same at its default ${limits(defaults)}`, value });
  const kcm = jobs.processes['kube-controller-manager'];
  const operator = runs.processes.operator;
  // scale-goals.ts judged them when the benchmark ran; a goal absent (N below 1000) is not shown.
  const goals = scale.goals as Partial<ScaleGoals> | undefined;
  const judged = (goal: ScaleGoal | undefined) => (goal ? { goal: `${goal.goal} (${goal.shown})`, met: goal.met } : {});
  return [
    {
      benchmark: 'scale',
      figure: `${n} CodingRuns created at once: every sandbox pod exists`,
      unit: 's',
      value: seconds(runs.allPodsMs),
      peer: jobPeer(seconds(jobs.allPodsMs)),
      ...judged(goals?.podsNoSlowerThanJobController),
    },
    ...(defaults
      ? [
          {
            benchmark: 'scale' as const,
            figure: '  the same, against the Job controller at its default client limits',
            unit: 's',
            value: seconds(runs.allPodsMs),
            peer: defaultPeer(seconds(defaults.allPodsMs)),
          },
          {
            benchmark: 'scale' as const,
            figure: "  time kube-controller-manager's requests waited on its client rate limiter",
            unit: 's',
            value: `${jobs.clientLimits?.rateLimiterWaitSeconds ?? 'n/a'} (no limit)`,
            peer: defaultPeer(defaults.clientLimits?.rateLimiterWaitSeconds ?? 'n/a'),
          },
        ]
      : []),
    {
      benchmark: 'scale',
      figure: 'create to pod, p50 / p99',
      unit: 's',
      value: p50p99Seconds(runs.podLatencyMs),
      peer: jobPeer(p50p99Seconds(jobs.podLatencyMs)),
    },
    {
      benchmark: 'scale',
      figure: `every run Succeeded (3 scripted steps each; Jobs: Complete)`,
      unit: 's',
      value: seconds(runs.allDoneMs),
      peer: jobPeer(seconds(jobs.allDoneMs)),
      // Only the defaults' phase ran: it is the peer here (else the row below has the goal).
      ...(defaults ? {} : judged(goals?.allFinishedWithinJobController)),
    },
    ...(defaults
      ? [
          {
            benchmark: 'scale' as const,
            figure: '  the same, against the Job controller at its default client limits',
            unit: 's',
            value: seconds(runs.allDoneMs),
            peer: defaultPeer(seconds(defaults.allDoneMs)),
            ...judged(goals?.allFinishedWithinJobController),
          },
        ]
      : []),
    {
      benchmark: 'scale',
      figure: 'create to finished, p50 / p99',
      unit: 's',
      value: p50p99Seconds(runs.doneLatencyMs),
      peer: jobPeer(p50p99Seconds(jobs.doneLatencyMs)),
    },
    {
      benchmark: 'scale',
      figure: "controller peak RSS (operator: with its children, the process launcher and the workers' git)",
      unit: 'MiB',
      value: operator.peakRssMiB,
      peer: { what: 'kube-controller-manager (all its controllers)', value: kcm.peakRssMiB },
    },
    {
      benchmark: 'scale',
      figure: 'operator peak: process alone (RSS) / with children (PSS)',
      unit: 'MiB',
      value: `${operator.peakRootRssMiB} / ${operator.peakPssMiB ?? 'n/a'}`,
      peer: null,
      ...judged(goals?.operatorPeakRss),
    },
    {
      benchmark: 'scale',
      figure: 'controller CPU during the phase (the process launcher and its children included)',
      unit: 's',
      value: operator.cpuSeconds,
      peer: { what: 'kube-controller-manager', value: kcm.cpuSeconds },
    },
    {
      benchmark: 'scale',
      figure: 'API requests per object by the controller',
      unit: 'requests',
      value: runs.apiRequests.controllerPerObject,
      peer: jobPeer(jobs.apiRequests.controllerPerObject),
      ...judged(goals?.apiRequestsPerRun),
    },
    {
      benchmark: 'scale',
      figure: 'API requests per object, controller + scheduler + kubelet',
      unit: 'requests',
      value: runs.apiRequests.allButHarnessPerObject,
      peer: jobPeer(jobs.apiRequests.allButHarnessPerObject),
    },
  ];
}

function egressFigures(egress: Json): Figure[] {
  const { throughputMiBps: t, latencyMs: l, memory: m } = egress;
  // Since the tunnels carry TLS, their peer is a direct TLS connection; older files have one direct.
  const tunnelPeer = t.directTls === undefined ? { what: 'direct', value: t.direct } : { what: 'direct over TLS', value: t.directTls };
  const keptTunnelPeer = l.directTls === undefined ? p50p99(l.direct) : p50p99(l.directTls);
  return [
    {
      benchmark: 'egress',
      figure: `${egress.downloadMiB} MiB download through the egress proxy (CONNECT tunnel) over loopback, median of ${egress.rounds}`,
      unit: 'MiB/s',
      value: t.tunnel,
      peer: tunnelPeer,
      goal: `at least 90 % of direct (${Math.round(t.tunnelRatio * 100)} %)`,
      met: egress.goals.throughputMet,
    },
    // Across a shaped link (shaped-link.ts), as a registry is reached: what an install gets.
    ...((egress.link?.speeds ?? []) as Json[]).map((speed) => ({
      benchmark: 'egress' as const,
      figure: `  the same download from across a ${speed.gbit} Gbit/s link, through the tunnel`,
      unit: 'MiB/s',
      value: speed.tunnel,
      peer: { what: 'direct across the link', value: speed.direct },
      goal: `at least 90 % of direct (${Math.round(speed.tunnelRatio * 100)} %)`,
      met: speed.met,
    })),
    {
      benchmark: 'egress',
      figure: '  the same download forwarded as plain HTTP',
      unit: 'MiB/s',
      value: t.forward,
      peer: { what: 'direct', value: t.direct },
    },
    // The floor: a bare pipe() relay in a second process, i.e. what any relay costs on this machine.
    ...(t.floor === undefined
      ? []
      : [
          {
            benchmark: 'egress' as const,
            figure: `  the same download through a bare relay process (the floor); the tunnel is ${t.tunnelToFloor}x it`,
            unit: 'MiB/s',
            value: t.floor,
            peer: tunnelPeer,
          },
          {
            benchmark: 'egress' as const,
            figure: '  proxy CPU time per 100 MiB through a tunnel',
            unit: 'ms',
            value: egress.cpuMsPer100MiB.tunnel,
            peer: { what: 'the floor', value: egress.cpuMsPer100MiB.floor },
          },
        ]),
    {
      benchmark: 'egress',
      figure: `${l.tunnel.n} small requests in a kept tunnel, p50 / p99`,
      unit: 'ms',
      value: p50p99(l.tunnel),
      peer: { what: `${tunnelPeer.what}, kept connection`, value: keptTunnelPeer },
      goal: `under 1 ms added p50 (${l.tunnelAddedP50} ms; forwarded ${l.forwardAddedP50} ms)`,
      met: egress.goals.latencyMet,
    },
    {
      benchmark: 'egress',
      figure: '  the same requests forwarded as plain HTTP, p50 / p99',
      unit: 'ms',
      value: p50p99(l.forward),
      peer: { what: 'direct, kept connection', value: p50p99(l.direct) },
    },
    {
      benchmark: 'egress',
      figure: `proxy RSS with ${m.tunnels} tunnels open`,
      unit: 'MiB',
      value: m.rssMiB,
      peer: { what: 'idle', value: m.idleRssMiB },
    },
  ];
}

function replicasFigures(replicas: Json): Figure[] {
  const goals = replicas.goals as Record<string, number>;
  // Older results files hold one series at the top level.
  const series = (replicas.series as Json[] | undefined) ?? [
    { concurrency: replicas.concurrency, rounds: replicas.rounds, speedup: replicas.speedup },
  ];
  return series.flatMap((one) => {
    const base = (one.rounds as Json[]).find((round) => round.replicas === 1);
    return (one.rounds as Json[])
      .filter((round) => round.replicas > 1)
      .map((round) => {
        const speedup = (one.speedup[String(round.replicas)] as number | null | undefined) ?? null;
        const goal = goals[String(round.replicas)];
        const busy =
          round.machineBusy === undefined || !base
            ? ''
            : `; cores ${Math.round(round.machineBusy * 100)}% busy, ${Math.round(base.machineBusy * 100)}% with one`;
        return {
          benchmark: 'replicas' as const,
          figure: `steps per second, ${round.replicas} replicas (${one.concurrency} workers each, model ${replicas.modelMs} ms${busy})`,
          unit: 'steps/s',
          value: round.stepsPerSecond,
          peer: { what: 'one replica', value: base?.stepsPerSecond ?? 'n/a' },
          ...(goal ? { goal: `at least ${goal}x one replica (${speedup ?? 'n/a'}x)`, met: speedup !== null && speedup >= goal } : {}),
        };
      });
  });
}

/**
 * Create → first tool call with a warm pool, beside the same without one (a fresh pod), both
 * from one bench run: on kwok, or on the real node (warm-pool-real-node.json).
 */
function warmPoolFigures(warm: Json, where: 'kwok' | 'the real node'): Figure[] {
  if (warm.skipped) {
    return [{ benchmark: 'warm-pool', figure: `skipped on ${where}`, unit: '', value: String(warm.skipped), peer: null }];
  }
  const goals = (warm.goals as { p50UnderMs: number; p99UnderMs: number } | undefined) ?? { p50UnderMs: 300, p99UnderMs: 1000 };
  const figure = warm.warm.createToFirstToolCallMs as { p50: number; p99: number };
  const runs = `${warm.runs} runs one at a time, pool of ${warm.poolSize}, ${warm.warm.claimed} claimed, ${where}`;
  return [
    {
      benchmark: 'warm-pool',
      figure: `create → first tool call with a warm pool, p50 / p99 (${runs})`,
      unit: 'ms',
      value: p50p99(figure),
      peer: { what: 'without a pool (fresh pod), same run', value: p50p99(warm.cold.createToFirstToolCallMs) },
      goal: `p50 < ${goals.p50UnderMs} ms, p99 < ${goals.p99UnderMs} ms`,
      met: figure.p50 < goals.p50UnderMs && figure.p99 < goals.p99UnderMs,
    },
    // Files from before the clone cache (#17.3) have no third mode.
    ...(warm.warmCached
      ? [
          {
            benchmark: 'warm-pool' as const,
            figure: `create → first tool call with a warm pool and the clone cache, p50 / p99 (${warm.runs} runs, ${warm.warmCached.claimed} claimed, ${where})`,
            unit: 'ms',
            value: p50p99(warm.warmCached.createToFirstToolCallMs),
            peer: { what: 'a warm pool without the cache, same run', value: p50p99(figure) },
            goal: `p50 < ${goals.p50UnderMs} ms, p99 < ${goals.p99UnderMs} ms`,
            met:
              (warm.warmCached.createToFirstToolCallMs as { p50: number }).p50 < goals.p50UnderMs &&
              (warm.warmCached.createToFirstToolCallMs as { p99: number }).p99 < goals.p99UnderMs,
          },
        ]
      : []),
  ];
}

function markdownTable(figures: Figure[]): string {
  const rows = [
    ['benchmark', 'figure', 'unit', 'chamvi', 'peer (same run)', 'peer', 'goal'],
    ...figures.map((figure) => [
      figure.benchmark,
      figure.figure,
      figure.unit,
      String(figure.value),
      figure.peer?.what ?? '',
      figure.peer ? String(figure.peer.value) : '',
      figure.goal ? `${figure.goal}: ${figure.met ? 'met' : 'MISSED'}` : '',
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const line = (row: string[]) => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`;
  return [line(rows[0]!), line(widths.map((width) => '-'.repeat(width))), ...rows.slice(1).map(line)].join('\n');
}

function main(): void {
  const { values } = parseArgs({ options: { started: { type: 'string' } } });
  const sources = {
    toolbox: read('toolbox'),
    exec: read('exec'),
    step: read('step'),
    scale: read('scale'),
    'real-node': read('real-node'),
    egress: read('egress'),
    replicas: read('replicas'),
    'warm-pool': read('warm-pool'),
    'warm-pool-real-node': read('warm-pool-real-node'),
  };
  const missing = Object.entries(sources)
    .filter(([, value]) => !value)
    .map(([name]) => name);
  const figures = [
    ...(sources.toolbox ? toolboxFigures(sources.toolbox) : []),
    ...(sources.exec ? execFigures(sources.exec) : []),
    ...(sources.step ? stepFigures(sources.step) : []),
    ...(sources.scale ? scaleFigures(sources.scale) : []),
    ...(sources['real-node'] ? realNodeFigures(sources['real-node'], sources.exec) : []),
    ...(sources.egress ? egressFigures(sources.egress) : []),
    ...(sources.replicas ? replicasFigures(sources.replicas) : []),
    ...(sources['warm-pool'] ? warmPoolFigures(sources['warm-pool'], 'kwok') : []),
    ...(sources['warm-pool-real-node'] ? warmPoolFigures(sources['warm-pool-real-node'], 'the real node') : []),
  ];
  const startedAt = values.started ? new Date(Number(values.started) * 1000) : undefined;
  const dates = Object.fromEntries(Object.entries(sources).map(([name, value]) => [name, value?.date ?? value?.generatedAt ?? null]));
  // A figure from an earlier `make bench` would pair with peers of another day: say so.
  const stale = startedAt
    ? Object.entries(dates)
        .filter(([, date]) => !date || Date.parse(date) < startedAt.getTime())
        .map(([name]) => name)
    : [];
  const latest = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
    ...(startedAt ? { makeBenchWallSeconds: Math.round((Date.now() - startedAt.getTime()) / 1000) } : {}),
    n: sources.scale?.n ?? null,
    sources: dates,
    ...(stale.length > 0 ? { staleSources: stale } : {}),
    figures,
    scaleSetup: sources.scale?.setup ?? null,
  };
  writeFileSync(path.join(resultsDir, 'latest.json'), `${JSON.stringify(latest, null, 2)}\n`);
  console.log(markdownTable(figures));
  console.log();
  if (missing.length > 0) console.log(`missing results: ${missing.join(', ')}`);
  if (stale.length > 0) console.log(`older than this make bench: ${stale.join(', ')}`);
  const wall = 'makeBenchWallSeconds' in latest ? `; make bench took ${latest.makeBenchWallSeconds} s` : '';
  console.log(
    `written to ${path.relative(process.cwd(), path.join(resultsDir, 'latest.json'))} (load average ${latest.loadAverage1m} on ${latest.cpus} cpus${wall})`,
  );
}

main();
