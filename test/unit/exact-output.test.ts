// Which commands keep their bytes through a redirect (data) and which are escaped wherever
// they go (text for a person): cli/exact-output.ts.
import { describe, expect, it } from 'vitest';
import { exactTextHint, personView, printsExactBytes } from '../../operator/src/cli/exact-output.ts';
import { parseArguments } from '../../operator/src/cli/parse-arguments.ts';

describe('printsExactBytes', () => {
  it.each([
    [['diff', 'r'], true],
    [['get', 'r', '--input'], true],
    [['logs', 'r', '-o', 'json'], true],
    [['eval', 'report', 'e', '-o', 'json'], true],
    [['get'], false],
    [['get', 'r'], false],
    [['get', '-w'], false],
    [['logs', 'r'], false],
    [['eval', 'report', 'e'], false],
    [['approve', 'r'], false],
    [['cancel', 'r'], false],
  ])('%j: %s', (argv, exact) => {
    expect(printsExactBytes(parseArguments(argv))).toBe(exact);
  });

  it('points a person at the exact text where a redirect would not give it', () => {
    expect(exactTextHint(parseArguments(['diff', 'r']))).toContain('redirect stdout');
    expect(exactTextHint(parseArguments(['get', 'r']))).toContain('-o yaml');
  });
});

describe('personView', () => {
  it.each([
    [['get', 'r', '--input'], { mode: 'code', countBlankRuns: true }],
    [['get', 'r'], { mode: 'code' }],
    [['approve', 'r'], { mode: 'code' }],
    [['diff', 'r'], { mode: 'code' }],
    [['logs', 'r'], { mode: 'lines' }],
    [['cancel', 'r'], { mode: 'lines' }],
  ])('%j: shown to a person as %j (an input or a diff is code; get --input counts blank runs as approve does)', (argv, view) => {
    expect(personView(parseArguments(argv))).toEqual(view);
  });
});
