// Provider error bodies are copied into error messages; some endpoints echo request headers
// back, so any known secret is replaced before text leaves this module.

export function redactSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  let redacted = text;
  for (const secret of secrets) {
    // Very short values would redact ordinary words; real keys are long.
    if (secret === undefined || secret.length < 8) continue;
    redacted = redacted.split(secret).join('[redacted]');
  }
  return redacted;
}
