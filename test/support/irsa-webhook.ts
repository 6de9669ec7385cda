// The sandbox pod as EKS's pod-identity webhook (IRSA) leaves it for a ServiceAccount annotated
// eks.amazonaws.com/role-arn: the credential the operator's admitted-pod check must refuse, in
// the unit test of the check and in the integration test of the exec that runs it.
import type { V1Pod } from '@kubernetes/client-node';

/** Where the webhook mounts the projected token. */
export const IRSA_TOKEN_DIR = '/var/run/secrets/eks.amazonaws.com/serviceaccount';

/** A copy of the pod with what the webhook adds: a projected token for sts.amazonaws.com, its mount, and the AWS variables. */
export function withIrsa(pod: V1Pod): V1Pod {
  const copy = structuredClone(pod);
  copy.spec!.volumes!.push({
    name: 'aws-iam-token',
    projected: { sources: [{ serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 86400, path: 'token' } }] },
  });
  const container = copy.spec!.containers[0]!;
  container.env!.push(
    { name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'regional' },
    { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::111122223333:role/team' },
    { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: `${IRSA_TOKEN_DIR}/token` },
  );
  container.volumeMounts!.push({ name: 'aws-iam-token', mountPath: IRSA_TOKEN_DIR, readOnly: true });
  return copy;
}
