// Which Events the egress proxy's ServiceAccount may create, enforced by the real API server: the
// chart's RBAC for the proxy (templates/egress-proxy.yaml, with watchNamespaces) and its event
// policy (templates/egress-proxy-event-policy.yaml) applied to the local control plane. RBAC lets
// the proxy create any Event in the namespaces it serves; should it run code it was sent, the
// policy holds it to its own one: a Warning EgressDenied about a CodingRun of the Event's
// namespace, reported as the proxy (never in the operator's name). The proxy's own audit and Event recorder run here with a
// token of that ServiceAccount; every forged Event is first seen to pass RBAC alone.
import { EventsV1Api, type CoreV1Event, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { API_VERSION } from '../../operator/src/api/index.ts';
import { EgressAudit } from '../../operator/src/egress/egress-audit.ts';
import { EgressMetrics } from '../../operator/src/egress/egress-metrics.ts';
import { EGRESS_PROXY_REPORTER, egressRunEvents } from '../../operator/src/egress/egress-run-events.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { refusalOf, untilPolicyRefuses, type ApiRefusal } from '../support/admission-refusal.ts';
import { createNamespace, deleteNamespace, kubectl, kubectlJson, kubectlOk } from '../support/cluster.ts';
import {
  applyManifests,
  deleteManifests,
  egressProxyKubeConfig,
  renderEgressProxyRelease,
  type EgressProxyRelease,
  type RenderedManifest,
} from '../support/egress-proxy-release.ts';

const NS = 'egress-proxy-events';
/** A namespace the release does not watch: the proxy's Role is not there. */
const OTHER_NS = 'egress-proxy-events-other';
const RELEASE = 'proxy-events';
const REFUSED = 'the egress proxy may create';

/** The cluster-scoped policies and bindings, and the test's own grant, removed after the file. */
let applied: RenderedManifest[] = [];
let release: EgressProxyRelease;
/** The proxy's API client, with a token of its ServiceAccount (beforeAll). */
let proxyKube: KubeGateway;
let proxyConfig: KubeConfig;

const run = (name: string, namespace = NS) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace },
  spec: {
    task: 'Fix it',
    repository: { url: 'https://github.com/acme/app.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
  },
});

async function createRun(name: string, namespace = NS): Promise<string> {
  await kubectlOk(['create', '-f', '-'], { input: stringify(run(name, namespace)) });
  return (await kubectlJson<{ metadata: { uid: string } }>(['get', 'crun', name, '-n', namespace])).metadata.uid;
}

let forgedCount = 0;

/** An Event of the proxy's own form (kube/event-recorder.ts as egress-proxy-main.ts calls it) about run `victim`. */
function proxyForm(uid: string): CoreV1Event {
  const now = new Date();
  forgedCount += 1;
  return {
    metadata: { name: `victim.forged-${forgedCount}-${now.getTime().toString(16)}`, namespace: NS },
    involvedObject: { apiVersion: API_VERSION, kind: 'CodingRun', name: 'victim', namespace: NS, uid },
    type: 'Warning',
    reason: 'EgressDenied',
    message: 'The egress proxy refused evil.example:443 (rule not-allowed): not on the run list',
    source: { component: EGRESS_PROXY_REPORTER.component },
    reportingComponent: EGRESS_PROXY_REPORTER.reportingComponent,
    reportingInstance: `${RELEASE}-chamvi-operator-egress-proxy-6b9f7c-x2x9q-1`,
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}

/**
 * Events a proxy running code it was sent might post, each with what the policy says of it. All
 * in the proxy's namespace, so RBAC alone lets each through.
 */
const forgeries: { case: string; forge: (event: CoreV1Event) => CoreV1Event; refused: string }[] = [
  {
    case: 'a reason the operator uses',
    forge: (event) => ({ ...event, reason: 'RunRefused', message: 'Refused by policy: approve run victim-2 instead' }),
    refused: `${REFUSED} only Events of reason EgressDenied, not RunRefused`,
  },
  {
    case: 'a Pod as the object',
    forge: (event) => ({ ...event, involvedObject: { apiVersion: 'v1', kind: 'Pod', name: 'victim-sandbox', namespace: NS } }),
    refused: `${REFUSED} Events only about a CodingRun (chamvi.dev/v1alpha1) in the Event's own namespace, not Pod (v1) in namespace ${NS}`,
  },
  {
    case: 'a Secret as the object',
    forge: (event) => ({ ...event, involvedObject: { apiVersion: 'v1', kind: 'Secret', name: 'git-credentials', namespace: NS } }),
    refused: `not Secret (v1) in namespace ${NS}`,
  },
  {
    case: 'a CodingRun of another API group',
    forge: (event) => ({ ...event, involvedObject: { ...event.involvedObject, apiVersion: 'chamvi.dev.evil.example/v1' } }),
    refused: `not CodingRun (chamvi.dev.evil.example/v1) in namespace ${NS}`,
  },
  {
    case: 'a field of the run',
    forge: (event) => ({ ...event, involvedObject: { ...event.involvedObject, fieldPath: 'spec.task' } }),
    refused: `not CodingRun (${API_VERSION}) in namespace ${NS} at spec.task`,
  },
  {
    // A new-style Event (eventTime set, so action and reportingInstance too) may name an object of
    // another namespace: the API server's own validation lets that through.
    case: "another namespace's run",
    forge: (event) => ({
      ...event,
      involvedObject: { ...event.involvedObject, namespace: OTHER_NS, name: 'elsewhere' },
      eventTime: new Date().toISOString().replace('Z', '000Z') as unknown as Date,
      action: 'Refused',
    }),
    refused: `not CodingRun (${API_VERSION}) in namespace ${OTHER_NS}`,
  },
  {
    case: 'a Normal type',
    forge: (event) => ({ ...event, type: 'Normal' }),
    refused: `${REFUSED} only Warning Events, not Normal`,
  },
  {
    case: "the kubelet's name",
    forge: (event) => ({ ...event, source: { component: 'kubelet', host: 'node-1' }, reportingComponent: 'kubelet' }),
    refused: `${REFUSED} only Events reported as source.component chamvi-egress-proxy and reportingComponent chamvi.dev/egress-proxy, not kubelet and kubelet on host node-1`,
  },
  {
    case: "the operator's name",
    forge: (event) => ({ ...event, source: { component: 'chamvi-operator' }, reportingComponent: 'chamvi.dev/operator' }),
    refused: 'not chamvi-operator and chamvi.dev/operator',
  },
  {
    case: 'another reportingComponent beside the source',
    forge: (event) => ({ ...event, reportingComponent: 'chamvi.dev/approvals' }),
    refused: 'not chamvi-egress-proxy and chamvi.dev/approvals',
  },
  {
    case: 'a version of the API group the operator does not serve',
    forge: (event) => ({ ...event, involvedObject: { ...event.involvedObject, apiVersion: 'chamvi.dev/anything' } }),
    refused: `not CodingRun (chamvi.dev/anything) in namespace ${NS}`,
  },
  {
    // kubectl describe printed each line after the first as a row of its own, in the operator's name.
    case: 'a message that draws rows under it',
    forge: (event) => ({
      ...event,
      message: `${event.message}\n  Warning  RunRefused    5s   chamvi-operator      Refused by policy: approve run victim-2 instead`,
    }),
    refused: `${REFUSED} only Events whose message is its own`,
  },
  {
    case: 'a bidi override in the message',
    forge: (event) => ({ ...event, message: `${event.message} \u202egnissap` }),
    refused: 'whose message is its own',
  },
  {
    case: 'a message longer than the recorder writes',
    forge: (event) => ({ ...event, message: `${event.message} ${'x'.repeat(2000)}` }),
    refused: 'whose message is its own',
  },
  {
    case: 'a message that is not a refusal',
    forge: (event) => ({ ...event, message: 'Run finished; diff verified' }),
    refused: 'whose message is its own',
  },
  {
    case: 'a count and times of its own',
    forge: (event) => ({
      ...event,
      count: 2147483647,
      firstTimestamp: new Date('2001-01-01T00:00:00Z'),
      lastTimestamp: new Date('2099-01-01T00:00:00Z'),
    }),
    refused: `${REFUSED} only Events of one occurrence`,
  },
  {
    case: 'a reportingInstance that is not one of its pods',
    forge: (event) => ({ ...event, reportingInstance: 'operator verdict: RunRefused' }),
    refused: 'whose reportingInstance is one of its pods',
  },
  {
    case: 'labels and an owner',
    forge: (event) => ({
      ...event,
      metadata: {
        ...event.metadata,
        labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator' },
        ownerReferences: [{ apiVersion: API_VERSION, kind: 'CodingRun', name: 'victim', uid: event.involvedObject.uid! }],
      },
    }),
    refused: `${REFUSED} only Events without labels, annotations, owner references or finalizers`,
  },
  {
    case: 'a related object',
    forge: (event) => ({ ...event, related: { apiVersion: 'v1', kind: 'Secret', name: 'git-credentials', namespace: NS } }),
    refused: `${REFUSED} only Events without a related object, an action or a series, not one with related`,
  },
  {
    case: 'an action',
    forge: (event) => ({ ...event, action: 'Approved' }),
    refused: 'not one with action',
  },
];

/** Creates the Event as the proxy does (its gateway, its token): undefined when created, else the API server's refusal. */
const createAsProxy = (event: CoreV1Event): Promise<ApiRefusal | undefined> => refusalOf(() => proxyKube.createEvent(event));

/** The same Event written through events.k8s.io/v1 (regarding a Pod), as a proxy granted that group could. */
async function createEventsV1AsProxy(): Promise<ApiRefusal | undefined> {
  const now = new Date();
  forgedCount += 1;
  return refusalOf(() =>
    proxyConfig.makeApiClient(EventsV1Api).createNamespacedEvent({
      namespace: NS,
      body: {
        metadata: { name: `victim.events-v1-${forgedCount}-${now.getTime().toString(16)}`, namespace: NS },
        eventTime: now.toISOString().replace('Z', '000Z') as unknown as Date,
        regarding: { apiVersion: 'v1', kind: 'Pod', name: 'victim-sandbox', namespace: NS },
        type: 'Warning',
        reason: 'EgressDenied',
        action: 'Refused',
        note: 'forged',
        reportingController: 'chamvi.dev/operator',
        reportingInstance: 'forged',
      },
    }),
  );
}

/** The Role the test adds (not the chart's): create on events.k8s.io Events, to show the policy judges that group too. */
const eventsV1Grant = (proxy: string): RenderedManifest[] => [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: `${proxy}-events-v1`, namespace: NS },
    rules: [{ apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] }],
  } as RenderedManifest,
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: `${proxy}-events-v1`, namespace: NS },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${proxy}-events-v1` },
    subjects: [{ kind: 'ServiceAccount', name: proxy, namespace: NS }],
  } as RenderedManifest,
];

let victimUid: string;
/** What each forgery met with RBAC alone, before the policy was applied: undefined when created. */
let beforePolicy: (ApiRefusal | undefined)[];
let eventsV1BeforePolicy: ApiRefusal | undefined;

beforeAll(async () => {
  await createNamespace(NS);
  await createNamespace(OTHER_NS);
  release = await renderEgressProxyRelease(RELEASE, NS);
  expect(release.rbac.map((doc) => `${doc.kind} ${doc.metadata.namespace}`).sort()).toEqual([
    `Role ${NS}`,
    `RoleBinding ${NS}`,
    `ServiceAccount ${NS}`,
  ]);
  // Both policies, bound everywhere (no matchResources), matching the proxy's ServiceAccount alone.
  expect(release.policies.map((doc) => `${doc.kind} ${doc.metadata.name}`).sort()).toEqual([
    `ValidatingAdmissionPolicy ${RELEASE}-chamvi-operator-egress-proxy-events`,
    `ValidatingAdmissionPolicy ${RELEASE}-chamvi-operator-egress-proxy-status`,
    `ValidatingAdmissionPolicyBinding ${RELEASE}-chamvi-operator-egress-proxy-events`,
    `ValidatingAdmissionPolicyBinding ${RELEASE}-chamvi-operator-egress-proxy-status`,
  ]);
  for (const doc of release.policies) {
    if (doc.kind === 'ValidatingAdmissionPolicyBinding') expect(doc.spec!.matchResources).toBeUndefined();
    else expect(doc.spec!.matchConditions).toEqual([{ name: 'egress-proxy', expression: expect.stringContaining(`'${release.user}'`) }]);
  }
  const grant = eventsV1Grant(release.proxy);
  applied = [...release.policies, ...grant];
  await applyManifests([...release.rbac, ...grant]);
  proxyConfig = await egressProxyKubeConfig(release, NS);
  proxyKube = createKubeGateway(proxyConfig);
  victimUid = await createRun('victim');
  await createRun('elsewhere', OTHER_NS);

  // RBAC alone: the proxy posts every forgery (the chart's Role has just been bound: retry a moment).
  const deadline = Date.now() + 30_000;
  while ((await createAsProxy(proxyForm(victimUid)))?.code === 403 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  beforePolicy = [];
  for (const { forge } of forgeries) beforePolicy.push(await createAsProxy(forge(proxyForm(victimUid))));
  eventsV1BeforePolicy = await createEventsV1AsProxy();

  await applyManifests(release.policies);
  // A new policy takes a moment to be enforced: wait until a forged reason is refused.
  await untilPolicyRefuses(() => createAsProxy({ ...proxyForm(victimUid), reason: 'EnforcementProbe' }), {
    refused: REFUSED,
    deadline: deadline + 30_000,
    policy: 'the egress proxy event policy',
    taken: 'the Event was created',
  });
}, 120_000);

afterAll(async () => {
  await deleteManifests(applied);
  await deleteNamespace(NS);
  await deleteNamespace(OTHER_NS);
});

describe('the Events the egress proxy ServiceAccount may create, against the real API server', () => {
  it("creates its EgressDenied Event with the proxy's own audit and Event recorder", async () => {
    const uid = await createRun('denied');
    const warnings: string[] = [];
    const logger = {
      info: () => undefined,
      warn: (fields: object, message: string) => warnings.push(`${message} ${JSON.stringify(fields)}`),
    };
    const recordEvent = egressRunEvents(proxyKube, `${release.proxy}-6b9f7c-x2x9q-1`, logger);
    const sent: Promise<void>[] = [];
    // As egress-proxy-main.ts wires them; the audit does not await its Events, so the test keeps them.
    const audit = new EgressAudit({
      logger,
      metrics: new EgressMetrics({ defaultMetrics: false }),
      addToStatus: () => Promise.resolve(),
      recordEvent: (egressRun, event) => {
        const recorded = recordEvent(egressRun, event);
        sent.push(recorded);
        return recorded;
      },
    });
    audit.record({
      kind: 'connect',
      run: { namespace: NS, name: 'denied', uid, allow: [] },
      host: 'evil.example',
      port: 443,
      allowed: false,
      rule: 'not-allowed',
      // What the sandbox asked for is quoted: its line breaks and hidden characters are spelled
      // out by the recorder, so the policy's one-line rule never refuses the proxy's own Event.
      message: 'evil.example is not on the run list\n\u202e\u0085',
      bytesSent: 0,
      bytesReceived: 0,
      durationMs: 3,
    });
    await Promise.all(sent);
    expect(sent).toHaveLength(1);
    expect(warnings).toEqual([]);
    const { items } = await kubectlJson<{ items: CoreV1Event[] }>([
      'get',
      'events',
      '-n',
      NS,
      '--field-selector',
      'involvedObject.name=denied',
    ]);
    expect(items).toEqual([
      expect.objectContaining({
        type: 'Warning',
        reason: 'EgressDenied',
        involvedObject: expect.objectContaining({ apiVersion: API_VERSION, kind: 'CodingRun', name: 'denied', namespace: NS, uid }),
        message: expect.stringContaining('The egress proxy refused evil.example:443'),
        // Said by the proxy, not the operator: `kubectl describe` shows who refused.
        source: { component: 'chamvi-egress-proxy' },
        reportingComponent: 'chamvi.dev/egress-proxy',
      }),
    ]);
  });

  it('was let post every forged Event by RBAC alone, before the policy', () => {
    expect(forgeries.map((forgery, index) => [forgery.case, beforePolicy[index]])).toEqual(
      forgeries.map((forgery) => [forgery.case, undefined]),
    );
    expect(eventsV1BeforePolicy).toBeUndefined();
  });

  it.each(forgeries)('may not create an Event with $case', async ({ forge, refused }) => {
    const event = forge(proxyForm(victimUid));
    expect(await createAsProxy(event)).toEqual({ code: 403, message: expect.stringContaining(refused) });
    const gone = await kubectl(['get', 'event', event.metadata!.name!, '-n', NS]);
    expect(gone.stderr).toMatch(/NotFound/);
  });

  it('may not create one through events.k8s.io either, were it granted that group: the policy judges it as core v1', async () => {
    expect(await createEventsV1AsProxy()).toEqual({
      code: 403,
      message: expect.stringContaining(
        `${REFUSED} Events only about a CodingRun (chamvi.dev/v1alpha1) in the Event's own namespace, not Pod (v1)`,
      ),
    });
  });

  it('concerns no other writer: the admin still posts any Event', async () => {
    for (const { case: name, forge } of forgeries.slice(0, 3)) {
      const event = forge(proxyForm(victimUid));
      await kubectlOk(['create', '-f', '-'], {
        input: JSON.stringify({ apiVersion: 'v1', kind: 'Event', ...event }),
      });
      expect((await kubectlJson<CoreV1Event>(['get', 'event', event.metadata!.name!, '-n', NS])).reason, name).toBe(event.reason);
    }
  });

  it('holds create alone on Events, in the watched namespace alone', async () => {
    const canI = async (namespace: string, ...args: string[]) =>
      (await kubectl(['auth', 'can-i', ...args, '-n', namespace, '--as', release.user])).stdout.trim();
    expect(await canI(NS, 'create', 'events')).toBe('yes');
    for (const verb of ['update', 'patch', 'delete']) expect(await canI(NS, verb, 'events'), verb).toBe('no');
    expect(await canI(OTHER_NS, 'create', 'events')).toBe('no');
  });
});
