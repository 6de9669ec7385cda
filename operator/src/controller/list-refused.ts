// Whether the API server refused a list for a reason that retrying will not clear: 403 (the
// operator's RBAC there is gone: a tenant with `admin` in a watched namespace may delete the
// RoleBinding the chart made, and a deleted namespace takes its Role with it) or 404 (the
// resource is not served: a CRD not installed). Only a change to the cluster fixes it; a 5xx or
// a dropped connection (an API server starting or overloaded) usually clears by itself.
import { statusCodeOf } from '../kube/api-errors.ts';

export function isListRefused(error: unknown): boolean {
  const code = statusCodeOf(error);
  return code === 403 || code === 404;
}
