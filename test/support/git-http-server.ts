// A loopback git server over smart HTTP (real `git http-backend` as CGI) that serves only a
// request carrying Basic auth with the expected token as password: a clone succeeds only if the
// credential was really sent. It records every Authorization header it saw, so a test can prove
// the credential was in play (the control) before asserting where it must not be.
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GitHttpServer {
  /** http://127.0.0.1:PORT, no trailing slash. */
  origin: string;
  /** Authorization headers received, in order (including wrong ones). */
  authorizations: string[];
  /** Requests answered with the repository (the token matched). */
  served: number;
  close(): Promise<void>;
}

/** Serves the bare repositories under `projectRoot` (GIT_PROJECT_ROOT) to requests that send `token`. */
export async function startGitHttpServer(projectRoot: string, token: string): Promise<GitHttpServer> {
  const state = { authorizations: [] as string[], served: 0 };
  const server: Server = createServer((request, response) => {
    const authorization = request.headers.authorization;
    if (authorization) state.authorizations.push(authorization);
    const password = /^Basic (.+)$/.exec(authorization ?? '')?.[1];
    const decoded = password ? Buffer.from(password, 'base64').toString('utf8') : '';
    if (decoded.slice(decoded.indexOf(':') + 1) !== token) {
      response.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
      return;
    }
    state.served += 1;
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: projectRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: request.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: request.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: request.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: String(request.headers['git-protocol'] ?? ''),
        REMOTE_USER: decoded.slice(0, decoded.indexOf(':')),
        REMOTE_ADDR: '127.0.0.1',
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    request.pipe(cgi.stdin);
    // CGI output: headers, a blank line, the body. Status: sets the code.
    let head = Buffer.alloc(0);
    let headerDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headerDone) {
        response.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const crlf = head.indexOf('\r\n\r\n');
      const lf = head.indexOf('\n\n');
      const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1;
      if (end < 0) return;
      headerDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/).filter(Boolean)) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else headers[name] = value;
      }
      response.writeHead(status, headers);
      response.write(head.subarray(end));
    });
    cgi.stdout.on('end', () => response.end());
    cgi.on('error', () => response.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get authorizations() {
      return state.authorizations;
    },
    get served() {
      return state.served;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
