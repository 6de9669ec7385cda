// Matching host names against egress patterns (api/egress-pattern.ts for the grammar). Pure.
//
//   registry.npmjs.org       that name only, on ports 80 and 443
//   *.pythonhosted.org       every name under pythonhosted.org (any depth), not the name itself
//   *                        every host name (the proxy still refuses private addresses)
//   proxy.golang.org:8443    that name on that port only
//
// A pattern without a port means the two web ports, not every port: a registry is reached on
// 443 (or 80), and "allow npmjs.org" should not quietly open its SSH or SMTP.
import { EGRESS_PATTERN, HOST_NAME } from '../api/egress-pattern.ts';

export const DEFAULT_PORTS: readonly number[] = [80, 443];

export interface HostPattern {
  /** The pattern as written. */
  readonly source: string;
  /** `any`: `*`; `suffix`: `*.name`; `exact`: a name. */
  readonly kind: 'any' | 'suffix' | 'exact';
  /** The name (without `*.`); empty for `any`. */
  readonly name: string;
  /** Ports the pattern opens. */
  readonly ports: readonly number[];
}

/** The parsed pattern, or undefined when it is not one (the schema refuses those first). */
export function parseHostPattern(source: string): HostPattern | undefined {
  if (!EGRESS_PATTERN.test(source)) return undefined;
  const colon = source.lastIndexOf(':');
  const host = colon >= 0 ? source.slice(0, colon) : source;
  const ports = colon >= 0 ? [Number(source.slice(colon + 1))] : DEFAULT_PORTS;
  if (host === '*') return { source, kind: 'any', name: '', ports };
  if (host.startsWith('*.')) return { source, kind: 'suffix', name: host.slice(2), ports };
  return { source, kind: 'exact', name: host, ports };
}

/**
 * The canonical form of a host name from a request: lower case, without a final dot. Undefined
 * when it is not a host name (an IP literal, a bracketed IPv6 address, a name with odd characters).
 */
export function canonicalHostName(host: string): string | undefined {
  const lower = host.toLowerCase();
  const name = lower.endsWith('.') ? lower.slice(0, -1) : lower;
  return name.length <= 253 && HOST_NAME.test(name) ? name : undefined;
}

function nameMatches(pattern: HostPattern, name: string): boolean {
  if (pattern.kind === 'any') return true;
  if (pattern.kind === 'exact') return name === pattern.name;
  return name.endsWith(`.${pattern.name}`);
}

/** Does the pattern open this (canonical) host name on this port? */
export function patternMatches(pattern: HostPattern, name: string, port: number): boolean {
  return nameMatches(pattern, name) && pattern.ports.includes(port);
}

/** The first pattern of the list that opens host:port, if any. */
export function firstMatch(patterns: readonly HostPattern[], name: string, port: number): HostPattern | undefined {
  return patterns.find((pattern) => patternMatches(pattern, name, port));
}

/** Does `outer` open everything `inner` opens (every name and every port)? */
export function patternCovers(outer: HostPattern, inner: HostPattern): boolean {
  if (!inner.ports.every((port) => outer.ports.includes(port))) return false;
  if (outer.kind === 'any') return true;
  if (inner.kind === 'any') return false;
  if (outer.kind === 'exact') return inner.kind === 'exact' && inner.name === outer.name;
  // outer is *.name: covers the names under it, *.name itself and *.deeper.name.
  return inner.name.endsWith(`.${outer.name}`) || (inner.kind === 'suffix' && inner.name === outer.name);
}

/** Parse a list that the schema already checked; a pattern that does not parse is dropped (and opens nothing). */
export function parseHostPatterns(sources: readonly string[]): HostPattern[] {
  return sources.flatMap((source) => {
    const pattern = parseHostPattern(source);
    return pattern ? [pattern] : [];
  });
}
