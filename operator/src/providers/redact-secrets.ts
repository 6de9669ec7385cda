// Provider error bodies are copied into error messages; some endpoints echo request headers
// back, so any known secret is replaced before text leaves this module. A header value is
// quoted trimmed (fetch trims it), and a value of several lines may be quoted a line at a
// time, so each of those forms is replaced too, the longest first.

/** Very short values would redact ordinary words; real keys are long. */
const SHORTEST_REDACTED = 8;

export function redactSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret === undefined) continue;
    for (const form of [secret, secret.trim(), ...secret.split(/\r?\n/).map((line) => line.trim())])
      if (form.length >= SHORTEST_REDACTED) forms.add(form);
  }
  let redacted = text;
  for (const form of [...forms].sort((a, b) => b.length - a.length)) redacted = redacted.split(form).join('[redacted]');
  return redacted;
}
