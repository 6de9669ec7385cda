// The images build-image.sh wrote (`make sandbox-image`, `make real-node` for the pause image):
// each has ~/.cache/chamvi-operator/images/chamvi-NAME.env naming its OCI archive and reference.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { RealNodeUnavailable } from './real-node.ts';

export const imageDir = () =>
  process.env.CHAMVI_IMAGE_DIR ?? join(process.env.CHAMVI_CACHE ?? join(homedir(), '.cache/chamvi-operator'), 'images');

/** ARCHIVE= and REF= of an image build-image.sh wrote; RealNodeUnavailable saying which `make` when it is missing. */
export function builtImage(name: string, make: string): { archive: string; ref: string } {
  const envFile = join(imageDir(), `chamvi-${name}.env`);
  if (!existsSync(envFile)) throw new RealNodeUnavailable(`no ${envFile}: run \`${make}\` first`);
  const values = Object.fromEntries(
    readFileSync(envFile, 'utf8')
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  if (!values.ARCHIVE || !existsSync(values.ARCHIVE)) throw new RealNodeUnavailable(`${envFile} names a missing archive: run \`${make}\``);
  return { archive: values.ARCHIVE, ref: values.REF! };
}
