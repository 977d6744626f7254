// Whether a regular expression compiles with Go's regexp (RE2), which the API server uses for `pattern`
// and CEL `matches()`.

/** RE2 (Go regexp) escapes; JS escapes outside this set (\u, \c, \k, backreferences) do not compile there. */
const RE2_ESCAPE_LETTERS = new Set("aAbBdDfnrsStvwWzxpPQE".split(""));
/** RE2 refuses repetition counts above this. */
const RE2_MAX_REPEAT = 1000;

/**
 * Why a pattern would not compile with Go's regexp (RE2), which the API server uses for `pattern`
 * and CEL `matches()`, or undefined when it does: no lookarounds, atomic groups, backreferences or
 * JS-only escapes, and no repetition counts above 1000.
 */
export function re2Incompatibility(pattern: string): string | undefined {
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      const next = pattern[i + 1] ?? "";
      if (/[1-9]/.test(next) && !inClass) return `backreference \\${next} at ${i}`;
      if (/[A-Za-z]/.test(next) && !RE2_ESCAPE_LETTERS.has(next)) return `escape \\${next} at ${i}`;
      i++;
    } else if (inClass) {
      if (c === "]") inClass = false;
    } else if (c === "[") {
      inClass = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (pattern[i + 1] === "^") i++;
      if (pattern[i + 1] === "]") i++;
    } else if (c === "(" && pattern[i + 1] === "?") {
      const rest = pattern.slice(i + 2);
      if (rest.startsWith("=") || rest.startsWith("!")) return `lookahead at ${i}`;
      if (rest.startsWith("<=") || rest.startsWith("<!")) return `lookbehind at ${i}`;
      if (rest.startsWith(">")) return `atomic group at ${i}`;
    } else if (c === "{") {
      const repeat = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i));
      const counts = [repeat?.[1], repeat?.[3]].filter((n): n is string => n !== undefined && n !== "");
      if (counts.some((n) => Number(n) > RE2_MAX_REPEAT))
        return `repetition count above ${RE2_MAX_REPEAT} at ${i}`;
    }
  }
  return undefined;
}
