// The git token a run names (spec.repository.credentialsSecretRef, spec.publish.credentialsSecretRef),
// read from its Secret for each use, as the clone, the restore of protected paths and publishing
// read it, and checked before git or a forge sees it (token-shape.ts says why).
import { InvalidGitTokenError } from './errors/invalid-git-token-error.ts';
import type { RunResources } from './run-resources.ts';
import { isTokenShaped } from './token-shape.ts';

export interface GitTokenReference {
  name: string;
  key: string;
  /** The field that names it, for the refusal. */
  field: string;
}

/**
 * The token, without the whitespace around it (a Secret made from a file ends in a newline);
 * undefined when the Secret or its key is missing. Throws InvalidGitTokenError (InvalidSpec) when
 * the key holds anything but one token, and a RunFailure (SecretNotAllowed) when the Secret is
 * not offered to runs (run-resources.ts).
 */
export async function readGitToken(
  resources: Pick<RunResources, 'secretValue'>,
  namespace: string,
  reference: GitTokenReference,
): Promise<string | undefined> {
  const value = await resources.secretValue(namespace, reference.name, reference.key);
  if (value === undefined) return undefined;
  if (!isTokenShaped(value))
    throw new InvalidGitTokenError({ namespace, secret: reference.name, key: reference.key, field: reference.field });
  return value.trim();
}
