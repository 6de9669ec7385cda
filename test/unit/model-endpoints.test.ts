// Security #11.3: a run's model endpoint must be canonical and listed in allowModelEndpoints.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { isModelEndpointAllowed, parseEndpointUrl } from '../../operator/src/reconcile/model-endpoints.ts';

const config = {
  allowModelEndpoints: [
    'https://llm.internal/v1',
    'http://127.0.0.1:8000',
    'https://gateway.example/teams/*/v1',
    'http://[::1]:9000/api/**',
  ],
};
const compatible = (baseURL: string) => ({ provider: 'openai-compatible', baseURL });

describe('security #11.3 allowModelEndpoints', () => {
  it.each([
    'https://llm.internal/v1',
    'https://llm.internal/v1/',
    'https://llm.internal/v1/deployments/a',
    'http://127.0.0.1:8000/v1',
    'http://127.0.0.1:8000',
    'https://gateway.example/teams/blue/v1',
    'http://[::1]:9000/api/x/y/v1',
    "https://llm.internal/v1/a,b=c:d/(e)'~!$&+/..f",
  ])('allows %s', (url) => {
    expect(isModelEndpointAllowed(compatible(url), config)).toEqual({ allowed: true });
  });

  it.each([
    ['a look-alike host', 'https://llm.internal.evil.io/v1', 'matches none'],
    ['a sibling path that only shares a prefix', 'https://llm.internal/v1x', 'matches none'],
    ['a path outside the listed one', 'https://llm.internal/admin', 'matches none'],
    ['another port of a listed host', 'http://127.0.0.1:8001/v1', 'matches none'],
    ['the default port of a listed host', 'http://127.0.0.1/v1', 'matches none'],
    ['another scheme of a listed host', 'http://llm.internal/v1', 'matches none'],
    ['a glob segment crossing a slash', 'https://gateway.example/teams/a/b/v1', 'matches none'],
    ['a backslash that WHATWG reads as a slash', 'https://llm.internal\\@evil.example/v1', 'backslash'],
    ['a backslash in the path', 'https://llm.internal/v1\\..\\admin', 'backslash'],
    ['userinfo', 'https://llm.internal@evil.example/v1', 'userinfo'],
    ['userinfo with a password', 'https://u:p@llm.internal/v1', 'userinfo'],
    ['a percent-encoded slash', 'https://llm.internal/v1%2F..%2Fadmin', 'percent'],
    ['a percent-encoded dot segment', 'https://llm.internal/v1/%2e%2e/admin', 'percent'],
    ['a percent-encoded host', 'https://llm%2einternal/v1', 'percent'],
    ['a dot-dot segment', 'https://llm.internal/v1/../admin', '".."'],
    // Tomcat and Spring drop `;parameters` from each segment before resolving dots.
    ['a "..;" segment climbing out of a team\'s glob', 'https://gateway.example/teams/a/v1/..;/..;/b/v1', '";"'],
    ['a ".;" segment', 'https://llm.internal/v1/.;/x', '";"'],
    ['a path parameter', 'https://llm.internal/v1;jsessionid=1', '";"'],
    ['a dot segment', 'https://llm.internal/./v1', '".."'],
    ['an empty segment', 'https://llm.internal//v1', 'empty segment'],
    ['an upper-case host', 'https://LLM.internal/v1', 'upper-case'],
    ['an upper-case scheme', 'HTTPS://llm.internal/v1', 'lower case'],
    ['the default port written out', 'https://llm.internal:443/v1', 'default port 443'],
    ['a port with a leading zero', 'http://127.0.0.1:08000/v1', 'leading zeros'],
    ['a trailing dot on the host', 'https://llm.internal./v1', 'ends with a dot'],
    ['a short IPv4 form', 'http://127.1:8000/v1', 'canonical form'],
    ['a hexadecimal IPv4 form', 'http://0x7f.0.0.1:8000/v1', 'canonical form'],
    ['an integer IPv4 form', 'http://2130706433:8000/v1', 'canonical form'],
    ['a non-canonical IPv6 form', 'http://[0:0::1]:9000/api/v1', 'canonical form'],
    ['a control character', 'https://llm.internal/v1\u001b[2K', 'control'],
    ['a non-ASCII look-alike host', 'https://llm.іnternal/v1', 'non-ASCII'],
    ['a tab', 'https://llm.internal/\tv1', 'control'],
    ['a query', 'https://llm.internal/v1?x=1', 'query'],
    ['a fragment', 'https://llm.internal/v1#x', 'fragment'],
    ['a file URL', 'file:///etc/passwd', 'scheme file'],
    ['ftp', 'ftp://llm.internal/v1', 'scheme ftp'],
  ])('refuses %s', (_, url, why) => {
    const decision = isModelEndpointAllowed(compatible(url), config);
    expect(decision.allowed).toBe(false);
    expect((decision as { message: string }).message).toContain(why);
  });

  it('refuses "..;" under an exactly listed path, and a listed pattern with ";" allows no URL', () => {
    const exact = { allowModelEndpoints: ['https://gateway.corp/teams/a/v1', 'https://gateway.corp/x;v=1'] };
    expect(isModelEndpointAllowed(compatible('https://gateway.corp/teams/a/v1'), exact)).toEqual({ allowed: true });
    for (const url of ['https://gateway.corp/teams/a/v1/..;/..;/b/v1', 'https://gateway.corp/x;v=1']) {
      expect(isModelEndpointAllowed(compatible(url), exact)).toMatchObject({ allowed: false, message: expect.stringContaining('";"') });
    }
  });

  it('shows a refused URL escaped, so a control character in it cannot reach a terminal', () => {
    const decision = isModelEndpointAllowed(compatible('https://llm.internal/v1\u001b]0;pwned\u0007'), config);
    expect((decision as { message: string }).message).not.toMatch(/[\u0000-\u001f]/);
    expect((decision as { message: string }).message).toContain('\\u001b');
  });

  it('refuses every run-set endpoint, openai-compatible included, when the list is empty, and says how to allow one', () => {
    const decision = isModelEndpointAllowed(compatible('https://llm.internal/v1'), { allowModelEndpoints: [] });
    expect(decision).toMatchObject({ allowed: false, message: expect.stringContaining("the operator's allowModelEndpoints") });
  });

  it('allows the fixed vendor endpoints and the scripted model without any listing', () => {
    for (const provider of ['openai', 'deepseek', 'openrouter', 'groq', 'xai', 'moonshot', 'scripted']) {
      expect(isModelEndpointAllowed({ provider }, { allowModelEndpoints: [] })).toEqual({ allowed: true });
    }
  });

  it('checks a baseURL on any provider, not only openai-compatible', () => {
    expect(isModelEndpointAllowed({ provider: 'openai', baseURL: 'https://evil.example/v1' }, config).allowed).toBe(false);
  });

  it('accepts as canonical exactly what the URL parser serialises unchanged', () => {
    for (const url of ['https://llm.internal/v1', 'http://10.0.0.5:8080/openai/v1', 'https://xn--llm-9na.example/v1']) {
      expect(parseEndpointUrl(url)).toHaveProperty('endpoint');
      expect([url, `${url}/`]).toContain(new URL(url).href);
    }
  });
});

describe('security #11.3 allowModelEndpoints config', () => {
  it('reads the list from the file and from CHAMVI_ALLOW_MODEL_ENDPOINTS, empty by default', () => {
    expect(loadOperatorConfig({}, {}).allowModelEndpoints).toEqual([]);
    expect(loadOperatorConfig({ allowModelEndpoints: ['https://a.example/v1'] }, {}).allowModelEndpoints).toEqual(['https://a.example/v1']);
    expect(
      loadOperatorConfig({}, { CHAMVI_ALLOW_MODEL_ENDPOINTS: 'https://a.example/v1, http://10.0.0.5:8000' }).allowModelEndpoints,
    ).toEqual(['https://a.example/v1', 'http://10.0.0.5:8000']);
  });

  it.each([
    ['https://*.example/v1', 'wildcard'],
    ['https://llm.example:*/v1', 'wildcard'],
    ['https://LLM.example/v1', 'upper-case'],
    ['https://llm.example:443/v1', 'default port'],
    ['https://user@llm.example/v1', 'userinfo'],
    ['llm.example/v1', 'not an absolute URL'],
  ])('refuses the pattern %s at start-up, naming the key', (pattern, why) => {
    expect(() => loadOperatorConfig({ allowModelEndpoints: [pattern] }, {})).toThrow(ConfigError);
    expect(() => loadOperatorConfig({ allowModelEndpoints: [pattern] }, {})).toThrow(
      new RegExp(`config key allowModelEndpoints.0: .*${why}`),
    );
  });
});
