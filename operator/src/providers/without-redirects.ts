// A fetch that never follows a redirect. A model endpoint is checked (allowModelEndpoints, the
// key's Secret), and the key is sent to it; fetch's default follows a 3xx: to a path outside the
// listed prefix with the key still on it, or, re-POSTing the run's conversation, to any host
// and port the endpoint names (the API server, 169.254.169.254), whose answer or connection
// error then came back in the run's status. Here the 3xx itself is the answer, which
// classify-model-error.ts reports as a rejected request (security #11.3: no redirects).

export function withoutRedirects(fetch: typeof globalThis.fetch): typeof globalThis.fetch {
  return (input, init) => fetch(input, { ...init, redirect: 'manual' });
}
