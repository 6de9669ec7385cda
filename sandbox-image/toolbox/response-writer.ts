// Writes one JSON line. The id goes first so a client that meets an oversized line can still
// tell which request it answers from its first bytes; writes wait for the pipe to drain so a
// slow reader never makes the toolbox buffer without bound.
export function writeLine(output: NodeJS.WritableStream, message: { id?: unknown } & Record<string, unknown>): Promise<void> {
  const ordered = message.id === undefined ? message : { id: message.id, ...message };
  const line = `${JSON.stringify(ordered)}\n`;
  return new Promise((resolve, reject) => {
    const flushed = output.write(line, (error) => (error ? reject(error) : undefined));
    if (flushed) resolve();
    else output.once('drain', () => resolve());
  });
}
