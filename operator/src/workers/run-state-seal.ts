// Security #11.1: whoever can write Redis must not be able to steer a run. Every run state
// and every job's data the operator writes carries an HMAC-SHA256 keyed by the operator's
// stateKey (the chart keeps it in a Secret every replica reads); a state or a job whose MAC
// does not verify is refused before anything in it is used. Two keys are derived from the
// one secret, so a state's MAC can never pass for a job's.
import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';

/** The first line of a sealed state: the format, then the MAC; the JSON follows the newline. */
const STATE_FORMAT = 'chamvi-state-v2';

export interface JobFields {
  name: string;
  uid: string;
  namespace: string;
  runName: string;
  step?: number | undefined;
  /** A resume's answer: every field is signed, whatever fields an answer has. */
  approval?: object | undefined;
}

/**
 * The signed fields of a job's data (name: the job's; data.name: its run's). A prepare's pod
 * name is not among them: a replica of the release before, still working during a rolling
 * upgrade, must verify the jobs of this one, and what guards the pod is the read before every
 * exec, which refuses a pod the run does not control (kubernetes-exec-transport.ts).
 */
export function jobFields(
  name: string,
  data: { uid: string; namespace: string; name: string; step?: number | undefined; approval?: object | undefined },
): JobFields {
  return { name, uid: data.uid, namespace: data.namespace, runName: data.name, step: data.step, approval: data.approval };
}

/** Job data as queued: the fields of JobFields and their MAC (AgentQueue sets it, the worker checks it). */
export interface SignedJobData {
  mac?: string;
}

export class RunStateSeal {
  // KeyObjects, made once: given a Buffer, createHmac makes one on every call, which cost
  // about 20 µs against 3 µs per MAC here, and a step makes five MACs (docs/benchmarks.md).
  private readonly stateKey: KeyObject;
  private readonly jobKey: KeyObject;

  constructor(secret: string | Buffer) {
    this.stateKey = createSecretKey(createHmac('sha256', secret).update('chamvi run state').digest());
    this.jobKey = createSecretKey(createHmac('sha256', secret).update('chamvi job data').digest());
  }

  /** A key for this process alone (run --local, tests): state sealed here is unreadable elsewhere. */
  static generated(): RunStateSeal {
    return new RunStateSeal(randomBytes(32));
  }

  seal(json: string): string {
    return `${STATE_FORMAT} ${mac(this.stateKey, json)}\n${json}`;
  }

  /** The JSON of a sealed state, or why it cannot be trusted. */
  open(text: string): { json: string } | { problem: string } {
    const newline = text.indexOf('\n');
    const header = newline < 0 ? '' : text.slice(0, newline);
    const [format, given] = header.split(' ');
    if (format !== STATE_FORMAT || given === undefined) return { problem: `it is not sealed (${STATE_FORMAT} header missing)` };
    const json = text.slice(newline + 1);
    if (!equal(given, mac(this.stateKey, json))) return { problem: "its HMAC does not match (written without this operator's stateKey)" };
    return { json };
  }

  signJob(fields: JobFields): string {
    return mac(this.jobKey, jobText(fields));
  }

  verifyJob(fields: JobFields, given: unknown): boolean {
    return typeof given === 'string' && equal(given, this.signJob(fields));
  }
}

function mac(key: KeyObject, text: string): string {
  return createHmac('sha256', key).update(text).digest('base64url');
}

function equal(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The signed fields in a fixed order, so the MAC does not depend on how the data was built. */
function jobText(fields: JobFields): string {
  const approval = fields.approval
    ? Object.entries(fields.approval)
        .filter(([, value]) => value !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    : null;
  return JSON.stringify([fields.name, fields.uid, fields.namespace, fields.runName, fields.step ?? null, approval]);
}
