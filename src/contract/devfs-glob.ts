// The grammar of a DevFS path glob (`/dev/bus/usb/*/*`): segments split on `/`, with `*` and `?`
// wildcards inside one segment. The plugin resolves globs with it; the operator reads from it which
// host directories the plugin pod must mount.

/**
 * Matches one path segment against a glob segment: `*` is any run of characters, `?` exactly one, both
 * within the segment. Like a shell, a wildcard does not match a leading `.` (hidden entries). Pure.
 */
export function matchGlobSegment(pattern: string, name: string): boolean {
  if (name.startsWith(".") && !pattern.startsWith(".")) return false;
  let p = 0;
  let n = 0;
  // Where the last `*` was, and where in `name` it currently stops, for backtracking.
  let star = -1;
  let starEnd = 0;
  while (n < name.length) {
    const want = pattern[p];
    if (want === "?" || (want !== undefined && want !== "*" && want === name[n])) {
      p += 1;
      n += 1;
    } else if (want === "*") {
      star = p;
      starEnd = n;
      p += 1;
    } else if (star >= 0) {
      starEnd += 1;
      p = star + 1;
      n = starEnd;
    } else {
      return false;
    }
  }
  while (pattern[p] === "*") p += 1;
  return p === pattern.length;
}

/** Whether a glob segment has a wildcard; one without names exactly one entry. Pure. */
export function hasWildcard(segment: string): boolean {
  return segment.includes("*") || segment.includes("?");
}

/** The segments of an absolute glob, without empty and `.` segments. Pure. */
export function globSegments(glob: string): string[] {
  return glob.split("/").filter((segment) => segment !== "" && segment !== ".");
}
