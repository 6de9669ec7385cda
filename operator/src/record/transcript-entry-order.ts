// The order a reader shows a run's transcript in, from the entries' keys alone (no wire-format
// change). Keys sorted as text put a step's publish answer (`-c000000`) first and its end
// (`-end`) before its checks (`-v…`), and a call number past 999999 before the ones under it,
// so a run that verified, had publishing approved, then failed read: approval, end, checks.
// Pure.

/** Within a step, what happened first comes first: the step, the answers to its calls, a cut, the checks, publishing, the end. */
const RANK = { step: 0, resume: 1, cut: 2, verify: 3, publish: 4, end: 5 } as const;

interface KeyOrder {
  step: string;
  rank: number;
  /** A resume's call number or a check's attempt, as decimal digits. */
  number: string;
}

const KEY = /^s(\d+)(?:-c(\d+)|-v(\d+)|-(end)|-(cut))?$/;

/** Decimal digits without leading zeros (a call number may pass what a number holds exactly). */
const digits = (value: string) => value.replace(/^0+(?=\d)/, '');

function orderOf(key: string): KeyOrder {
  const [, step = '', call, attempt, end, cut] = KEY.exec(key) ?? [];
  // The publish answer is keyed as call 0 (publish-job.ts): no call's approval has it.
  const rank =
    call !== undefined
      ? digits(call) === '0'
        ? RANK.publish
        : RANK.resume
      : attempt !== undefined
        ? RANK.verify
        : end
          ? RANK.end
          : cut
            ? RANK.cut
            : RANK.step;
  return { step: digits(step), rank, number: digits(call ?? attempt ?? '0') };
}

/** Two runs of decimal digits compared as the numbers they spell, however long. */
const compareDigits = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

/** Orders transcript keys (ENTRY_KEY_PATTERN) by step, then by RANK, then by call number or attempt. */
export function compareEntryKeys(a: string, b: string): number {
  const x = orderOf(a);
  const y = orderOf(b);
  return compareDigits(x.step, y.step) || x.rank - y.rank || compareDigits(x.number, y.number) || (a < b ? -1 : a > b ? 1 : 0);
}
