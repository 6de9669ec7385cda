// The sandbox container's first process: node idling on this script (under tini in the
// default image). The operator starts it (operator/src/reconcile/sandbox-pod.ts); the toolbox
// recognises it as PID 1 to know that it runs in a sandbox container of its own, in which
// every process but the idle one and the operator's exec sessions is the run's
// (leftover-processes.ts). PID 1 ignores SIGTERM unless it handles it, so it does: deleting
// the pod should not wait for the grace period.
export const IDLE_SCRIPT = "process.on('SIGTERM',()=>process.exit(0));setInterval(()=>{},1<<30)";
