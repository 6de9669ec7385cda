// What `kubectl codingrun COMMAND --help` says must match what the plugin prints: the help of
// `get` named ">=" for a lower bound while the TOKENS column marks an estimate with "~".
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { formatTokens } from '../../operator/src/cli/format-runs.ts';
import { helpText } from '../../operator/src/cli/help-text.ts';

const runWithUsage = (complete: boolean) =>
  ({
    metadata: { name: 'r', namespace: 'team' },
    status: { usage: { inputTokens: 1000, outputTokens: 234, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 1234, complete } },
  }) as unknown as CodingRun;

describe('get --help', () => {
  it('names the marker TOKENS prints when some call reported no usage, as an estimate', () => {
    expect(formatTokens(runWithUsage(true))).toBe('1234');
    const marker = formatTokens(runWithUsage(false)).replace('1234', '');
    expect(marker).not.toBe('');
    expect(helpText('get')).toContain(`"${marker}" marks an estimate`);
  });
});
