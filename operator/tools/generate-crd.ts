// `make crds`: writes the generated CodingRun CRD to crds/ and its reference to docs/. Never edit either by hand.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderApiReference } from '../src/api/api-reference.ts';
import { renderCodingEvalCrdYaml, renderCrdYaml } from '../src/api/crd-yaml.ts';

const target = fileURLToPath(new URL('../../crds/chamvi.dev_codingruns.yaml', import.meta.url));
writeFileSync(target, renderCrdYaml());
console.log(`wrote ${target}`);
const evalTarget = fileURLToPath(new URL('../../crds/chamvi.dev_codingevals.yaml', import.meta.url));
writeFileSync(evalTarget, renderCodingEvalCrdYaml());
console.log(`wrote ${evalTarget}`);
const reference = fileURLToPath(new URL('../../docs/api-reference.md', import.meta.url));
writeFileSync(reference, renderApiReference());
console.log(`wrote ${reference}`);
