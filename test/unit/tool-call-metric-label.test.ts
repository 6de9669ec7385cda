// The `tool` label of chamvi_tool_calls_total and chamvi_tool_duration_seconds: the model
// writes a tool call's name, so only the toolbox's own names are label values; any other
// name ('mcp.<anything>' from a provider, a made-up one) is 'unknown', one series, not one a name.
import { describe, expect, it } from 'vitest';
import { TOOL_NAMES } from '../../operator/src/api/index.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { toolCallObserver, toolLabel } from '../../operator/src/workers/run-metrics.ts';

describe('toolLabel', () => {
  it.each(TOOL_NAMES.map((name) => [name]))('labels the toolbox tool %s by its name', (name) => {
    expect(toolLabel(name)).toBe(name);
  });

  it.each([['mcp.x'], ['mcp.bash'], ['web_search'], ['__proto__'], ['constructor'], ['Bash'], ['']])('labels %j unknown', (name) => {
    expect(toolLabel(name)).toBe('unknown');
  });
});

describe('toolCallObserver', () => {
  it('counts calls of a thousand made-up names under one unknown series, and known tools by name', async () => {
    const metrics = new OperatorMetrics({ defaultMetrics: false });
    const observe = toolCallObserver({ metrics });
    for (let index = 0; index < 1_000; index += 1) observe(`mcp.tool-${index}`, 'error', 0.01);
    observe('bash', 'ok', 0.5);
    const counted = (await metrics.toolCalls.get()).values.map((each) => [each.labels.tool, each.labels.outcome, each.value]);
    expect(counted).toEqual([
      ['unknown', 'error', 1_000],
      ['bash', 'ok', 1],
    ]);
    const timed = new Set((await metrics.toolDuration.get()).values.map((each) => each.labels.tool));
    expect(timed).toEqual(new Set(['unknown', 'bash']));
  });
});
