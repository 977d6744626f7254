// Strings: alphabets, DNS names and any text, and PATTERNS, how to write a string that matches each
// `pattern` of both schemas and some that do not.
import {
  ENV_NAME_PATTERN,
  EXTENDED_RESOURCE_NAME_OR_EMPTY_PATTERN,
  EXTENDED_RESOURCE_NAME_PATTERN,
  LABEL_KEY_PATTERN,
} from "../../../src/api/v1beta1/spec.js";
import type { FuzzRng } from "./fuzz-rng.js";
import { codePoints, showPath, type Path } from "./json.js";

export const LOWER = "abcdefghijklmnopqrstuvwxyz";
const DIGITS = "0123456789";
const HEX = "0123456789abcdef";
export const ALNUM = LOWER + LOWER.toUpperCase() + DIGITS;

function charsFrom(rng: FuzzRng, alphabet: string, n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[rng.int(alphabet.length)];
  return s;
}

/** One code point: mostly printable ASCII, sometimes Latin/CJK, astral (emoji) or a control character. */
function anyChar(rng: FuzzRng): string {
  const r = rng.next();
  if (r < 0.75) return String.fromCodePoint(0x20 + rng.int(95));
  if (r < 0.85) return String.fromCodePoint(rng.pick([0xe9, 0xfc, 0x3b1, 0x4e2d, 0x65e5, 0x2603]));
  if (r < 0.95) return String.fromCodePoint(0x1f600 + rng.int(0x50));
  return rng.pick(["\t", "\n", "\u0000", "\u007f"]);
}

/** A string of exactly n code points: plain most of the time, any text (no lone surrogates) otherwise. */
export function anyString(rng: FuzzRng, n: number): string {
  const wild = rng.chance(0.3);
  let s = "";
  for (let i = 0; i < n; i++) s += wild ? anyChar(rng) : charsFrom(rng, `${ALNUM}-_. /`, 1);
  return s;
}

/** `first middle* last` with the middle from `inner`, exactly n characters (n >= 1). */
export function edged(rng: FuzzRng, n: number, ends: string, inner: string): string {
  if (n <= 1) return charsFrom(rng, ends, 1);
  return charsFrom(rng, ends, 1) + charsFrom(rng, inner, n - 2) + charsFrom(rng, ends, 1);
}

/** A DNS subdomain of exactly n characters (n >= 1): labels of up to 20 characters joined by dots. */
export function dnsSubdomain(rng: FuzzRng, n: number): string {
  const labels: string[] = [];
  let left = n;
  while (left > 0) {
    const size = left <= 21 ? left : 1 + rng.int(20);
    labels.push(edged(rng, size, LOWER + DIGITS, `${LOWER}${DIGITS}-`));
    left -= size + 1;
    if (left === 0) {
      // The dot we counted has nothing after it: grow the last label by one instead.
      labels[labels.length - 1] += charsFrom(rng, LOWER, 1);
    }
  }
  return labels.join(".");
}

export interface PatternEntry {
  /** A matching string of exactly n characters, or undefined when the pattern has no such string. */
  valid(rng: FuzzRng, n: number): string | undefined;
  /** Non-matching strings; the generator checks that none matches. */
  invalid: readonly string[];
}

const ABSOLUTE_PATH_CHARS = `${ALNUM}-_.*?`;

/** Every `pattern` of both served versions; keyed by the pattern text exactly as the CRD carries it. */
export const PATTERNS: Record<string, PatternEntry> = {
  [ENV_NAME_PATTERN]: {
    valid: (rng, n) =>
      n === 0
        ? undefined
        : charsFrom(rng, `${LOWER}${LOWER.toUpperCase()}-._`, 1) + charsFrom(rng, `${ALNUM}-._`, n - 1),
    invalid: ["1X", "A B", "A=B", "", "\u00e4", "A/B", "$X"],
  },
  [EXTENDED_RESOURCE_NAME_PATTERN]: {
    valid: (rng, n) => {
      if (n < 3) return undefined;
      const nameLen = Math.min(63, Math.max(1, n - 2 - rng.int(Math.min(244, n - 2))));
      const domainLen = n - 1 - nameLen;
      if (domainLen < 1 || domainLen > 308) return undefined;
      return `${dnsSubdomain(rng, domainLen)}/${edged(rng, nameLen, ALNUM, `${ALNUM}-_.`)}`;
    },
    invalid: [
      "foo",
      "/foo",
      "example.com/",
      "a/b/c",
      "Example.com/foo",
      "example.com/-foo",
      "example.com/foo-",
      `example.com/${"a".repeat(64)}`,
      "exa_mple.com/foo",
      "example..com/foo",
      " example.com/foo",
      "example.com/fo o",
    ],
  },
  [LABEL_KEY_PATTERN]: {
    valid: (rng, n) => {
      // A name alone, or a prefix of at most 253 characters, '/', and a name of at most 63.
      if (n <= 63 && rng.chance(0.5)) return edged(rng, n, ALNUM, `${ALNUM}-_.`);
      const nameLen = Math.min(63, Math.max(1, n - 2 - rng.int(Math.min(253, Math.max(1, n - 2)))));
      const prefixLen = n - 1 - nameLen;
      if (prefixLen < 1 || prefixLen > 253) return n <= 63 ? edged(rng, n, ALNUM, `${ALNUM}-_.`) : undefined;
      return `${dnsSubdomain(rng, prefixLen)}/${edged(rng, nameLen, ALNUM, `${ALNUM}-_.`)}`;
    },
    invalid: ["/pool", "pool/", "a/b/c", "Example.com/pool", "-pool", "pool-", "po ol", `${"a".repeat(64)}`],
  },
  "^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$": {
    valid: (rng, n) => edged(rng, n, LOWER + DIGITS, `${LOWER}${DIGITS}-_.`),
    invalid: ["Foo", "-a", "a-", "a b", "\u00e4", "a/b", "_a"],
  },
  // A MIG profile (spec.backend.nvidia.mig.profile), as nvidia-smi names them.
  "^([1-9][0-9]*c\\.)?[1-9][0-9]*g\\.[1-9][0-9]*gb(\\+[a-z]+(\\.[a-z]+)*)?$": {
    valid: (rng, n) => {
      const all = ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb", "1g.10gb+me", "1c.3g.40gb", "1g.20gb+me.all"];
      const fits = all.filter((p) => p.length === n);
      return fits.length === 0 ? undefined : rng.pick(fits);
    },
    invalid: ["1g", "MIG 1g.10gb", "0g.10gb", "1g.10GB", "1g.10gb+"],
  },
  // A namespace (spec.takeover.daemonSet.namespace): an RFC 1123 label.
  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": {
    valid: (rng, n) => edged(rng, n, LOWER + DIGITS, `${LOWER}${DIGITS}-`),
    invalid: ["Foo", "-a", "a-", "a.b", "a_b", "a b"],
  },
  // A device id of another plugin (spec.backend.mock.ids[]).
  "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$": {
    valid: (rng, n) => edged(rng, n, ALNUM, `${ALNUM}-_.`),
    invalid: ["-a", "a-", "a b", "a,b", "_a", "\u00e4"],
  },
  // A socket file name with '*' (spec.takeover.socket).
  "^[A-Za-z0-9_.*-]+$": {
    valid: (rng, n) => (n === 0 ? undefined : charsFrom(rng, `${ALNUM}_.*-`, n)),
    invalid: ["a/b", "a b", "\u00e4.sock", "dp?"],
  },
  "^\\/": {
    valid: (rng, n) => {
      let s = "/";
      while (codePoints(s) < n) {
        const r = rng.next();
        s +=
          r < 0.15
            ? "/"
            : r < 0.2
              ? anyChar(rng).replace(/[\t\n\0\x7f]/, "x")
              : charsFrom(rng, ABSOLUTE_PATH_CHARS, 1);
      }
      // No '..' segment: the CEL rule on these paths is satisfied by construction, and the rule table checks it.
      return s.replace(/(^|\/)\.\.(?=\/|$)/g, "$1x.");
    },
    invalid: ["relative/path", "./x", "~/x", "dev", " /dev", "\\dev"],
  },
  "^(rw?m?|wm?|m)$": {
    valid: (rng, n) => {
      const all = ["r", "rw", "rm", "rwm", "w", "wm", "m"].filter((p) => p.length === n);
      return all.length === 0 ? undefined : rng.pick(all);
    },
    invalid: ["x", "wr", "mr", "rwmx", "RW", "rr", " r"],
  },
  "^[0-9a-f]{4}$": {
    valid: (rng, n) => (n === 4 ? charsFrom(rng, HEX, 4) : undefined),
    invalid: ["10DE", "10d", "10de0", "xyz0", "0x10", " 10d", "10de\n"],
  },
  "^[0-9a-f]{2,6}$": {
    valid: (rng, n) => (n >= 2 && n <= 6 ? charsFrom(rng, HEX, n) : undefined),
    invalid: ["3", "0302030", "03G2", "0x03", "03 "],
  },
  "^[a-zA-Z][-a-zA-Z0-9_.]*[a-zA-Z0-9]\\/[a-zA-Z][-a-zA-Z0-9_.]*[a-zA-Z0-9]$": {
    valid: (rng, n) => {
      if (n < 5) return undefined;
      const vendor = 2 + rng.int(n - 4);
      const letters = LOWER + LOWER.toUpperCase();
      const part = (len: number): string =>
        charsFrom(rng, letters, 1) + charsFrom(rng, `${ALNUM}-_.`, len - 2) + charsFrom(rng, ALNUM, 1);
      return `${part(vendor)}/${part(n - 1 - vendor)}`;
    },
    invalid: [
      "vendor",
      "1vendor/foo",
      "a/foo",
      "vendor.example/f",
      "vendor/foo-",
      "vendor/foo/bar",
      "ven dor/foo",
    ],
  },
  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$": {
    valid: (rng, n) => (n === 0 ? undefined : dnsSubdomain(rng, n)),
    invalid: [
      "Gpu.example.com",
      "-gpu.example.com",
      "gpu.example.com.",
      "gpu..example",
      "gpu_x.example",
      "a b",
    ],
  },
  "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$": {
    valid: (rng, n) => (n === 0 ? "" : edged(rng, n, ALNUM, `${ALNUM}-_.`)),
    invalid: ["-bad", "bad-", "a b", "\u00e4", "a/b", "_a", "a:b"],
  },
  "^[+-]?(\\d+(\\.\\d*)?|\\.\\d+)([eE][+-]?\\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|n|u)?$": {
    valid: (rng, n) => {
      const suffix = rng.pick(["", "", "m", "Mi", "Gi", "k", "e3", "E-2", "n", "Ki"]);
      const sign = rng.pick(["", "", "+", "-"]);
      const digits = Math.max(1, n - suffix.length - sign.length);
      const number =
        rng.chance(0.2) && digits >= 3
          ? `${charsFrom(rng, DIGITS, digits - 2)}.${charsFrom(rng, DIGITS, 1)}`
          : charsFrom(rng, DIGITS, digits);
      return `${sign}${number}${suffix}`;
    },
    invalid: ["1.2.3", "Mi", "100MB", "1 Gi", "abc", "0x10", "1e", "--1", "1Mi "],
  },
  // A kernel driver name (PCI `drivers`).
  "^[A-Za-z0-9_.-]+$": {
    valid: (rng, n) => (n === 0 ? undefined : charsFrom(rng, `${ALNUM}_.-`, n)),
    invalid: ["", "vfio pci", "a/b", "\u00e4", "x:y"],
  },
  // A PCI address in extended BDF form (PCI `physicalFunctions`).
  "^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$": {
    valid: (rng, n) =>
      n === 12
        ? `${charsFrom(rng, HEX, 4)}:${charsFrom(rng, HEX, 2)}:${charsFrom(rng, HEX, 2)}.${rng.int(8)}`
        : undefined,
    invalid: ["3b:00.0", "0000:3B:00.0", "0000:3b:00.8", "0000:3b:00", "0000:3b:00.0 "],
  },
  // A DevFS group pattern: one capture group, no other parentheses.
  "^[^()]*\\([^()]+\\)[^()]*$": {
    valid: (rng, n) => (n < 11 ? undefined : `/dev/${charsFrom(rng, LOWER, n - 10)}(\\d+)`),
    invalid: ["/dev/accel", "(a)(b)", "((a))", "()", "a(b"],
  },
  // A DeviceClass's extended resource name: one, or "" for none.
  [EXTENDED_RESOURCE_NAME_OR_EMPTY_PATTERN]: {
    valid: (rng, n) => (n === 0 ? "" : PATTERNS[EXTENDED_RESOURCE_NAME_PATTERN]!.valid(rng, n)),
    invalid: ["foo", "/foo", "example.com/", "a/b/c", "Example.com/foo", " ", "example.com/fo o"],
  },
};

export function patternEntry(pattern: string, path: Path): PatternEntry {
  const entry = PATTERNS[pattern];
  if (!entry) {
    throw new Error(`config-gen: no samples for pattern ${pattern} at ${showPath(path)}: add it to PATTERNS`);
  }
  return entry;
}
