// The wall clock of an IANA time zone: which instants a wall-clock time names there. Most name
// one; a daylight-saving change makes the times it skips name none (the gap when the clocks go
// forward) and the times it repeats name two (the hour again when they go back). Offsets come
// from Intl (the zone data Node ships), to the second. Wall-clock times are written as the
// instant that shows them in UTC (Date.UTC of the year, month, day, hour and minute). Pure.

const SECOND = 1000;
const HOUR = 3_600_000;
/**
 * How far around a wall-clock time its instants are looked for. A zone's change moves its
 * clocks by two hours at most (Troll), and its changes are weeks apart: within this window
 * there is at most one, so the offsets at its two ends are the offsets before and after it.
 */
const WINDOW_MS = 4 * HOUR;

/** The instants one wall-clock time names in a zone. */
export type WallClockInstants =
  | { kind: 'once'; at: Date }
  /** The clocks went back over it: `first` is before the change, `second` after. */
  | { kind: 'twice'; first: Date; second: Date }
  /** The clocks went forward over it: `gapEnd` is the first instant after the gap (03:00 CEST for 02:30 in Berlin). */
  | { kind: 'skipped'; gapEnd: Date };

export interface ZoneWallClock {
  /** The zone's offset from UTC at an instant, in milliseconds (east of Greenwich positive). */
  offsetAt(instant: Date): number;
  instantsOf(wallClock: Date): WallClockInstants;
}

export function zoneWallClock(timeZone: string): ZoneWallClock {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  const offsetAt = (instant: number): number => {
    const parts = Object.fromEntries(format.formatToParts(new Date(instant)).map((part) => [part.type, part.value]));
    const shown = new Date(0);
    shown.setUTCFullYear(Number(parts.year), Number(parts.month) - 1, Number(parts.day));
    shown.setUTCHours(Number(parts.hour), Number(parts.minute), Number(parts.second));
    return shown.getTime() - Math.floor(instant / SECOND) * SECOND;
  };
  const wallClockAt = (instant: number) => instant + offsetAt(instant);

  return {
    offsetAt: (instant) => offsetAt(instant.getTime()),
    instantsOf(wallClock) {
      const wall = wallClock.getTime();
      const near = wall - offsetAt(wall);
      const before = offsetAt(near - WINDOW_MS);
      const after = offsetAt(near + WINDOW_MS);
      // No change within the window: the time names the one instant.
      if (before === after) return { kind: 'once', at: new Date(wall - before) };
      const instants = [before, after]
        .map((offset) => wall - offset)
        .filter((instant) => wallClockAt(instant) === wall)
        .sort((a, b) => a - b);
      if (instants.length === 1) return { kind: 'once', at: new Date(instants[0]!) };
      if (instants.length === 2) return { kind: 'twice', first: new Date(instants[0]!), second: new Date(instants[1]!) };
      return { kind: 'skipped', gapEnd: new Date(firstShowingAtLeast(wall, near - WINDOW_MS, near + WINDOW_MS, wallClockAt)) };
    },
  };
}

/**
 * The first instant, to the second, whose wall clock shows `wall` or later: the end of the gap
 * `wall` is in. Bisects between an instant that shows less (the window's start: at most two
 * hours' change within four) and one that shows more (its end).
 */
function firstShowingAtLeast(wall: number, from: number, to: number, wallClockAt: (instant: number) => number): number {
  let before = Math.floor(from / SECOND);
  let after = Math.ceil(to / SECOND);
  while (after - before > 1) {
    const middle = Math.floor((before + after) / 2);
    if (wallClockAt(middle * SECOND) >= wall) after = middle;
    else before = middle;
  }
  return after * SECOND;
}
