// The digest of an image from its OCI image layout (a directory with oci-layout, index.json
// and blobs/), as daemonless builders write it (buildah push oci:DIR, skopeo copy, umoci).
// The release pins the chart to it only after checking that the blob it names is there and
// hashes to it: a digest the chart carries is one of a real image.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const REF_NAME = 'org.opencontainers.image.ref.name';

interface Descriptor {
  mediaType?: string;
  digest?: string;
  annotations?: Record<string, string>;
}

/** The image's digest in the layout at `dir`; `tag` picks one when the index lists several. */
export function ociLayoutDigest(dir: string, tag?: string): string {
  const indexPath = path.join(dir, 'index.json');
  if (!existsSync(path.join(dir, 'oci-layout')) || !existsSync(indexPath))
    throw new Error(`${dir} is not an OCI image layout (no oci-layout or index.json)`);
  const index = JSON.parse(readFileSync(indexPath, 'utf8')) as { schemaVersion?: number; manifests?: Descriptor[] };
  if (index.schemaVersion !== 2 || !Array.isArray(index.manifests))
    throw new Error(`${indexPath}: not an OCI index (schemaVersion 2 with manifests)`);
  let chosen = index.manifests;
  if (chosen.length > 1 && tag) chosen = chosen.filter((descriptor) => descriptor.annotations?.[REF_NAME] === tag);
  if (chosen.length !== 1) {
    throw new Error(
      `${indexPath} lists ${chosen.length} images${tag ? ` tagged ${tag}` : ''}; the release needs exactly one (name it with the ${REF_NAME} annotation)`,
    );
  }
  const digest = chosen[0]!.digest ?? '';
  if (!DIGEST.test(digest)) throw new Error(`${indexPath}: "${digest}" is not a sha256 digest`);
  const blob = path.join(dir, 'blobs', 'sha256', digest.slice('sha256:'.length));
  if (!existsSync(blob)) throw new Error(`${dir}: the manifest ${digest} named by index.json is not in blobs/`);
  const actual = `sha256:${createHash('sha256').update(readFileSync(blob)).digest('hex')}`;
  if (actual !== digest) throw new Error(`${blob} hashes to ${actual}, not ${digest}: the layout is corrupt`);
  return digest;
}
