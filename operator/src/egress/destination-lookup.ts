// How the egress proxy finds a destination's addresses: the admin's hostAliases first, else
// DNS for the name exactly as checked. A relative name goes through the resolver's search
// list first: in a pod (`search <ns>.svc.cluster.local svc.cluster.local cluster.local`,
// `ndots:5`) `go.dev` is asked as `go.dev.svc.cluster.local` before `go.dev`, which is the
// Service `go` of namespace `dev`. Whoever may create that Service would get every run's
// traffic to a name the allow-list checked. So the name is asked as absolute (a trailing dot).
import { isIP } from 'node:net';

export function destinationResolver(
  aliases: ReadonlyMap<string, string>,
  lookupAll: (name: string) => Promise<string[]>,
): (host: string) => Promise<string[]> {
  return async (host) => {
    const alias = aliases.get(host);
    if (alias) return [alias];
    return lookupAll(isIP(host) ? host : `${host}.`);
  };
}
