// gRPC status codes and the wire form of a status message (the plugin's own gRPC layer, ADR 0008).

/** The gRPC status codes, by the names and numbers of the gRPC spec (doc/statuscodes.md). */
export const Status = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export type StatusCode = (typeof Status)[keyof typeof Status];

const NAMES = new Map<number, string>(Object.entries(Status).map(([name, code]) => [code, name]));

/** The code's name (`INVALID_ARGUMENT`), or its number for a code the spec does not define. */
export function statusName(code: number): string {
  return NAMES.get(code) ?? String(code);
}

/** A call's outcome as a handler gives it: a code and, for a failure, what went wrong. */
export interface StatusObject {
  code: number;
  details: string;
}

/**
 * `grpc-message` as the spec writes it (doc/PROTOCOL-HTTP2.md, "Responses"): the UTF-8 bytes, each byte
 * outside printable ASCII and `%` itself as `%XX`. grpc-go and grpc-js both decode it.
 */
export function encodeGrpcMessage(message: string): string {
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** The inverse of encodeGrpcMessage; a malformed escape is kept as it is, as grpc-go does. */
export function decodeGrpcMessage(value: string): string {
  if (!value.includes("%")) return value;
  const bytes: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const hex = value.slice(i + 1, i + 3);
    if (value[i] === "%" && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(value[i]!, "utf8"));
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/**
 * `grpc-timeout` in milliseconds: at most 8 digits and a unit (H, M, S, m, u, n); undefined when the value
 * is not one.
 */
export function parseGrpcTimeout(value: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (m === null) return undefined;
  const units: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };
  return Number(m[1]) * units[m[2]!]!;
}
