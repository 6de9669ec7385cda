// `make crds`: writes the generated CodingRun CRD to crds/. Never edit that file by hand.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderCrdYaml } from '../src/api/crd-yaml.ts';

const target = fileURLToPath(new URL('../../crds/chamvi.dev_codingruns.yaml', import.meta.url));
writeFileSync(target, renderCrdYaml());
console.log(`wrote ${target}`);
