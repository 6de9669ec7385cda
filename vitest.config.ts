// Test tiers (see ../shared/design/TESTING.md). Each tier is a vitest project so
// `make test` can run them one after another and a failure names its tier.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // A guard against a hang, not a speed check (speed lives in `make bench`): some unit
          // tests run real git or a local HTTP server, and vitest's 5 s default failed them on a
          // loaded two-core CI machine (publish-job-stopped, forge-hostile-answers).
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'toolbox',
          include: ['test/toolbox/**/*.test.ts'],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/control-plane/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/control-plane/global-setup.ts'],
          testTimeout: 300_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
      {
        // Reliability tests of TESTING.md: the product broken on purpose (processes killed,
        // Redis and the API server restarted, hostile models and inputs). Their own control
        // plane, since some of them stop parts of it.
        test: {
          name: 'faults',
          include: ['test/faults/**/*.test.ts'],
          globalSetup: ['test/support/control-plane/global-setup.ts'],
          testTimeout: 300_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
      {
        // A real kubelet + containerd node beside kwok, NetworkPolicy enforced (docs/real-node.md).
        // The last tier of `make test`; `make test-real-node` builds what it needs and runs it alone.
        test: {
          name: 'real-node',
          include: ['test/real-node/**/*.test.ts'],
          globalSetup: ['test/support/real-node/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
