// The egress proxy's configuration (egress-proxy-config.ts): the bounds on what it holds, as
// the chart's ConfigMap gives them, with defaults for those not given.
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONNECTION_LIMITS, DEFAULT_OPEN_LIMITS } from '../../operator/src/egress/decide-connection.ts';
import { EgressProxyConfigError, loadEgressProxyConfig } from '../../operator/src/egress/egress-proxy-config.ts';

const egressKey = 'k'.repeat(48);

describe('egress proxy config limits', () => {
  it('defaults every bound when none is given', () => {
    expect(loadEgressProxyConfig({ egressKey }, {}).limits).toEqual({
      open: DEFAULT_OPEN_LIMITS.total,
      openPerNamespace: DEFAULT_OPEN_LIMITS.perNamespace,
      connections: DEFAULT_CONNECTION_LIMITS.total,
      connectionsPerSource: DEFAULT_CONNECTION_LIMITS.perSource,
    });
  });

  it('takes the bounds given and defaults the rest', () => {
    expect(loadEgressProxyConfig({ egressKey, limits: { open: 2048, connectionsPerSource: 1024 } }, {}).limits).toEqual({
      open: 2048,
      openPerNamespace: DEFAULT_OPEN_LIMITS.perNamespace,
      connections: DEFAULT_CONNECTION_LIMITS.total,
      connectionsPerSource: 1024,
    });
  });

  it.each([
    ['a bound of 0', { open: 0 }, 'config key limits.open'],
    ['an unknown bound', { openPerRun: 10 }, 'config key limits'],
  ])('refuses %s, naming the key', (_why, limits, message) => {
    expect(() => loadEgressProxyConfig({ egressKey, limits }, {})).toThrow(EgressProxyConfigError);
    expect(() => loadEgressProxyConfig({ egressKey, limits }, {})).toThrow(message);
  });
});

describe('egress proxy config readApiServerEndpoints', () => {
  it("reads the API server's EndpointSlice unless told not to, as the chart's value of the same name says", () => {
    expect(loadEgressProxyConfig({ egressKey }, {}).readApiServerEndpoints).toBe(true);
    expect(loadEgressProxyConfig({ egressKey, readApiServerEndpoints: false }, {}).readApiServerEndpoints).toBe(false);
  });

  it('refuses a value that is not true or false, naming the key', () => {
    expect(() => loadEgressProxyConfig({ egressKey, readApiServerEndpoints: 'no' }, {})).toThrow('config key readApiServerEndpoints');
  });
});
