// When the controller takes a started run as still moving without looking (workers/agent-sightings.ts).
// The whole path, with Redis, is test/toolbox/agent-inspector.test.ts.
import { describe, expect, it } from 'vitest';
import { AgentSightings, SIGHTING_MS } from '../../operator/src/workers/agent-sightings.ts';
import { AGENT_RECHECK_MS } from '../../operator/src/reconcile/decide.ts';

const moving = { state: 'stepping', moving: true } as const;
const stopped = { state: 'stepping', moving: false } as const;

function clocked() {
  const clock = { now: 0 };
  return { clock, sightings: new AgentSightings(() => clock.now) };
}

describe('AgentSightings', () => {
  it('keeps a run seen moving for the window, and not a millisecond longer', () => {
    const { clock, sightings } = clocked();
    sightings.note('a', moving);
    clock.now = SIGHTING_MS - 1;
    expect(sightings.recent('a')).toEqual(moving);
    clock.now = SIGHTING_MS;
    expect(sightings.recent('a')).toBeUndefined();
  });

  it.each([
    ['a look that found it not moving', stopped],
    ['a look that could not tell (Redis unreachable)', undefined],
  ])('forgets a run at %s', (_, view) => {
    const { sightings } = clocked();
    sightings.note('a', moving);
    sightings.note('a', view);
    expect(sightings.recent('a')).toBeUndefined();
  });

  it('never remembers a run it did not see moving', () => {
    const { sightings } = clocked();
    sightings.note('a', stopped);
    expect(sightings.recent('a')).toBeUndefined();
    expect(sightings.size).toBe(0);
  });

  it('starts the window again at each sighting, and keeps one entry per run', () => {
    const { clock, sightings } = clocked();
    sightings.note('a', moving);
    clock.now = SIGHTING_MS - 1;
    sightings.note('a', moving);
    clock.now = 2 * SIGHTING_MS - 2;
    expect(sightings.recent('a')).toEqual(moving);
    expect(sightings.size).toBe(1);
  });

  it('drops expired sightings as new ones come, so it holds only the runs seen within the window', () => {
    const { clock, sightings } = clocked();
    for (let run = 0; run < 1000; run++) sightings.note(`old-${run}`, moving);
    clock.now = SIGHTING_MS / 2;
    sightings.note('middle', moving);
    clock.now = SIGHTING_MS;
    sightings.note('new', moving);
    expect(sightings.size).toBe(2);
    expect(sightings.recent('old-0')).toBeUndefined();
    expect(sightings.recent('middle')).toEqual(moving);
  });

  it('is far shorter than the recheck, so a loss is still seen within about AGENT_RECHECK_MS', () => {
    expect(SIGHTING_MS * 10).toBeLessThanOrEqual(AGENT_RECHECK_MS);
  });
});
