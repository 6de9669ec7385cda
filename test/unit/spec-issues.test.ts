// How the issues zod finds with a schedule's spec (or the run spec it makes) read in a status
// condition: paths as a user would write them, map keys quoted and cut short, and the whole
// message bounded however many issues there are or however long a key is.
import { describe, expect, it } from 'vitest';
import { SPEC_ISSUES_MAX_CHARACTERS, specFieldPath, specIssuesMessage } from '../../operator/src/reconcile/spec-issues.ts';

describe('specFieldPath', () => {
  it('writes field names and list indexes bare, as before', () => {
    expect(specFieldPath(['sandbox', 'env', 3, 'value'])).toBe('spec.sandbox.env.3.value');
    expect(specFieldPath([])).toBe('spec');
  });

  it('quotes a map key that is not a plain name', () => {
    expect(specFieldPath(['runTemplate', 'metadata', 'labels', 'team.example.com/owner'])).toBe(
      'spec.runTemplate.metadata.labels["team.example.com/owner"]',
    );
    expect(specFieldPath(['labels', 'a"b'])).toBe('spec.labels["a\\"b"]');
  });

  it('quotes a key only its start, on one line, however long it is', () => {
    const path = specFieldPath(['runTemplate', 'metadata', 'labels', `${'k'.repeat(40_000)}\nforged line`]);
    expect(path.startsWith(`spec.runTemplate.metadata.labels["${'k'.repeat(100)}`)).toBe(true);
    expect(path.length).toBeLessThan(250);
    expect(path).not.toContain('\n');
    expect(path).not.toContain('forged line');
  });
});

describe('specIssuesMessage', () => {
  it('lists each issue after the lead', () => {
    expect(
      specIssuesMessage('spec.runTemplate.spec is not a valid CodingRun spec: ', [
        { path: ['task'], message: 'Required' },
        { path: ['budget', 'maxSteps'], message: 'Too big' },
      ]),
    ).toBe('spec.runTemplate.spec is not a valid CodingRun spec: spec.task: Required; spec.budget.maxSteps: Too big');
  });

  it('lists as many issues as fit and counts the rest', () => {
    const issues = Array.from({ length: 600 }, (_, index) => ({ path: ['labels', `team.example.com/label-${index}`], message: 'Too big' }));
    const message = specIssuesMessage('lead: ', issues);
    expect(message.length).toBeLessThanOrEqual(SPEC_ISSUES_MAX_CHARACTERS);
    expect(message).toMatch(/^lead: spec\.labels\["team\.example\.com\/label-0"\]: Too big; /);
    const shown = message.split('; ').length - 1;
    expect(message.endsWith(`; and ${600 - shown} more`)).toBe(true);
  });

  it('cuts a single issue too long to fit', () => {
    const message = specIssuesMessage('x'.repeat(SPEC_ISSUES_MAX_CHARACTERS), [
      { path: ['task'], message: 'Required' },
      { path: ['model'], message: 'Required' },
    ]);
    expect(message.length).toBeLessThanOrEqual(SPEC_ISSUES_MAX_CHARACTERS);
    expect(message).toMatch(/x…; and 1 more$/);
  });

  it('never ends a cut in half a surrogate pair', () => {
    const message = specIssuesMessage('\u{1F600}'.repeat(SPEC_ISSUES_MAX_CHARACTERS), [{ path: ['task'], message: 'Required' }]);
    expect(message.length).toBeLessThanOrEqual(SPEC_ISSUES_MAX_CHARACTERS);
    expect(message).toMatch(/\u{1F600}…$/u);
  });
});
