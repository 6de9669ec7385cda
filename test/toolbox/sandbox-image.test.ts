// What can be checked of the sandbox image without a Docker engine: it ships the bundle `make
// toolbox` writes (the same bundling script, the same bundle name), where the defaults expect
// it, as a non-root user, and the bundle runs with the image's environment.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { dockerfileInstructions } from '../support/dockerfile.ts';
import { makeWorkspace, runToolbox, TOOLBOX } from './toolbox-fixture.ts';

const dockerfile = readFileSync(fileURLToPath(new URL('../../sandbox-image/Dockerfile', import.meta.url)), 'utf8');
const instruction = (name: string) => dockerfileInstructions(dockerfile, name);

describe('sandbox image', () => {
  it('bundles the toolbox as make toolbox does and copies it to /opt/chamvi/toolbox.mjs', () => {
    expect(existsSync(TOOLBOX)).toBe(true);
    expect(readFileSync(fileURLToPath(new URL('../../mk/toolbox.mk', import.meta.url)), 'utf8')).toMatch(
      /npx tsx operator\/tools\/bundle\.ts toolbox \$@/,
    );
    expect(instruction('RUN')).toContain('RUN npx tsx operator/tools/bundle.ts toolbox dist/toolbox.mjs');
    expect(instruction('COPY').filter((line) => line.includes('/opt/chamvi/'))).toEqual([
      expect.stringMatching(/^COPY --from=build .* \/src\/dist\/toolbox\.mjs \/opt\/chamvi\/toolbox\.mjs$/),
    ]);
  });

  it('runs as uid 1000 on a Node 24 base with git and ripgrep', () => {
    expect(instruction('FROM')).toEqual([
      expect.stringMatching(/^FROM node:24-[a-z]+-slim AS build$/),
      expect.stringMatching(/^FROM node:24-[a-z]+-slim$/),
    ]);
    expect(instruction('USER')).toEqual(['USER 1000:1000']);
    expect(dockerfile).toMatch(/apt-get install[^\n]*\bgit\b[^\n]*\bripgrep\b/);
  });

  it('points the toolbox at /workspace and a writable home, which the bundle honours', async () => {
    expect(dockerfile).toMatch(/CHAMVI_WORKSPACE=\/workspace/);
    expect(dockerfile).toMatch(/CHAMVI_HOME=\/home\/node\/\.chamvi/);
    expect(dockerfile).toMatch(/chown node:node \/workspace \/home\/node\/\.chamvi/);
    const workspace = makeWorkspace();
    try {
      workspace.write({ 'f.txt': 'image env\n' });
      const result = await runToolbox(['call'], '{"tool":"bash","input":{"command":"cat f.txt"}}\n', {
        env: { ...process.env, CHAMVI_WORKSPACE: workspace.root, CHAMVI_HOME: workspace.home },
      });
      expect(JSON.parse(result.stdout)).toMatchObject({
        ok: true,
        result: { stdout: 'image env\n', stdoutLog: expect.stringContaining(workspace.home) },
      });
    } finally {
      workspace.cleanup();
    }
  });
});
