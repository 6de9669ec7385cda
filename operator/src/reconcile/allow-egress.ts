// Which hosts a run's sandbox may ask to reach: spec.sandbox.egress.allow, bounded by the
// admin's allowEgress. Pure. A run asking for a host no allowEgress pattern covers is refused
// before it gets a sandbox (InvalidSpec, naming the host), so the proxy never holds a list
// wider than the admin's; the proxy checks the admin's list again per connection anyway.
import { parseHostPattern, patternCovers } from '../egress/host-pattern.ts';

export type EgressDecision = { allowed: true } | { allowed: false; message: string };

export function isEgressAllowed(requested: readonly string[], allowEgress: readonly string[]): EgressDecision {
  const bounds = allowEgress.flatMap((source) => parseHostPattern(source) ?? []);
  for (const source of requested) {
    const pattern = parseHostPattern(source);
    const shown = JSON.stringify(source.length > 100 ? `${source.slice(0, 100)}…` : source).replace(/[^\x20-\x7e]/g, '?');
    if (!pattern) {
      return {
        allowed: false,
        message: `spec.sandbox.egress.allow entry ${shown} is not a host pattern such as registry.npmjs.org, *.pythonhosted.org or proxy.golang.org:443; fix it and create the run again`,
      };
    }
    if (!bounds.some((bound) => patternCovers(bound, pattern))) {
      const admin =
        allowEgress.length === 0 ? 'allows no egress (allowEgress is empty)' : `allows egress only to ${allowEgress.join(', ')}`;
      return {
        allowed: false,
        message:
          `spec.sandbox.egress.allow asks for ${shown}, but the operator ${admin}; ` +
          'remove the host from the run, or ask an admin to add it to allowEgress, and create the run again',
      };
    }
  }
  return { allowed: true };
}
