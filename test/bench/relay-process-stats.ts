// What a relaying process of `make bench-egress` (the proxy, the floor) tells the benchmark
// on stdin: `memory` answers its memory after a full collection (node --expose-gc), `cpu` its
// CPU time so far, without collecting first (a forced collection would count in the figure).
export function answerStatsRequests(connections: () => number): void {
  let pending = '';
  process.stdin.on('data', (data: Buffer) => {
    pending += data.toString();
    let newline: number;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const command = pending.slice(0, newline).trim();
      pending = pending.slice(newline + 1);
      if (command === 'memory') {
        (globalThis as { gc?: () => void }).gc?.();
        const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
        console.log(JSON.stringify({ rss, heapUsed, external, arrayBuffers, connections: connections() }));
      } else {
        const { user, system } = process.cpuUsage();
        console.log(JSON.stringify({ cpuMs: (user + system) / 1000 }));
      }
    }
  });
}
