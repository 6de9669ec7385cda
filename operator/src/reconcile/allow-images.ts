// Security #11.10: which container images a run may start its sandbox from. Pure.
//
// A node keeps every image it has pulled, and with imagePullPolicy IfNotPresent the kubelet
// starts a cached image without asking the registry whether this pod may have it. A run that
// names another tenant's private image could then start it and copy its files out through
// the diff. So a run gets the operator's sandbox image, or an image an admin listed in
// allowImages (and those are pulled with imagePullPolicy Always, see sandbox-pod.ts, so the
// kubelet checks the pull credentials of the run's namespace every time).

export type ImageDecision = { allowed: true } | { allowed: false; message: string };

export interface ImageConfig {
  readonly sandboxImage: string;
  readonly allowImages: readonly string[];
}

// The image reference grammar of distribution/reference, without the IPv6 domain form:
// [domain[:port]/]path-component(/path-component)*[:tag][@digest]. Anything else is not an
// image the kubelet would pull, and a look-alike that only a lenient parser accepts must not
// slip past a glob.
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*(?::[0-9]+)?`;
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const TAG = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(`^(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::${TAG})?(?:@${DIGEST})?$`);

export function isImageReference(image: string): boolean {
  return image.length <= 1024 && REFERENCE.test(image);
}

/** Glob → RegExp: `*` stays within one path segment, `**` crosses segments. Everything else is literal. */
function imageGlob(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i]!;
    if (char === '*' && pattern[i + 1] === '*') {
      source += '.*';
      i++;
    } else if (char === '*') {
      source += '[^/]*';
    } else {
      source += char.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}

/** Image patterns are matched against the reference exactly as the run writes it (python:3.12 is not docker.io/library/python:3.12). */
export function isImageAllowed(image: string | undefined, config: ImageConfig): ImageDecision {
  if (image === undefined || image === config.sandboxImage) return { allowed: true };
  const shown = JSON.stringify(image.length > 200 ? `${image.slice(0, 200)}…` : image).replace(/[^\x20-\x7e]/g, '?');
  if (!isImageReference(image)) {
    return {
      allowed: false,
      message: `spec.sandbox.image ${shown} is not an image reference such as registry.example/team/image:tag; fix it or leave it out for the operator's sandbox image`,
    };
  }
  if (config.allowImages.some((pattern) => imageGlob(pattern).test(image))) return { allowed: true };
  const others = config.allowImages.length === 0 ? '' : ` and images matching its allowImages (${config.allowImages.join(', ')})`;
  return {
    allowed: false,
    message:
      `spec.sandbox.image ${shown} is not allowed: the operator runs only its sandbox image ${config.sandboxImage}${others}; ` +
      'leave spec.sandbox.image out, use an allowed image, or ask an admin to add it to allowImages',
  };
}
