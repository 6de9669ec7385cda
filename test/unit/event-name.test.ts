// An Event's name (kube/event-name.ts) is a DNS subdomain whatever the name of the object it is
// about: a run's name may be 253 characters, and a cut of it ending in '-' or '.' made a name
// that is none (the core/v1 API takes it today; events.k8s.io/v1 refuses it).
import { describe, expect, it } from 'vitest';
import { eventName } from '../../operator/src/kube/event-name.ts';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const isDnsSubdomain = (name: string) => name.length <= 253 && DNS_SUBDOMAIN.test(name);
const TIME = new Date('2026-11-30T09:00:00Z');

describe('eventName', () => {
  it.each([
    ["a '-' where the name is cut", `${'a'.repeat(199)}-${'b'.repeat(53)}`],
    ["a '.' where the name is cut", `${'a'.repeat(199)}.${'b'.repeat(53)}`],
    ["'---' ending the cut", `${'a'.repeat(197)}---${'b'.repeat(53)}`],
    ['a name of 253 characters', 'c'.repeat(253)],
    ['a short name', 'fix'],
  ])('is a DNS subdomain for a run name with %s', (_, name) => {
    expect(isDnsSubdomain(name)).toBe(true);
    const event = eventName(name, TIME);
    expect(isDnsSubdomain(event), event).toBe(true);
  });

  it("keeps the run's name, cut, as its prefix, then the time and the nonce", () => {
    expect(eventName('fix', TIME, 'abcdef')).toBe(`fix.${TIME.getTime().toString(16)}abcdef`);
    expect(eventName(`${'a'.repeat(199)}-${'b'.repeat(53)}`, TIME, 'abcdef')).toBe(
      `${'a'.repeat(199)}.${TIME.getTime().toString(16)}abcdef`,
    );
  });

  it('never begins with the separator, even for a name that leaves nothing once cut', () => {
    for (const name of ['', '-', '.-.']) expect(isDnsSubdomain(eventName(name, TIME))).toBe(true);
  });

  it('differs for two Events of one run in one millisecond', () => {
    expect(eventName('fix', TIME)).not.toBe(eventName('fix', TIME));
  });
});
