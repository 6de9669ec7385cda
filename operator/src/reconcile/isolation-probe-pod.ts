// Security #11.8: the throwaway pod and deny-all policy of an isolation probe. The pod is a
// sandbox in all that matters to the network (the sandbox image, the same restricted security
// context, no service-account token, the sandboxes' placement), so what it can reach is what a
// sandbox in the namespace could reach, on the nodes sandboxes run on. Pure, so a unit test reads it field by field.
import type { V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { OperatorConfig } from '../config/operator-config.ts';
import { IDLE_SCRIPT } from '../../../sandbox-image/toolbox/contract/sandbox-init.ts';
import { sandboxPlacementSpec } from './sandbox-placement.ts';
import { HOME_PATH, SANDBOX_CONTAINER, WORKSPACE_PATH, restrictedContainerSecurity, restrictedPodSecurity } from './sandbox-pod.ts';

/** Every probe object carries this label (its value is the probe's id); leftovers of a crashed operator are found by it. */
export const ISOLATION_PROBE_LABEL = 'chamvi.dev/isolation-probe';
export const ISOLATION_PROBE_PREFIX = 'chamvi-isolation-probe';

export function isolationProbeLabels(probeId: string): Record<string, string> {
  return {
    // The sandbox's name label: on the dev cluster (kwok) this is what gives a pod a working exec.
    'app.kubernetes.io/name': 'chamvi-sandbox',
    'app.kubernetes.io/component': 'isolation-probe',
    'app.kubernetes.io/managed-by': 'chamvi-operator',
    [ISOLATION_PROBE_LABEL]: probeId,
  };
}

export const isolationProbeName = (probeId: string) => `${ISOLATION_PROBE_PREFIX}-${probeId}`;

/** The probe pod: `lifetimeSeconds` bounds it even if the operator dies before deleting it. */
export function buildIsolationProbePod(
  namespace: string,
  probeId: string,
  config: Pick<OperatorConfig, 'sandboxImage' | 'sandboxNodePath' | 'sandboxPlacement'>,
  lifetimeSeconds: number,
): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: isolationProbeName(probeId), namespace, labels: isolationProbeLabels(probeId) },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      activeDeadlineSeconds: lifetimeSeconds,
      terminationGracePeriodSeconds: 1,
      ...sandboxPlacementSpec(config.sandboxPlacement),
      securityContext: restrictedPodSecurity,
      containers: [
        {
          name: SANDBOX_CONTAINER,
          image: config.sandboxImage,
          imagePullPolicy: 'IfNotPresent',
          args: [config.sandboxNodePath, '-e', IDLE_SCRIPT],
          workingDir: WORKSPACE_PATH,
          env: [
            { name: 'CHAMVI_WORKSPACE', value: WORKSPACE_PATH },
            { name: 'CHAMVI_HOME', value: `${HOME_PATH}/.chamvi` },
            { name: 'HOME', value: HOME_PATH },
            { name: 'TMPDIR', value: '/tmp' },
          ],
          resources: {
            requests: { cpu: '10m', memory: '64Mi', 'ephemeral-storage': '16Mi' },
            limits: { cpu: '500m', memory: '256Mi', 'ephemeral-storage': '128Mi' },
          },
          securityContext: restrictedContainerSecurity,
          volumeMounts: [
            { name: 'workspace', mountPath: WORKSPACE_PATH },
            { name: 'home', mountPath: HOME_PATH },
            { name: 'tmp', mountPath: '/tmp' },
          ],
        },
      ],
      volumes: ['workspace', 'home', 'tmp'].map((name) => ({ name, emptyDir: { sizeLimit: '32Mi' } })),
    },
  };
}

/**
 * Denies all egress (and ingress) of the probe pod, as a run's policy denies its sandbox's.
 * Owned by the pod, so the garbage collector removes it with the pod if the operator cannot.
 */
export function buildIsolationProbePolicy(namespace: string, probeId: string, podUid: string): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: isolationProbeName(probeId),
      namespace,
      labels: isolationProbeLabels(probeId),
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: isolationProbeName(probeId), uid: podUid }],
    },
    spec: {
      podSelector: { matchLabels: { [ISOLATION_PROBE_LABEL]: probeId } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    },
  };
}
