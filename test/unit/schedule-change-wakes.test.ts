// Which watch events of a CodingSchedule wake its reconcile (controller/schedule-controller.ts).
// The operator's own status writes come back as changes and are not news; a spec change is,
// and so is another object under the same name: one deleted and created again while the
// watch was down comes back at generation 1, as the one before it was.
import { describe, expect, it } from 'vitest';
import type { CodingSchedule } from '../../operator/src/api/coding-schedule.ts';
import { scheduleChangeWakes } from '../../operator/src/controller/schedule-controller.ts';

const schedule = (uid: string, generation: number, status: object = {}) =>
  ({ metadata: { name: 'nightly', namespace: 'team', uid, generation }, spec: {}, status }) as unknown as CodingSchedule;

describe('a change to a schedule', () => {
  it('wakes it when first seen, when its spec changes, and when it is another object of the same name', () => {
    expect(scheduleChangeWakes(undefined, schedule('u-1', 1))).toBe(true);
    expect(scheduleChangeWakes(schedule('u-1', 1), schedule('u-1', 2))).toBe(true);
    expect(scheduleChangeWakes(schedule('u-1', 1), schedule('u-2', 1))).toBe(true);
  });

  it('does not wake it for its own status write', () => {
    expect(scheduleChangeWakes(schedule('u-1', 1), schedule('u-1', 1, { activeCount: 1 }))).toBe(false);
  });
});
