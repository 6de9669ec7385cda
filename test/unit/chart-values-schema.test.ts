// The config part of the chart's values.schema.json is generated from the zod config schema
// and committed; these tests keep it fresh and check that it carries what the chart relies on.
// test/integration/chart.test.ts runs helm against it.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CHART_OWNED_CONFIG_KEYS, chartConfigSchema, renderChartValuesSchema } from '../../operator/src/config/chart-values-schema.ts';
import { loadOperatorConfig, operatorConfigSchema } from '../../operator/src/config/operator-config.ts';

const committed = readFileSync(new URL('../../charts/chamvi-operator/values.schema.json', import.meta.url), 'utf8');

interface JsonSchema {
  properties: Record<string, JsonSchema & { pattern?: string; items?: { pattern?: string }; uniqueItems?: boolean; anyOf?: unknown[] }>;
  additionalProperties?: boolean;
  $schema?: string;
}

describe("the chart's values schema", () => {
  it('has the config part generated from operator-config.ts (run `make chart-schema` when this fails)', () => {
    expect(committed).toBe(renderChartValuesSchema(committed));
  });

  it('describes exactly the config keys the chart does not fill in itself, and refuses any other', () => {
    const config = chartConfigSchema() as unknown as JsonSchema;
    const expected = Object.keys(operatorConfigSchema.shape).filter((key) => !(CHART_OWNED_CONFIG_KEYS as readonly string[]).includes(key));
    expect(Object.keys(config.properties).sort()).toEqual(expected.sort());
    expect(config.additionalProperties).toBe(false);
    expect(config.properties.isolationProbe!.additionalProperties).toBe(false);
    // Nested inside values.schema.json, whose own $schema (draft-07) applies.
    expect(config.$schema).toBeUndefined();
  });

  it("gives helm the character checks the operator's pattern parsers make first", () => {
    const config = chartConfigSchema() as unknown as JsonSchema;
    const allowRepo = new RegExp(config.properties.allowRepo!.items!.pattern!);
    expect(allowRepo.test('https://github.com/acme/*')).toBe(true);
    expect(allowRepo.test('https://github.com/acme/ x')).toBe(false);
    const endpoints = new RegExp(config.properties.allowModelEndpoints!.items!.pattern!);
    expect(endpoints.test('https://llm.internal/v1/**')).toBe(true);
    expect(endpoints.test('https://key@llm.internal/v1')).toBe(false);
  });

  it('refuses a redis.url with a password (it is rendered into the ConfigMap) and points to urlSecretRef', () => {
    const url = (JSON.parse(committed) as { properties: { redis: { properties: { url: { pattern: string; description: string } } } } })
      .properties.redis.properties.url;
    const accepted = new RegExp(url.pattern);
    for (const refused of [
      'redis://:hunter2@redis:6379',
      'redis://default:hunter2@redis:6379/0',
      'rediss://:p%40ss@redis.example:6380',
      'redis://:pa/ss@redis:6379',
      'redis://u:p@ss@redis:6379',
      'redis://:secret?@redis:6379',
      'http://redis:6379',
    ]) {
      expect(accepted.test(refused), refused).toBe(false);
    }
    for (const taken of [
      '',
      'redis://redis:6379',
      'rediss://redis.example:6380/2',
      'redis://default@redis:6379',
      'redis://[fd00::5]:6379',
    ]) {
      expect(accepted.test(taken), taken).toBe(true);
    }
    expect(url.description).toContain('urlSecretRef');
  });

  it('gives helm, as JSON Schema keywords, the checks of one key the operator makes in code (helm asserts draft-07 formats)', () => {
    const config = chartConfigSchema() as unknown as JsonSchema;
    // What the operator refuses...
    expect(() => loadOperatorConfig({ watchNamespaces: ['team-a', 'team-a'] }, {})).toThrow(/more than once/);
    expect(() => loadOperatorConfig({ egressProxy: { address: '10.0.0' } }, {})).toThrow(/IP address/);
    // ...the schema refuses too: test/integration/chart.test.ts shows helm does.
    expect(config.properties.watchNamespaces!.uniqueItems).toBe(true);
    expect(config.properties.egressProxy!.properties.address!.anyOf).toEqual([{ format: 'ipv4' }, { format: 'ipv6' }]);
  });
});
