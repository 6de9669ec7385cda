// docs/operations.md says every value of the chart is documented in its values.yaml. A key the
// schema accepts but values.yaml never names (as a value or as a commented example) is one an
// admin can only find in the schema or the source: this keeps the two together.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { chartConfigSchema } from '../../operator/src/config/chart-values-schema.ts';

const chartDir = new URL('../../charts/chamvi-operator/', import.meta.url);
const valuesYaml = readFileSync(new URL('values.yaml', chartDir), 'utf8');
const schema = JSON.parse(readFileSync(new URL('values.schema.json', chartDir), 'utf8')) as { properties: Record<string, unknown> };

/** Does values.yaml name `key` at `indent` spaces, as a value (`key:`) or commented out (`# key:`)? */
function names(key: string, indent: number): boolean {
  const escaped = key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^ {${indent}}(?:# ?)?${escaped}:`, 'm').test(valuesYaml);
}

describe("the chart's values.yaml", () => {
  it('names every config key the chart takes', () => {
    const keys = Object.keys((chartConfigSchema() as { properties: Record<string, unknown> }).properties);
    expect(keys).toContain('allowEgress');
    expect(keys.filter((key) => !names(key, 2))).toEqual([]);
  });

  it('names every top-level value of the schema', () => {
    // `global` is Helm's own, for subcharts.
    const keys = Object.keys(schema.properties).filter((key) => key !== 'global');
    expect(keys).toContain('egressProxy');
    expect(keys.filter((key) => !names(key, 0))).toEqual([]);
  });
});
