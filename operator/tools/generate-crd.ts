// `make crds`: writes the generated CRDs to crds/ and the CodingRun reference to docs/. Never edit either by hand.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderApiReference } from '../src/api/api-reference.ts';
import { renderAllCrdYaml } from '../src/api/crd-yaml.ts';

for (const [file, text] of Object.entries(renderAllCrdYaml())) {
  const target = fileURLToPath(new URL(`../../crds/${file}`, import.meta.url));
  writeFileSync(target, text);
  console.log(`wrote ${target}`);
}
const reference = fileURLToPath(new URL('../../docs/api-reference.md', import.meta.url));
writeFileSync(reference, renderApiReference());
console.log(`wrote ${reference}`);
