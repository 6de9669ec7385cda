// The README's table of reasons is what a user reads when a run fails: a reason the
// operator can write must be in it, so adding one without documenting it fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REASONS } from '../../operator/src/api/reasons.ts';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
// Condition reasons (Valid, Queued) are not run outcomes; Deleted is reserved and never written.
const notOutcomes = new Set(['Valid', 'Queued', 'Deleted']);

describe('README reasons table', () => {
  it.each(Object.values(REASONS).filter((reason) => !notOutcomes.has(reason)))('documents %s', (reason) => {
    expect(readme).toMatch(new RegExp(`^\\|[^\\n]*\`${reason}\``, 'm'));
  });
});
