// Issue #12: a run with egress gets the proxy and its own credential (the policy that lets it
// reach the proxy alone: sandbox-network-policy.test.ts); a run without has no proxy at all.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { checkProxyAuthorization } from '../../operator/src/egress/proxy-credential.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';

const KEY = 'e'.repeat(64);
const config = loadOperatorConfig(
  {
    allowEgress: ['*'],
    egressKey: KEY,
    egressProxy: { host: 'chamvi-egress-proxy.chamvi-system.svc', address: '10.96.0.50', targetPort: 3129 },
  },
  {},
);

function parsedRun(uid: string, allow: string[], env: Array<{ name: string; value: string }> = []): ParsedCodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: 'fix', namespace: 'agents', uid },
    spec: codingRunSpec.parse({
      task: 'Fix it',
      repository: { url: 'https://github.com/acme/x' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
      sandbox: { egress: { allow }, env },
    }),
  };
}
const UID = '11111111-1111-4111-8111-111111111111';
const envOf = (run: ParsedCodingRun) =>
  Object.fromEntries(buildSandboxPod(run, config).spec!.containers[0]!.env!.map((e) => [e.name, e.value]));

describe('sandbox with egress', () => {
  const run = parsedRun(UID, ['registry.npmjs.org'], [{ name: 'HTTPS_PROXY', value: 'http://elsewhere:1' }]);
  const env = envOf(run);

  it("points every proxy variable, and npm's, pip's and git's settings, at the proxy's address with the run's own credential", () => {
    const url = new URL(env.HTTPS_PROXY!);
    expect(url.hostname).toBe('10.96.0.50');
    expect(url.port).toBe('3128');
    expect(decodeURIComponent(url.username)).toBe(UID);
    const header = `Basic ${Buffer.from(`${url.username}:${url.password}`).toString('base64')}`;
    expect(checkProxyAuthorization(header, KEY)).toEqual({ ok: true, runUid: UID });
    for (const name of [
      'HTTP_PROXY',
      'http_proxy',
      'https_proxy',
      'npm_config_proxy',
      'npm_config_https_proxy',
      'PIP_PROXY',
      'GIT_CONFIG_VALUE_0',
    ])
      expect(env[name], name).toBe(env.HTTPS_PROXY);
    expect(env.GIT_CONFIG_KEY_0).toBe('http.proxy');
    expect(env.NO_PROXY).toBe('localhost,127.0.0.1,::1');
    expect(env.NODE_USE_ENV_PROXY).toBe('1');
  });

  it('gives another run another credential', () => {
    const other = envOf(parsedRun('22222222-2222-4222-8222-222222222222', ['registry.npmjs.org']));
    expect(new URL(other.HTTPS_PROXY!).password).not.toBe(new URL(env.HTTPS_PROXY!).password);
  });

  it('keeps the key itself out of the pod', () => {
    expect(JSON.stringify(buildSandboxPod(run, config))).not.toContain(KEY);
  });
});

describe('sandbox without egress', () => {
  const run = parsedRun(UID, []);

  it('has no proxy in its environment', () => {
    expect(Object.keys(envOf(run)).filter((name) => /proxy|GIT_CONFIG/i.test(name))).toEqual([]);
  });
});
