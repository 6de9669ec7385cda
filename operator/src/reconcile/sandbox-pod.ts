// The sandbox pod for a run: everything SECURITY.md promises about the pod is decided here,
// in one pure function, so a unit test can read it field by field and an integration test
// can show the restricted PodSecurity profile admits it.
import type { V1Container, V1Pod, V1ResourceRequirements } from '@kubernetes/client-node';
import { API_VERSION, KIND, RUN_LABEL, RUN_UID_LABEL, durationMs, type ParsedCodingRun } from '../api/index.ts';
import { quantityAboveZero } from '../api/kubernetes-names.ts';
import { quantityValue } from '../api/resource-quantity.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { approvalWaitAllowanceMs } from './approval-wait.ts';
import { runNameLabel, sandboxPodName } from './names.ts';
import { sandboxPolicyPodLabels } from './sandbox-network-policy.ts';
import { sandboxPlacementSpec } from './sandbox-placement.ts';
import { egressEnv } from './sandbox-egress.ts';
// The container idles on node, which every sandbox has (the default image ships it, a custom
// image gets it from the init container); the toolbox knows its sandbox container by it.
import { IDLE_SCRIPT } from '../../../sandbox-image/toolbox/contract/sandbox-init.ts';
import { HELD_ENV_PREFIX, isHeldEnvName } from '../../../sandbox-image/toolbox/contract/held-environment.ts';

export const SANDBOX_CONTAINER = 'sandbox';
export const WORKSPACE_PATH = '/workspace';
export const HOME_PATH = '/home/chamvi';
const TOOLS_PATH = '/opt/chamvi';
export const SANDBOX_UID = 1000;

export const DEFAULT_RESOURCES: Required<Pick<V1ResourceRequirements, 'requests' | 'limits'>> = {
  requests: { cpu: '250m', memory: '512Mi', 'ephemeral-storage': '1Gi' },
  limits: { cpu: '2', memory: '4Gi', 'ephemeral-storage': '12Gi' },
};

export function runLabels(run: ParsedCodingRun): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'chamvi-sandbox',
    'app.kubernetes.io/managed-by': 'chamvi-operator',
    [RUN_LABEL]: runNameLabel(run.metadata.name),
    [RUN_UID_LABEL]: run.metadata.uid,
  };
}

export function ownerReference(run: ParsedCodingRun) {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    name: run.metadata.name,
    uid: run.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The pod-level half of the restricted profile, shared by sandbox pods and the isolation probe's pod. */
export const restrictedPodSecurity = {
  runAsNonRoot: true,
  runAsUser: SANDBOX_UID,
  runAsGroup: SANDBOX_UID,
  fsGroup: SANDBOX_UID,
  seccompProfile: { type: 'RuntimeDefault' },
};

export const restrictedContainerSecurity = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  runAsUser: SANDBOX_UID,
  runAsGroup: SANDBOX_UID,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/**
 * The run's resources over the defaults. A default is never left beside a user value it would
 * contradict: the API server refuses a request above its limit, so a user limit under the
 * default request takes the request down with it (as Kubernetes defaults a request to its
 * limit), and a user request over the default limit takes the limit up. Values the user gave on
 * both sides stay as given. A user limit not above zero counts as none, so the default takes its
 * place: the kubelet reads a zero limit as no limit and a quota counts it as 0. The schema refuses
 * one (kubernetes-names.ts limitAboveZeroRule); this keeps the pod bounded should a parse be skipped.
 */
function mergeResources(user: ParsedCodingRun['spec']['sandbox']['resources']): V1ResourceRequirements {
  const asStrings = (list: Record<string, string | number> | undefined) =>
    Object.fromEntries(Object.entries(list ?? {}).map(([name, value]) => [name, String(value)]));
  const userRequests = asStrings(user?.requests);
  const userLimits = asStrings(Object.fromEntries(Object.entries(user?.limits ?? {}).filter(([, limit]) => quantityAboveZero(limit))));
  const requests: Record<string, string> = { ...DEFAULT_RESOURCES.requests, ...userRequests };
  const limits: Record<string, string> = { ...DEFAULT_RESOURCES.limits, ...userLimits };
  const above = (a: string, b: string) => (quantityValue(a) ?? 0) > (quantityValue(b) ?? Infinity);
  for (const name of Object.keys(requests)) {
    const limit = limits[name];
    if (limit === undefined || !above(requests[name]!, limit)) continue;
    if (!(name in userRequests)) requests[name] = limit;
    else if (!(name in userLimits)) limits[name] = requests[name]!;
  }
  return { requests, limits };
}

/**
 * The pod's activeDeadlineSeconds: the budget's wall clock plus time to take the diff, and the
 * longest the run may wait for humans (approval-wait.ts: at most config.maxApprovalWaitSeconds,
 * the most the controller moves the run's deadline by), so the kubelet ends the pod even if the
 * operator is gone, and never before the controller would end the run. Fixed once the pod is
 * made: Kubernetes lets it be lowered, never raised, so a budget raised later cannot move it
 * (decide.ts ends such a run before it, knowing it). At least 1: the API server refuses 0, which
 * a zero budget and deadlineGraceSeconds 0 would give.
 */
export function sandboxActiveDeadlineSeconds(run: ParsedCodingRun, config: OperatorConfig): number {
  const humanTimeMs = approvalWaitAllowanceMs(run, config.maxApprovalWaitSeconds * 1000);
  return Math.max(1, Math.ceil((durationMs(run.spec.budget.timeout) + humanTimeMs) / 1000) + 2 * config.deadlineGraceSeconds);
}

export function buildSandboxPod(run: ParsedCodingRun, config: OperatorConfig): V1Pod {
  const { sandbox } = run.spec;
  const customImage = sandbox.image !== undefined && sandbox.image !== config.sandboxImage;
  const nodePath = customImage ? `${TOOLS_PATH}/node` : config.sandboxNodePath;
  const egress = egressEnv(run, config);
  // The operator's own variables win over the run's of the same name (they come later).
  const operatorNames = new Set(egress.map((variable) => variable.name));
  const volumeMounts = [
    { name: 'workspace', mountPath: WORKSPACE_PATH },
    { name: 'home', mountPath: HOME_PATH },
    { name: 'tmp', mountPath: '/tmp' },
    ...(customImage ? [{ name: 'chamvi-tools', mountPath: TOOLS_PATH, readOnly: true }] : []),
  ];
  const container: V1Container = {
    name: SANDBOX_CONTAINER,
    image: sandbox.image ?? config.sandboxImage,
    // Security #11.10: with IfNotPresent the kubelet starts an image some other pod pulled
    // without checking that this namespace may pull it; Always makes it ask the registry
    // with this pod's credentials. The operator's own image is everyone's, so it may stay cached.
    imagePullPolicy: customImage ? 'Always' : 'IfNotPresent',
    // The default image's entrypoint is tini, which reaps the process groups background jobs
    // leave behind, so only the arguments are set there; a custom image's entrypoint is
    // unknown, so its command is replaced.
    ...(customImage ? { command: [nodePath, '-e', IDLE_SCRIPT] } : { args: [nodePath, '-e', IDLE_SCRIPT] }),
    workingDir: WORKSPACE_PATH,
    env: [
      // Defaults the run may replace: a later duplicate wins.
      { name: 'HOME', value: HOME_PATH },
      { name: 'TMPDIR', value: '/tmp' },
      ...(customImage ? [{ name: 'PATH', value: `${TOOLS_PATH}:/usr/local/bin:/usr/bin:/bin` }] : []),
      // Kubernetes expands $(NAME) in a value and turns $$ into $; the schema promises a plain
      // value, passed literally (as run --local does), so every $ is written $$. (A function, as
      // a replacement string would read "$$" as one $.) The pod is larger than the run by one
      // byte per $: the run's size check counts them (run-bytes.ts).
      // A variable node or the dynamic loader reads at start (NODE_OPTIONS, LD_PRELOAD) is held
      // back under CHAMVI_RUN_ENV_<name>: the toolbox, which pods/exec starts with this
      // environment, would read it, and only bash gets it back (contract/held-environment.ts).
      // The longer names cost at most 64 x 15 bytes, far within etcd's margin over MAX_RUN_BYTES.
      ...(sandbox.env ?? [])
        .filter(({ name }) => !(isHeldEnvName(name) && operatorNames.has(name)))
        .map(({ name, value }) => ({
          name: isHeldEnvName(name) ? `${HELD_ENV_PREFIX}${name}` : name,
          value: value.replaceAll('$', () => '$$'),
        })),
      // After the run's own variables, so these win: the toolbox's own settings (the schema
      // refuses CHAMVI_* names too; a run's would move the workspace or put the toolbox's logs
      // in the diff), and the proxy.
      { name: 'CHAMVI_WORKSPACE', value: WORKSPACE_PATH },
      { name: 'CHAMVI_HOME', value: `${HOME_PATH}/.chamvi` },
      ...egress,
    ],
    resources: mergeResources(sandbox.resources),
    securityContext: restrictedContainerSecurity,
    volumeMounts,
  };
  // A custom image need not contain node or the toolbox: copy both from the operator's
  // sandbox image into a shared volume before the sandbox starts.
  const initContainers: V1Container[] = customImage
    ? [
        {
          name: 'chamvi-tools',
          image: config.sandboxImage,
          imagePullPolicy: 'IfNotPresent',
          command: ['cp', config.sandboxNodePath, `${TOOLS_PATH}/toolbox.mjs`, '/chamvi-tools/'],
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '500m', memory: '128Mi', 'ephemeral-storage': '256Mi' } },
          securityContext: restrictedContainerSecurity,
          volumeMounts: [{ name: 'chamvi-tools', mountPath: '/chamvi-tools' }],
        },
      ]
    : [];
  const emptyDir = (sizeLimit: string) => ({ emptyDir: { sizeLimit } });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: sandboxPodName(run),
      namespace: run.metadata.namespace,
      labels: { ...runLabels(run), ...sandboxPolicyPodLabels(run) },
      ownerReferences: [ownerReference(run)],
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      activeDeadlineSeconds: sandboxActiveDeadlineSeconds(run, config),
      terminationGracePeriodSeconds: 5,
      ...sandboxPlacementSpec(config.sandboxPlacement, sandbox.runtimeClassName),
      securityContext: restrictedPodSecurity,
      initContainers,
      containers: [container],
      volumes: [
        { name: 'workspace', ...emptyDir(config.workspaceSizeLimit) },
        { name: 'home', ...emptyDir(config.homeSizeLimit) },
        { name: 'tmp', ...emptyDir('1Gi') },
        ...(customImage ? [{ name: 'chamvi-tools', ...emptyDir('512Mi') }] : []),
      ],
    },
  };
}
