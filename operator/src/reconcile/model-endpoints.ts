// Security #11.3: may a run's model be called at the endpoint it names? Pure.
//
// A run's baseURL receives the API key from the run's Secret as a Bearer token and its error
// bodies used to come back into status: without a bound, a run author could send any Secret
// anywhere and use the operator to probe internal services. So a run-set baseURL must be
// listed in the admin's allowModelEndpoints; the providers' fixed vendor endpoints need no
// listing (the operator chose them, not the run).
//
// "Check the value you use": a URL is accepted only when it is already canonical, that is,
// when the string the SDK will hand to fetch is exactly the string checked here (WHATWG
// serialises it unchanged). Anything that a parser might read differently — backslashes,
// percent-escapes, userinfo, control or non-ASCII characters, uppercase hosts, a default port
// written out, `.`/`..` segments, numeric IPv4 short forms — is refused, not repaired. So is
// what the server behind the endpoint may read differently from the matcher here: a `;` in the
// path (Tomcat- and Spring-style servers drop `;parameters` from each segment before resolving
// dots, so `/v1/..;/..;/b` reaches `/b`), as are `%2e`, `%2f`, `\` and `//` above.
import { findProviderDeclaration } from '../providers/provider-registry.ts';

/** A canonical http(s) endpoint, split for matching. `port` is '' for the scheme's default. */
export interface CanonicalEndpoint {
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: string;
  /** '' or '/segment/...', without a trailing slash. */
  readonly path: string;
}

export type EndpointParse = { endpoint: CanonicalEndpoint } | { refused: string };

export type ModelEndpointDecision = { allowed: true } | { allowed: false; message: string };

const DEFAULT_PORTS: Record<string, string> = { http: '80', https: '443' };
const DNS_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV6 = /^\[[0-9a-f:.]+\]$/;
// RFC 3986 pchar minus `%` and `@`; `*` is a glob in patterns and refused in URLs, and so is
// `;` (refused on its own before this, to say why).
const PATH_CHARACTERS = /^[A-Za-z0-9._~!$&'()+,=:/-]*$/;
const PATTERN_PATH_CHARACTERS = /^[A-Za-z0-9._~!$&'()+,;=:/*-]*$/;

/**
 * What every endpoint pattern parse() accepts looks like: http(s), then none of the characters
 * it refuses anywhere. Not the check itself, which needs code; the chart's schema uses it to
 * refuse at `helm install` what the operator would refuse at start-up.
 */
export const ENDPOINT_PATTERN_SHAPE = /^https?:\/\/[^\s@%\\?#]+$/;

/** A value safe to quote in a status message: anything outside printable ASCII escaped. */
export function quoteForMessage(value: string): string {
  const shown = value.length > 200 ? `${value.slice(0, 200)}…` : value;
  return JSON.stringify(shown).replace(/[^\x20-\x7e]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function parse(raw: string, allowGlob: boolean): EndpointParse {
  if (/[^\x21-\x7e]/.test(raw)) {
    return { refused: 'it contains a space, a control or a non-ASCII character (write an international host name in punycode, xn--...)' };
  }
  if (raw.includes('\\')) return { refused: 'it contains a backslash, which URL parsers disagree about' };
  if (raw.includes('%')) return { refused: 'it contains a percent-escape; write every character plainly' };
  if (raw.includes('@')) return { refused: 'it contains "@" (userinfo such as user@host); put credentials in the Secret, not the URL' };
  if (raw.includes('?') || raw.includes('#')) return { refused: 'it has a query or fragment; give the API root only' };
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/]*)(\/.*)?$/.exec(raw);
  if (!match) return { refused: 'it is not an absolute URL of the form https://host[:port]/path' };
  const [, scheme, authority, rawPath = ''] = match as unknown as [string, string, string, string | undefined];
  if (scheme !== 'http' && scheme !== 'https') {
    return {
      refused:
        scheme.toLowerCase() === 'http' || scheme.toLowerCase() === 'https'
          ? 'its scheme is not in lower case'
          : `the scheme ${scheme} is not http or https`,
    };
  }
  const hostPort = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(authority);
  const host = hostPort?.[1] ?? '';
  const port = hostPort?.[2];
  if (host === '') return { refused: 'it names no host' };
  if (allowGlob && host.includes('*')) return { refused: 'a host cannot be a wildcard: list each endpoint host exactly' };
  if (host !== host.toLowerCase()) return { refused: 'its host has upper-case letters; write it in lower case' };
  if (!IPV6.test(host)) {
    if (host.endsWith('.')) return { refused: 'its host ends with a dot' };
    if (!host.split('.').every((label) => DNS_LABEL.test(label))) return { refused: `its host ${host} is not a DNS name or an IP address` };
  }
  if (port !== undefined) {
    if (allowGlob && port.includes('*')) return { refused: 'a port cannot be a wildcard: list each endpoint port exactly' };
    if (!/^[1-9][0-9]{0,4}$/.test(port) || Number(port) > 65535)
      return { refused: `its port ${port} is not a number from 1 to 65535 without leading zeros` };
    if (port === DEFAULT_PORTS[scheme]) return { refused: `it writes out the default port ${port} of ${scheme}; leave it out` };
  }
  // A pattern's `;` is the admin's own; with none in a run's URL it matches nothing.
  if (!allowGlob && rawPath.includes(';')) {
    return {
      refused:
        'its path has a ";", which servers such as Tomcat read as a path parameter and drop, so "..;" climbs out of the allowed path',
    };
  }
  if (!(allowGlob ? PATTERN_PATH_CHARACTERS : PATH_CHARACTERS).test(rawPath)) {
    return {
      refused: allowGlob
        ? 'its path has characters other than letters, digits, "/", "*" and -._~!$&\'()+,;=:'
        : 'its path has characters other than letters, digits, "/" and -._~!$&\'()+,=:',
    };
  }
  const path = rawPath.endsWith('/') ? rawPath.slice(0, -1) : rawPath;
  const segments = path === '' ? [] : path.slice(1).split('/');
  if (segments.some((segment) => segment === '.' || segment === '..')) return { refused: 'its path has a "." or ".." segment' };
  if (segments.some((segment) => segment === '')) return { refused: 'its path has an empty segment ("//")' };
  // The last word: what fetch will parse must serialise to exactly this string, or the
  // checked host is not necessarily the contacted one (127.1, 0x7f.0.0.1, [0::1]...). A
  // pattern's `*` passes through WHATWG unchanged, so patterns get the same test.
  let href: string;
  try {
    href = new URL(raw).href;
  } catch {
    return { refused: 'it is not a valid URL' };
  }
  if (href !== raw && href !== `${raw}/`)
    return { refused: `it is not in canonical form (a URL parser reads it as ${quoteForMessage(href)})` };
  return { endpoint: { scheme, host, port: port ?? '', path } };
}

/** A run's baseURL, canonical or refused with the reason. */
export function parseEndpointUrl(raw: string): EndpointParse {
  return parse(raw, false);
}

/** An allowModelEndpoints pattern: a canonical URL whose path may use `*` (one segment) and `**` (any). */
export function parseEndpointPattern(pattern: string): EndpointParse {
  return parse(pattern, true);
}

/** The path glob as a prefix match on whole segments: `/v1` allows `/v1` and `/v1/...`, not `/v1x`. */
function pathMatcher(patternPath: string): RegExp {
  let source = '';
  for (let i = 0; i < patternPath.length; i++) {
    const char = patternPath[i]!;
    if (char === '*' && patternPath[i + 1] === '*') {
      source += '.*';
      i++;
    } else if (char === '*') {
      source += '[^/]*';
    } else {
      source += char.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}(?:/.*)?$`);
}

export function endpointMatches(endpoint: CanonicalEndpoint, pattern: CanonicalEndpoint): boolean {
  return (
    endpoint.scheme === pattern.scheme &&
    endpoint.host === pattern.host &&
    endpoint.port === pattern.port &&
    pathMatcher(pattern.path).test(endpoint.path)
  );
}

/** What the operator config must hold for this check. */
export interface ModelEndpointConfig {
  readonly allowModelEndpoints: readonly string[];
}

/**
 * Called at admission (validate-run) and again right before a model is built for a call, so
 * an endpoint an admin has since removed is not called either.
 */
export function isModelEndpointAllowed(
  model: { provider: string; baseURL?: string | undefined },
  config: ModelEndpointConfig,
): ModelEndpointDecision {
  const declaration = findProviderDeclaration(model.provider);
  if (model.baseURL === undefined) {
    // The vendor endpoint the operator's registry names (or none for the scripted model).
    if (declaration?.requiresBaseURL) return { allowed: false, message: `spec.model.baseURL is required with provider ${model.provider}` };
    return { allowed: true };
  }
  const shown = quoteForMessage(model.baseURL);
  const parsed = parseEndpointUrl(model.baseURL);
  if ('refused' in parsed) {
    return {
      allowed: false,
      message: `spec.model.baseURL ${shown} is refused because ${parsed.refused}; write it in canonical form, such as https://llm.internal/v1`,
    };
  }
  if (config.allowModelEndpoints.length === 0) {
    return {
      allowed: false,
      message:
        `spec.model.baseURL ${shown} is refused: no model endpoint is allowed yet; an admin must add it (or a pattern such as ` +
        "https://llm.internal/v1) to the operator's allowModelEndpoints, or use a provider with a fixed endpoint such as openai",
    };
  }
  const matches = config.allowModelEndpoints.some((pattern) => {
    const parsedPattern = parseEndpointPattern(pattern);
    return 'endpoint' in parsedPattern && endpointMatches(parsed.endpoint, parsedPattern.endpoint);
  });
  if (!matches) {
    return {
      allowed: false,
      message:
        `spec.model.baseURL ${shown} matches none of the operator's allowModelEndpoints (${config.allowModelEndpoints.join(', ')}); ` +
        'ask an admin to allow it or use an allowed endpoint',
    };
  }
  return { allowed: true };
}
