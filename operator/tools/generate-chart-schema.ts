// `make chart-schema`: regenerates the config part of the chart's values.schema.json from the
// zod config schema (operator/src/config/chart-values-schema.ts). Never edit that part by hand.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderChartValuesSchema } from '../src/config/chart-values-schema.ts';

const target = fileURLToPath(new URL('../../charts/chamvi-operator/values.schema.json', import.meta.url));
writeFileSync(target, renderChartValuesSchema(readFileSync(target, 'utf8')));
console.log(`wrote ${target}`);
