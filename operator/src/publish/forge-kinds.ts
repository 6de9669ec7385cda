// The forge APIs the operator speaks to open pull requests, and the grammar of the host
// patterns that say which one a repository host speaks (operator config publish.forges).
export const FORGE_KINDS = ['github', 'gitlab', 'gitea'] as const;
export type ForgeKind = (typeof FORGE_KINDS)[number];

/** A host name, or *.domain, optionally with :port (lower case, as canonical repository URLs are). */
export const FORGE_HOST_PATTERN = /^(?:\*\.)?[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?(?::[0-9]{1,5})?$/;
