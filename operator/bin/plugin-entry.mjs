// kubectl-codingrun's JavaScript, run by the launcher beside it (kubectl-codingrun, a shell
// script that first checks which node is on PATH: an extensionless file is no ES module to a
// Node.js older than 20.10, which refused it before any check in it ran). In a checkout (tsx
// installed with the dev dependencies) it runs the TypeScript source through tsx's loader, so
// the plugin always matches the working tree and never a stale build. Where tsx is absent (an
// install without dev dependencies) it runs the bundle that `make cli` writes to operator/dist/;
// the operator image ships that bundle on PATH.

// Node.js 24 or later (package.json "engines"), checked again for a node that runs this file
// itself, before anything is loaded: an older node gets as far as a dependency (undici) and dies
// there with a TypeError and a stack trace that do not say what is wrong.
const NODE_MAJOR = 24;
if (Number(process.versions.node.split('.')[0]) < NODE_MAJOR) {
  process.stderr.write(
    `kubectl-codingrun: needs Node.js ${NODE_MAJOR} or later as 'node' on PATH; ${process.execPath} is Node.js ${process.versions.node}\n`,
  );
  process.exit(1);
}

const { existsSync } = await import('node:fs');
const source = new URL('../src/cli/main.ts', import.meta.url);
const bundle = new URL('../dist/kubectl-codingrun.mjs', import.meta.url);

let tsx;
try {
  tsx = await import('tsx/esm/api');
} catch {
  tsx = undefined;
}
if (tsx && existsSync(source)) {
  tsx.register();
  await import(source.href);
} else if (existsSync(bundle)) {
  await import(bundle.href);
} else {
  process.stderr.write('kubectl-codingrun: neither tsx (npm ci) nor the bundle (make cli) is present\n');
  process.exit(1);
}
