// A small npm registry on loopback for the egress tests: packages packed by the real `npm pack`,
// served the way registry.npmjs.org serves them (the packument at /<name>, the tarball at
// /<name>/-/<name>-<version>.tgz), so the real npm client installs from it. Verdaccio would do
// the same with a few hundred dependencies more; what the tests need of a registry is that npm
// talks to it over HTTP, which this gives. Every request is recorded, to show what reached it.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface PackageSource {
  name: string;
  version: string;
  /** Files of the package besides package.json. */
  files: Record<string, string>;
}

interface Packed {
  source: PackageSource;
  tarball: Buffer;
  integrity: string;
  shasum: string;
}

export interface NpmRegistryServer {
  readonly port: number;
  /** Paths requested, in order. */
  readonly requests: string[];
  /** The lockfile entry npm ci needs for a package, its tarball URL under `origin` (such as http://registry.test:4873). */
  lockEntry(name: string, origin: string): { version: string; resolved: string; integrity: string };
  stop(): Promise<void>;
}

function pack(source: PackageSource): Packed {
  const dir = mkdtempSync(path.join(tmpdir(), 'chamvi-npm-pack-'));
  const packageDir = path.join(dir, 'package');
  mkdirSync(packageDir);
  writeFileSync(path.join(packageDir, 'package.json'), JSON.stringify({ name: source.name, version: source.version, main: 'index.js' }));
  for (const [file, content] of Object.entries(source.files)) writeFileSync(path.join(packageDir, file), content);
  const output = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: packageDir, encoding: 'utf8' });
  const { filename } = (JSON.parse(output) as Array<{ filename: string }>)[0]!;
  const tarball = readFileSync(path.join(dir, filename));
  rmSync(dir, { recursive: true, force: true });
  return {
    source,
    tarball,
    integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
    shasum: createHash('sha1').update(tarball).digest('hex'),
  };
}

/** `host`: the address it listens on (the real node's tests give the bridge address, where pods reach the host). */
export async function startNpmRegistryServer(packages: PackageSource[], host = '127.0.0.1'): Promise<NpmRegistryServer> {
  const packed = new Map(packages.map((source) => [source.name, pack(source)]));
  const requests: string[] = [];
  const tarballPath = (name: string, version: string) => `/${name}/-/${name}-${version}.tgz`;
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    requests.push(url);
    const host = req.headers.host ?? '';
    for (const entry of packed.values()) {
      const { name, version } = entry.source;
      if (url === `/${name}`) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            name,
            'dist-tags': { latest: version },
            versions: {
              [version]: {
                name,
                version,
                main: 'index.js',
                dist: { tarball: `http://${host}${tarballPath(name, version)}`, integrity: entry.integrity, shasum: entry.shasum },
              },
            },
          }),
        );
        return;
      }
      if (url === tarballPath(name, version)) {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': entry.tarball.length }).end(entry.tarball);
        return;
      }
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    lockEntry(name, origin) {
      const entry = packed.get(name);
      if (!entry) throw new Error(`no package ${name}`);
      return { version: entry.source.version, resolved: `${origin}${tarballPath(name, entry.source.version)}`, integrity: entry.integrity };
    },
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
