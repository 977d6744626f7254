// gRPC's length-prefixed messages (doc/PROTOCOL-HTTP2.md, "Length-Prefixed-Message"): a compressed flag
// byte, a 4-byte big-endian length, the message.

/** grpc-go's and grpc-js's default limit on a received message. */
export const DEFAULT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024;

/** One message framed for the wire, uncompressed. */
export function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out.writeUInt8(0, 0);
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** Why a stream of frames cannot be read: a message over the limit, or one compressed. */
export class FrameError extends Error {
  constructor(
    readonly kind: "too-large" | "compressed",
    message: string,
  ) {
    super(message);
  }
}

/** Reads messages out of DATA chunks as they come, however the chunks cut them. */
export class FrameReader {
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  /** The length of the message being read, once its prefix is in. */
  private expected: number | undefined;

  constructor(private readonly maxBytes: number) {}

  /** The chunk's complete messages; throws a FrameError on a compressed or oversized one. */
  push(chunk: Buffer): Buffer[] {
    this.buffered.push(chunk);
    this.bufferedBytes += chunk.length;
    const messages: Buffer[] = [];
    for (;;) {
      if (this.expected === undefined) {
        if (this.bufferedBytes < 5) break;
        const head = this.join();
        if (head.readUInt8(0) !== 0) {
          // No grpc-encoding is ever offered (grpc-accept-encoding: identity), so a peer has no reason to.
          throw new FrameError("compressed", "Received a compressed message; only identity is supported");
        }
        const length = head.readUInt32BE(1);
        if (length > this.maxBytes) {
          throw new FrameError(
            "too-large",
            `Received message larger than max (${length} vs ${this.maxBytes})`,
          );
        }
        this.expected = length;
      }
      // The chunks are joined once the whole message is in, not on every chunk: a 4 MiB message comes
      // in some 256 DATA frames.
      if (this.bufferedBytes < 5 + this.expected) break;
      const all = this.join();
      messages.push(all.subarray(5, 5 + this.expected));
      const rest = all.subarray(5 + this.expected);
      this.buffered = rest.length > 0 ? [rest] : [];
      this.bufferedBytes = rest.length;
      this.expected = undefined;
    }
    return messages;
  }

  private join(): Buffer {
    if (this.buffered.length > 1) this.buffered = [Buffer.concat(this.buffered)];
    return this.buffered[0]!;
  }
}
