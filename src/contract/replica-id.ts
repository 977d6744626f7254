// The ids a time-sliced device is advertised under, `<physical>::<k>`: the plugin gives them to the
// kubelet and reads them back from it, and the operator names a node's devices with them in its status.

/** Separates the physical id from the replica index in a time-sliced id: `<physical>::<k>`. */
export const REPLICA_SEPARATOR = "::";

// Bounded so the index stays an exact integer; replicas are at most 1024.
const REPLICA_INDEX = /^(0|[1-9][0-9]{0,8})$/;

/** The id the kubelet sees for replica `replica` of a physical device under time-slicing. */
export function replicaId(physicalId: string, replica: number): string {
  return `${physicalId}${REPLICA_SEPARATOR}${replica}`;
}

export interface ParsedAdvertisedId {
  readonly physicalId: string;
  /** Replica index, or undefined when the id carries none (no time-slicing). */
  readonly replica: number | undefined;
}

/**
 * Splits `<physical>::<k>` at the last separator. An id without a numeric replica suffix is a
 * physical id as is; PCI addresses contain single colons, which never match the separator.
 * Prefer the advertised device map when it is at hand: this only reads the id's shape.
 */
export function parseAdvertisedId(advertisedId: string): ParsedAdvertisedId {
  const at = advertisedId.lastIndexOf(REPLICA_SEPARATOR);
  if (at > 0) {
    const suffix = advertisedId.slice(at + REPLICA_SEPARATOR.length);
    if (REPLICA_INDEX.test(suffix)) {
      return { physicalId: advertisedId.slice(0, at), replica: Number(suffix) };
    }
  }
  return { physicalId: advertisedId, replica: undefined };
}

/** The physical device behind an advertised id (the id itself without time-slicing). */
export function physicalIdOf(advertisedId: string): string {
  return parseAdvertisedId(advertisedId).physicalId;
}
