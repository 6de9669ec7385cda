// The end of a child process's output, at most `cap` bytes, decoded once when it is read.
// Decoding each chunk as it came split a UTF-8 character at a chunk's edge (a path in `git
// apply --numstat -z` then read differently from its other spelling), and joining then cutting
// a string at every chunk copied the whole kept text each time: a long output (a branch head's
// message of hundreds of MiB) held the event loop.
export class OutputTail {
  private readonly chunks: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly cap: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    // Drop whole chunks the cap no longer reaches; the last cut is made when read.
    while (this.chunks.length > 1 && this.bytes - this.chunks[0]!.length >= this.cap) this.bytes -= this.chunks.shift()!.length;
  }

  text(): string {
    const all = Buffer.concat(this.chunks, this.bytes);
    return all.subarray(Math.max(0, all.length - this.cap)).toString('utf8');
  }
}
