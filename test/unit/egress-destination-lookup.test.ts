// The egress proxy asks DNS for the name it checked, never a name the resolver's search list
// makes of it: in a pod, `go.dev` is asked as `go.dev.svc.cluster.local` first, the Service
// `go` of a namespace `dev` that any tenant able to create it would own.
import { describe, expect, it } from 'vitest';
import { destinationResolver } from '../../operator/src/egress/destination-lookup.ts';

describe('destinationResolver', () => {
  const asked: string[] = [];
  const resolve = destinationResolver(new Map([['registry.test', '10.0.0.7']]), async (name) => {
    asked.push(name);
    return ['93.184.216.34'];
  });

  it('asks for the checked name as absolute, so no search domain is tried first', async () => {
    asked.length = 0;
    await resolve('go.dev');
    await resolve('artifactory.corp.example');
    expect(asked).toEqual(['go.dev.', 'artifactory.corp.example.']);
  });

  it('takes an admin alias as it is and an IP literal as written', async () => {
    asked.length = 0;
    expect(await resolve('registry.test')).toEqual(['10.0.0.7']);
    await resolve('203.0.113.9');
    await resolve('2001:db8::1');
    expect(asked).toEqual(['203.0.113.9', '2001:db8::1']);
  });
});
