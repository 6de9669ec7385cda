// Whether an admitted pod's security contexts still confine it as the operator's builders
// (sandbox-pod.ts) set them: who its processes run as, which privileges and capabilities they
// have, their syscall filter and root filesystem. Only the operator's own fields are compared,
// so what admission may honestly add passes: a field the builder set must keep the builder's
// value, and a field it left unset may stay unset or take any value that takes nothing away
// (OpenShift's SCC admission adds an SELinux level, a policy may drop more capabilities). The
// API server defaults no field of either context, so an absent field is one nobody set. Pure.
import type { V1Capabilities, V1PodSecurityContext, V1SecurityContext } from '@kubernetes/client-node';
import { sameJson } from './canonical-json.ts';
import { shortField } from './short-field.ts';

/** One field of a security context that is not as the operator set it. */
export interface SecurityContextChange {
  /** The field and its admitted value, e.g. `privileged true`, `capabilities.add SYS_ADMIN`. */
  field: string;
  /** What the operator set there, in words. */
  made: string;
}

type Context = V1SecurityContext | V1PodSecurityContext;

const shown = (value: unknown) => (value === undefined ? 'unset' : shortField(typeof value === 'string' ? value : JSON.stringify(value)));
const madeAs = (value: unknown) => (value === undefined ? 'the operator leaves it unset' : `the operator sets ${shown(value)}`);

/** Capability names as the runtimes read them: SYS_ADMIN and CAP_SYS_ADMIN are one. */
const capability = (name: string) => name.toUpperCase().replace(/^CAP_/, '');

/** Added capabilities the builder did not add, and dropped ones it dropped that are no longer dropped. */
function capabilityChanges(admitted: V1Capabilities | undefined, made: V1Capabilities | undefined): SecurityContextChange[] {
  const changes: SecurityContextChange[] = [];
  const madeAdd = new Set((made?.add ?? []).map(capability));
  for (const name of admitted?.add ?? []) {
    if (!madeAdd.has(capability(name))) changes.push({ field: `capabilities.add ${shown(name)}`, made: madeAs(made?.add) });
  }
  // Dropping more than the builder does takes nothing away; a drop it made must stay.
  const admittedDrop = new Set((admitted?.drop ?? []).map(capability));
  for (const name of made?.drop ?? []) {
    if (!admittedDrop.has(capability(name))) {
      changes.push({ field: `capabilities.drop without ${shown(name)}`, made: madeAs(made?.drop) });
    }
  }
  return changes;
}

/**
 * Values that loosen a container or pod when the builder left the field unset: a privileged
 * container, privilege escalation, an unmasked /proc, no seccomp or AppArmor profile, an SELinux
 * type, user or role (spc_t runs unconfined; an SCC sets only the level), a Windows host process,
 * the root group among the pod's supplementalGroups, any sysctl.
 */
function looseningChanges(admitted: Context, made: Context): SecurityContextChange[] {
  const changes: SecurityContextChange[] = [];
  const unset = (field: string) => !(field in made) || (made as Record<string, unknown>)[field] === undefined;
  const flag = (field: string, value: unknown) => changes.push({ field: `${field} ${shown(value)}`, made: madeAs(undefined) });
  if ('privileged' in admitted && unset('privileged') && admitted.privileged === true) flag('privileged', true);
  if ('allowPrivilegeEscalation' in admitted && unset('allowPrivilegeEscalation') && admitted.allowPrivilegeEscalation === true) {
    flag('allowPrivilegeEscalation', true);
  }
  if ('procMount' in admitted && unset('procMount') && admitted.procMount !== undefined && admitted.procMount !== 'Default') {
    flag('procMount', admitted.procMount);
  }
  if (unset('seccompProfile') && admitted.seccompProfile?.type === 'Unconfined') flag('seccompProfile', admitted.seccompProfile);
  if (unset('appArmorProfile') && admitted.appArmorProfile?.type === 'Unconfined') flag('appArmorProfile', admitted.appArmorProfile);
  const selinux = admitted.seLinuxOptions;
  if (unset('seLinuxOptions') && selinux && (selinux.type || selinux.user || selinux.role)) flag('seLinuxOptions', selinux);
  if (unset('windowsOptions') && admitted.windowsOptions?.hostProcess === true) flag('windowsOptions.hostProcess', true);
  // Pod level only. Group 0 opens whatever the image leaves to the root group; an SCC adds
  // supplementalGroups only from the namespace's range, and only under MustRunAs, which no
  // restricted SCC has. A sysctl changes the kernel for the pod: the builder sets none.
  const pod = admitted as V1PodSecurityContext;
  if (unset('supplementalGroups') && pod.supplementalGroups?.some((group) => Number(group) === 0)) {
    flag('supplementalGroups', pod.supplementalGroups);
  }
  if (unset('sysctls') && (pod.sysctls ?? []).length > 0)
    flag(
      'sysctls',
      pod.sysctls!.map((sysctl) => sysctl.name),
    );
  return changes;
}

/** How `admitted` differs from `made` in what confines the processes; empty when in nothing. */
export function securityContextChanges(admitted: Context | undefined, made: Context | undefined): SecurityContextChange[] {
  const admittedContext: Context = admitted ?? {};
  const madeContext: Context = made ?? {};
  const changes: SecurityContextChange[] = [];
  for (const [field, value] of Object.entries(madeContext)) {
    if (value === undefined || field === 'capabilities') continue;
    const now = (admittedContext as Record<string, unknown>)[field];
    if (!sameJson(now, value)) changes.push({ field: `${field} ${shown(now)}`, made: madeAs(value) });
  }
  if ('capabilities' in madeContext || 'capabilities' in admittedContext) {
    changes.push(
      ...capabilityChanges((admittedContext as V1SecurityContext).capabilities, (madeContext as V1SecurityContext).capabilities),
    );
  }
  changes.push(...looseningChanges(admittedContext, madeContext));
  return changes;
}
