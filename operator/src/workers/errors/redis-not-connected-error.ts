// A probe of Redis (redis-probe.ts) found the connection not ready (down, reconnecting, or not
// yet connected) and sent nothing: ioredis would keep the command until Redis came back, for
// every request to /readyz and /metrics. /readyz says not ready with this message; a scrape
// leaves the queue gauge out.
const name = 'RedisNotConnectedError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class RedisNotConnectedError extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  /** The connection's ioredis status: connecting, reconnecting, close, end... */
  readonly status: string;

  constructor(status: string) {
    super(
      `redis not connected (status ${status}); the operator reconnects by itself: check that Redis is running and reachable from the operator's pod`,
    );
    this.status = status;
  }

  static isInstance(error: unknown): error is RedisNotConnectedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
