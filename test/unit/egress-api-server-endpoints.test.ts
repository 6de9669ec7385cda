// The API server endpoints the egress proxy refuses, found at start (api-server-endpoints.ts):
// the admin's names are asked for as absolute names, and one that does not resolve stops the
// proxy rather than leaving that endpoint open.
import { describe, expect, it } from 'vitest';
import { ApiServerAddressError, apiServerSources, resolveApiServerEndpoints } from '../../operator/src/egress/api-server-endpoints.ts';

const notFound = (name: string) => Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' }));

describe('resolveApiServerEndpoints', () => {
  it('takes addresses as they are, and resolves names: the kubeconfig one as the API client does, the admin one as absolute', async () => {
    const asked: string[] = [];
    const endpoints = await resolveApiServerEndpoints(
      apiServerSources('https://api.cluster.example:6443', { KUBERNETES_SERVICE_HOST: '10.96.0.1' }, [
        'api.corp.example:443',
        '[2001:db8::1]:443',
      ]),
      (name) => {
        asked.push(name);
        return Promise.resolve(name.startsWith('api.cluster') ? ['203.0.113.5'] : ['198.51.100.7', '2001:db8::7']);
      },
    );
    expect(asked).toEqual(['api.cluster.example', 'api.corp.example.']);
    expect(endpoints).toEqual([
      { address: '203.0.113.5', port: 6443 },
      { address: '10.96.0.1', port: 443 },
      { address: '198.51.100.7', port: 443 },
      { address: '2001:db8::7', port: 443 },
      { address: '2001:db8::1', port: 443 },
    ]);
  });

  it('refuses to go on when a name the admin listed does not resolve, naming the entry and what to do', async () => {
    const resolved = resolveApiServerEndpoints(apiServerSources(undefined, {}, ['34.118.0.10:443', 'api.invalid:443']), notFound);
    await expect(resolved).rejects.toBeInstanceOf(ApiServerAddressError);
    await expect(resolved).rejects.toThrow(
      /^apiServerAddresses\[1\]: api\.invalid did not resolve \(ENOTFOUND\).*list the API server by IP address$/,
    );
  });

  it('refuses to go on when a name resolves to no address at all', async () => {
    await expect(resolveApiServerEndpoints(apiServerSources('https://api.example:443', {}, []), () => Promise.resolve([]))).rejects.toThrow(
      /^the kubeconfig server: api\.example did not resolve \(no address\)/,
    );
  });
});
