// Issue #12: status.egress adds connections up, keeps at most EGRESS_HOSTS_MAX distinct hosts,
// and merging a delta adds to what another replica or an earlier process wrote.
import { describe, expect, it } from 'vitest';
import { EGRESS_HOSTS_MAX } from '../../operator/src/api/index.ts';
import { addConnection, emptyEgressStatus, mergeEgressStatus } from '../../operator/src/egress/egress-tally.ts';

const allowed = (host: string, sent = 10, received = 100) => ({ host, port: 443, allowed: true, bytesSent: sent, bytesReceived: received });
const denied = (host: string, rule = 'not-on-run-list') => ({ host, port: 443, allowed: false, rule, bytesSent: 0, bytesReceived: 0 });

describe('egress tally', () => {
  it('counts connections, decisions and bytes, per host with the last refusing rule', () => {
    let status = emptyEgressStatus();
    status = addConnection(status, allowed('registry.npmjs.org'));
    status = addConnection(status, allowed('registry.npmjs.org', 5, 7));
    status = addConnection(status, denied('evil.example'));
    status = addConnection(status, denied('evil.example', 'private-address'));
    expect(status).toEqual({
      connections: 4,
      allowed: 2,
      denied: 2,
      bytesSent: 15,
      bytesReceived: 107,
      hostsTruncated: false,
      hosts: [
        { host: 'registry.npmjs.org', port: 443, allowed: 2, denied: 0 },
        { host: 'evil.example', port: 443, allowed: 0, denied: 2, rule: 'private-address' },
      ],
    });
  });

  it('lists at most EGRESS_HOSTS_MAX hosts and says when it left some out, still counting them', () => {
    let status = emptyEgressStatus();
    for (let i = 0; i < EGRESS_HOSTS_MAX + 5; i++) status = addConnection(status, denied(`h${i}.example`));
    expect(status.hosts).toHaveLength(EGRESS_HOSTS_MAX);
    expect(status.hostsTruncated).toBe(true);
    expect(status.denied).toBe(EGRESS_HOSTS_MAX + 5);
  });

  it('merges a delta into what the status already holds, host by host', () => {
    const written = addConnection(addConnection(emptyEgressStatus(), allowed('a.example')), denied('b.example'));
    const delta = addConnection(addConnection(emptyEgressStatus(), allowed('a.example', 1, 2)), allowed('c.example', 3, 4));
    const merged = mergeEgressStatus(written, delta);
    expect(merged).toMatchObject({ connections: 4, allowed: 3, denied: 1, bytesSent: 14, bytesReceived: 106 });
    expect(merged.hosts.map((h) => [h.host, h.allowed, h.denied])).toEqual([
      ['a.example', 2, 0],
      ['b.example', 0, 1],
      ['c.example', 1, 0],
    ]);
    expect(mergeEgressStatus(undefined, delta)).toEqual(delta);
  });
});
