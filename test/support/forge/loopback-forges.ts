// A forge's API on loopback, for the tests of what every forge adapter makes of an answer it
// cannot trust (too large, redirected, broken off, hostile words): a real HTTP server, so the
// adapter's own HTTP client reads the answer as it would a forge's. The request's body is read
// and dropped; each server is closed after the test (loopback-servers.ts).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { loopbackServers } from '../loopback-servers.ts';

/** Answers one request to the forge. */
export type ForgeAnswer = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * Call at a test file's top level (it registers the afterEach that closes the servers). Returns
 * the function that starts a forge answering every request as `answer` does, and gives its base URL.
 */
export function loopbackForges(): (answer: ForgeAnswer) => Promise<string> {
  const servers = loopbackServers();
  return async (answer) => {
    const port = await servers.listen(
      createServer((request, response) => {
        request.resume();
        answer(request, response);
      }),
    );
    return `http://127.0.0.1:${port}`;
  };
}
