// Image references as the kubelet's runtime reads them (distribution/reference
// ParseNormalizedNamed), to tell whether an admitted pod's image names the image the operator
// built it with. Admission webhooks spell references their own way: the sigstore
// policy-controller writes `index.docker.io/library/ubuntu@sha256:...` for `ubuntu:22.04` (the
// tag dropped once the digest is there), Kyverno `docker.io/acme/builder:2@sha256:...` for
// `acme/builder:2` and `img:latest@sha256:...` for an untagged `img`. Pure.
import { isImageReference } from './allow-images.ts';

/** A reference with the registry and the tag spelled out as the runtime pulls it. */
export interface NormalizedImage {
  /** Registry and path: docker.io/library/ubuntu, registry.example:5000/team/image. */
  repository: string;
  /** The tag; `latest` for a reference with neither tag nor digest; absent beside a digest that came without one. */
  tag?: string;
  digest?: string;
}

const DEFAULT_DOMAIN = 'docker.io';
/** Docker Hub's older name: the same registry. */
const LEGACY_DEFAULT_DOMAIN = 'index.docker.io';
/** Docker Hub's namespace for a single-component name (ubuntu is docker.io/library/ubuntu). */
const OFFICIAL_REPOSITORY_PREFIX = 'library/';

/** The reference normalized; undefined for a string that is not an image reference (allow-images.ts). */
export function normalizeImage(image: string): NormalizedImage | undefined {
  if (!isImageReference(image)) return undefined;
  const at = image.indexOf('@');
  const digest = at >= 0 ? image.slice(at + 1) : undefined;
  let name = at >= 0 ? image.slice(0, at) : image;
  const colon = name.lastIndexOf(':');
  const tag = colon > name.lastIndexOf('/') ? name.slice(colon + 1) : undefined;
  if (tag !== undefined) name = name.slice(0, colon);
  // The first component is a registry only when it looks like a host (distribution's splitDockerDomain).
  const slash = name.indexOf('/');
  const first = slash < 0 ? '' : name.slice(0, slash);
  const isDomain = slash >= 0 && (/[.:]/.test(first) || first === 'localhost' || first !== first.toLowerCase());
  let domain = isDomain ? first : DEFAULT_DOMAIN;
  let path = isDomain ? name.slice(slash + 1) : name;
  if (domain === LEGACY_DEFAULT_DOMAIN) domain = DEFAULT_DOMAIN;
  if (domain === DEFAULT_DOMAIN && !path.includes('/')) path = `${OFFICIAL_REPOSITORY_PREFIX}${path}`;
  return {
    repository: `${domain}/${path}`,
    ...(tag !== undefined ? { tag } : digest === undefined ? { tag: 'latest' } : {}),
    ...(digest !== undefined ? { digest } : {}),
  };
}

/** The digest a verifying webhook pins (the one the runtimes resolve tags to). */
const ADDED_DIGEST = /^sha256:[0-9a-f]{64}$/;

/**
 * How `admitted` names the `built` image: the same reference however spelled ('same'), the
 * built tag pinned to a digest ('pinned': the tag may be dropped, as the policy-controller
 * does), or another image (undefined). A pinned reference is the built image only if the digest
 * was added at admission, when the tag resolved to it; added later, it may be any build of the
 * repository. The caller knows which.
 */
export function admittedForm(admitted: string, built: string): 'same' | 'pinned' | undefined {
  const was = normalizeImage(built);
  const now = normalizeImage(admitted);
  if (!was || !now || was.repository !== now.repository) return undefined;
  // A built image with a digest names one image: only that digest, and its own tag if both keep one.
  if (was.digest !== undefined) {
    const sameTag = was.tag === undefined || now.tag === undefined || was.tag === now.tag;
    return now.digest === was.digest && sameTag ? 'same' : undefined;
  }
  if (now.digest === undefined) return now.tag === was.tag ? 'same' : undefined;
  const tagKept = now.tag === undefined || now.tag === was.tag;
  return tagKept && ADDED_DIGEST.test(now.digest) ? 'pinned' : undefined;
}

/** The repository of a reference, normalized; the reference itself when it is not one. */
export function imageRepository(image: string): string {
  return normalizeImage(image)?.repository ?? image;
}
