// The adapter for a forge kind: the one place that maps a kind to its class.
import type { Forge, ForgeOptions } from './forge.ts';
import type { ForgeKind } from './forge-kinds.ts';
import { GiteaForge } from './gitea-forge.ts';
import { GitHubForge } from './github-forge.ts';
import { GitLabForge } from './gitlab-forge.ts';

export function createForge(kind: ForgeKind, options: ForgeOptions): Forge {
  switch (kind) {
    case 'github':
      return new GitHubForge(options);
    case 'gitlab':
      return new GitLabForge(options);
    case 'gitea':
      return new GiteaForge(options);
  }
}
