// Seeded DevicePluginConfig manifests for config fuzzing, derived from the CRD's structural schemas (the
// schemas the API server enforces, generated from the zod schemas in src/api), in both served versions,
// then mutated. Pure: one (seed, index) pair always gives the same manifest, so a failing case replays.
//
// The structural schema says types, enums, bounds, lengths, list sizes and required members; what it
// cannot say in a form a generator can use is kept in two tables keyed by the schema's own text:
// PATTERNS (how to write a string that matches, and some that do not, for every `pattern`) and
// CEL_RULES (how to satisfy and how to break every `x-kubernetes-validations` rule). A schema that gains
// a pattern or a rule neither table knows makes the generator throw, so it never silently stops covering
// part of the API.
import {
  checkDefaultDriverName,
  DRA_DEFAULT_DRIVER_RULE,
  EXTENDED_RESOURCE_NAME_PATTERN,
} from "../../src/api/v1beta1/spec.js";
import { devicePluginConfigCrd, type StructuralSchema } from "../../src/api/crd.js";
import { LOST_FIELDS_ANNOTATION, toV1alpha1, type BetaObject } from "../../src/api/conversion/convert.js";
import { mulberry32, Rng } from "./rng.js";

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export const GROUP = "dpo.dev";
export const FUZZ_VERSIONS = ["v1beta1", "v1alpha1"] as const;
export type FuzzVersion = (typeof FUZZ_VERSIONS)[number];

/** One generated manifest and how it was made. */
export interface ConfigCase {
  seed: number;
  index: number;
  version: FuzzVersion;
  manifest: JsonObject;
  /** How the valid base was made, then one entry per mutation (empty when none). */
  origin: string;
  mutations: string[];
}

type Path = (string | number)[];

/** `spec.backend.devFS.paths[0].glob`, for descriptions only. */
export function showPath(path: readonly (string | number)[]): string {
  let out = "";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : out === "" ? part : `.${part}`;
  return out;
}

/** A value in a description: strings as they are, anything else as JSON. */
function text(value: Json | undefined): string {
  return typeof value === "string" ? value : (JSON.stringify(value) ?? "unset");
}

function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function clone<T extends Json>(value: T): T {
  return structuredClone(value);
}

/** Length as the API server counts it (Go runes) and zod's `.max()` does: code points, not UTF-16 units. */
export function codePoints(s: string): number {
  return [...s].length;
}

class FuzzRng extends Rng {
  chance(p: number): boolean {
    return this.next() < p;
  }
  /** An integer in [lo, hi], a bound itself about one time in four. */
  intIn(lo: number, hi: number): number {
    if (hi <= lo) return lo;
    if (this.chance(0.25)) return this.pick([lo, hi, Math.min(lo + 1, hi), Math.max(hi - 1, lo)]);
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  /** A length in [min, max]: short most of the time, `max` itself one time in twenty. */
  length(min: number, max: number): number {
    const r = this.next();
    if (r < 0.05) return max;
    if (r < 0.15) return this.intIn(min, max);
    return this.intIn(min, Math.min(max, min + 12));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Strings

const LOWER = "abcdefghijklmnopqrstuvwxyz";
const DIGITS = "0123456789";
const HEX = "0123456789abcdef";
const ALNUM = LOWER + LOWER.toUpperCase() + DIGITS;

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
function anyString(rng: FuzzRng, n: number): string {
  const wild = rng.chance(0.3);
  let s = "";
  for (let i = 0; i < n; i++) s += wild ? anyChar(rng) : charsFrom(rng, `${ALNUM}-_. /`, 1);
  return s;
}

/** `first middle* last` with the middle from `inner`, exactly n characters (n >= 1). */
function edged(rng: FuzzRng, n: number, ends: string, inner: string): string {
  if (n <= 1) return charsFrom(rng, ends, 1);
  return charsFrom(rng, ends, 1) + charsFrom(rng, inner, n - 2) + charsFrom(rng, ends, 1);
}

/** A DNS subdomain of exactly n characters (n >= 1): labels of up to 20 characters joined by dots. */
function dnsSubdomain(rng: FuzzRng, n: number): string {
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

interface PatternEntry {
  /** A matching string of exactly n characters, or undefined when the pattern has no such string. */
  valid(rng: FuzzRng, n: number): string | undefined;
  /** Non-matching strings; the generator checks that none matches. */
  invalid: readonly string[];
}

const ABSOLUTE_PATH_CHARS = `${ALNUM}-_.*?`;

/** Every `pattern` of both served versions; keyed by the pattern text exactly as the CRD carries it. */
const PATTERNS: Record<string, PatternEntry> = {
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
  "^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$": {
    valid: (rng, n) => edged(rng, n, LOWER + DIGITS, `${LOWER}${DIGITS}-_.`),
    invalid: ["Foo", "-a", "a-", "a b", "\u00e4", "a/b", "_a"],
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
};

function patternEntry(pattern: string, path: Path): PatternEntry {
  const entry = PATTERNS[pattern];
  if (!entry) {
    throw new Error(`config-gen: no samples for pattern ${pattern} at ${showPath(path)}: add it to PATTERNS`);
  }
  return entry;
}

// ---------------------------------------------------------------------------------------------------------
// CEL rules

interface RuleContext {
  rng: FuzzRng;
  /** The schema node carrying the rule. */
  schema: StructuralSchema;
  path: Path;
  /** A valid value for a schema node (with its own rules satisfied). */
  gen(schema: StructuralSchema, path: Path): Json;
  /** A fresh valid value for the node carrying the rule, without its rules applied (strings). */
  fresh(): Json;
}

interface CelHandler {
  /** The rule text; captures are handed to the functions. */
  rule: RegExp;
  /** Returns the value (changed in place or new) so that the rule holds. */
  satisfy: (value: Json, m: RegExpExecArray, c: RuleContext) => Json;
  /** Breaks the rule; returns the new value and what was done, or undefined where it cannot be broken here. */
  violate?: (value: Json, m: RegExpExecArray, c: RuleContext) => { value: Json; what: string } | undefined;
  /** Valid values for a node the structural schema cannot type (x-kubernetes-int-or-string). */
  generate?: (m: RegExpExecArray, c: RuleContext) => Json;
}

function exact(rule: string): RegExp {
  return new RegExp(`^${rule.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
}

/** The value a field has once the API server has defaulted it. */
function effective(o: JsonObject, key: string, schema: StructuralSchema): Json | undefined {
  return o[key] ?? (schema.properties?.[key]?.default as Json | undefined);
}

/** A string rule: regenerate until it holds; break it with one of `breaks`. */
function stringRule(
  rule: RegExp,
  holds: (s: string, m: RegExpExecArray) => boolean,
  breaks: (s: string, m: RegExpExecArray, rng: FuzzRng) => string,
): CelHandler {
  return {
    rule,
    satisfy(value, m, c) {
      let v = value;
      for (let i = 0; i < 200; i++) {
        if (typeof v !== "string" || holds(v, m)) return v;
        v = c.fresh();
      }
      throw new Error(`config-gen: cannot satisfy ${m[0]} at ${showPath(c.path)}`);
    },
    violate(value, m, c) {
      const broken = breaks(typeof value === "string" ? value : "", m, c.rng);
      return holds(broken, m) ? undefined : { value: broken, what: `breaks ${m[0]}` };
    },
  };
}

const DOTDOT_RULE =
  "!(self == '..' || self.startsWith('../') || self.contains('/../') || self.endsWith('/..'))";
const TIME_SLICING_RULE = "self.strategy != 'TimeSlicing' || (has(self.replicas) && self.replicas >= 2)";
const NONE_RULE = "self.strategy != 'None' || !has(self.replicas) || self.replicas == 1";
const EXISTS_RULE =
  "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''";
const SECONDS_RULE = "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')";
const MAX_UNAVAILABLE_RULE =
  "type(self) == int ? (self >= 1 && self <= 100000) : self.matches('^(100|[1-9][0-9]?)%$')";

function maxUnavailableHolds(v: Json): boolean {
  if (typeof v === "number") return Number.isInteger(v) && v >= 1 && v <= 100_000;
  return typeof v === "string" && /^(100|[1-9][0-9]?)%$/.test(v);
}

/** Whether a spec of either version shares its devices by time-slicing (v1beta1 `sharing`, v1alpha1 `sharedDevNum`). */
function timeSliced(spec: JsonObject): boolean {
  if (isObject(spec.sharing)) return spec.sharing.strategy === "TimeSlicing";
  return typeof spec.sharedDevNum === "number" && spec.sharedDevNum > 1;
}

/** Every `x-kubernetes-validations` rule of both served versions. */
const CEL_RULES: CelHandler[] = [
  {
    // publish DRA without a driver name needs a resource name whose default driver name is valid.
    rule: exact(DRA_DEFAULT_DRIVER_RULE),
    satisfy(value, _m, c) {
      if (!isObject(value) || value.publish !== "DRA" || typeof value.resourceName !== "string") return value;
      const dra = isObject(value.dra) ? value.dra : {};
      if (dra.driverName !== undefined || checkDefaultDriverName(value.resourceName) === undefined)
        return value;
      dra.driverName = dnsSubdomain(c.rng, 1 + c.rng.int(40));
      value.dra = dra;
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.publish = "DRA";
      if (isObject(value.dra)) delete value.dra.driverName;
      // A valid extended resource name whose <name>.<domain> is no DNS subdomain (or too long).
      value.resourceName = c.rng.pick([
        "example.com/GPU",
        "example.com/gpu_x",
        `example.com/${"g".repeat(60)}`,
      ]);
      return { value, what: `publish DRA without a driver name, resourceName ${String(value.resourceName)}` };
    },
  },
  {
    // publish DRA refuses time-slicing, in each version's spelling of it.
    rule: /^!has\(self\.publish\) \|\| self\.publish != 'DRA' \|\| !\((.+)\)$/,
    satisfy(value) {
      if (isObject(value) && value.publish === "DRA" && timeSliced(value)) value.publish = "DevicePlugin";
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.publish = "DRA";
      value.dra = { ...(isObject(value.dra) ? value.dra : {}), driverName: "dev.example.com" };
      if (c.schema.properties?.sharing !== undefined)
        value.sharing = { strategy: "TimeSlicing", replicas: 2 + c.rng.int(8) };
      else value.sharedDevNum = 2 + c.rng.int(8);
      return { value, what: "publish DRA with time-slicing" };
    },
  },
  {
    // A backend member must be set when the discriminator names it (v1beta1 `type`, v1alpha1 `backend`).
    rule: /^self\.(\w+) != '(\w+)' \|\| has\(self\.(\w+)\)$/,
    satisfy(value, [, d, v, member], c) {
      if (isObject(value) && value[d!] === v && value[member!] === undefined) {
        value[member!] = c.gen(c.schema.properties![member!]!, [...c.path, member!]);
      }
      return value;
    },
    violate(value, [, d, v, member]) {
      if (!isObject(value)) return undefined;
      value[d!] = v!;
      delete value[member!];
      return { value, what: `${d}: ${v} without ${member}` };
    },
  },
  {
    // ... and only then.
    rule: /^self\.(\w+) == '(\w+)' \|\| !has\(self\.(\w+)\)$/,
    satisfy(value, [, d, v, member]) {
      if (isObject(value) && value[d!] !== v) delete value[member!];
      return value;
    },
    violate(value, [, d, v, member], c) {
      if (!isObject(value) || value[d!] === v || value[member!] !== undefined) return undefined;
      value[member!] = c.gen(c.schema.properties![member!]!, [...c.path, member!]);
      return { value, what: `${member} set with ${d}: ${text(value[d!])}` };
    },
  },
  {
    rule: exact(TIME_SLICING_RULE),
    satisfy(value, _m, c) {
      if (!isObject(value) || effective(value, "strategy", c.schema) !== "TimeSlicing") return value;
      const r = value.replicas;
      if (typeof r !== "number" || r < 2)
        value.replicas = c.rng.intIn(2, c.schema.properties!.replicas!.maximum!);
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.strategy = "TimeSlicing";
      if (c.rng.chance(0.5)) delete value.replicas;
      else value.replicas = 1;
      return { value, what: `TimeSlicing with replicas ${text(value.replicas)}` };
    },
  },
  {
    rule: exact(NONE_RULE),
    satisfy(value, _m, c) {
      if (!isObject(value) || effective(value, "strategy", c.schema) !== "None") return value;
      if (value.replicas !== undefined && value.replicas !== 1) {
        if (c.rng.chance(0.5)) delete value.replicas;
        else value.replicas = 1;
      }
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      if (c.rng.chance(0.5)) delete value.strategy;
      else value.strategy = "None";
      value.replicas = c.rng.intIn(2, c.schema.properties!.replicas!.maximum!);
      return { value, what: `replicas ${value.replicas} with strategy ${text(value.strategy)}` };
    },
  },
  {
    rule: exact(EXISTS_RULE),
    satisfy(value, _m, c) {
      if (isObject(value) && value.operator === "Exists" && value.value !== undefined && value.value !== "") {
        if (c.rng.chance(0.5)) delete value.value;
        else value.value = "";
      }
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.operator = "Exists";
      value.value = anyString(c.rng, 1 + c.rng.int(8));
      return { value, what: `operator Exists with value ${JSON.stringify(value.value)}` };
    },
  },
  {
    rule: exact(SECONDS_RULE),
    satisfy(value, _m, c) {
      if (isObject(value) && value.tolerationSeconds !== undefined && value.effect !== "NoExecute") {
        if (c.rng.chance(0.5)) delete value.tolerationSeconds;
        else value.effect = "NoExecute";
      }
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.tolerationSeconds = c.rng.intIn(0, 3600);
      if (c.rng.chance(0.5)) delete value.effect;
      else value.effect = c.rng.pick(["NoSchedule", "PreferNoSchedule"]);
      return { value, what: `tolerationSeconds with effect ${text(value.effect)}` };
    },
  },
  stringRule(
    exact(DOTDOT_RULE),
    (s) => !(s === ".." || s.startsWith("../") || s.includes("/../") || s.endsWith("/..")),
    (s, _m, rng) => rng.pick([`${s}/..`, "/..", `/a/../${s.slice(1)}`, "/../x"]),
  ),
  stringRule(
    /^!self\.contains\('\/'\) \|\| self\.indexOf\('\/'\) <= (\d+)$/,
    (s, [, max]) => !s.includes("/") || s.indexOf("/") <= Number(max),
    (_s, [, max], rng) =>
      `${dnsSubdomain(rng, Number(max) + 1 + rng.int(8))}/${edged(rng, 1 + rng.int(6), LOWER, LOWER)}`,
  ),
  stringRule(
    exact("!self.contains('kubernetes.io/')"),
    (s) => !s.includes("kubernetes.io/"),
    (_s, _m, rng) => rng.pick(["kubernetes.io/foo", "node.kubernetes.io/x", "sub.kubernetes.io/x-y"]),
  ),
  stringRule(
    exact("!self.startsWith('requests.')"),
    (s) => !s.startsWith("requests."),
    (_s, _m, rng) => `requests.${dnsSubdomain(rng, 3 + rng.int(10))}/foo`,
  ),
  {
    // A transition rule: the API server evaluates it on updates only, and the fuzzer only creates.
    rule: exact("self == oldSelf"),
    satisfy: (value) => value,
  },
  {
    // Map keys, which a structural schema cannot bound, are bounded by CEL.
    rule: /^self\.all\(k, size\(k\) <= (\d+)\)$/,
    satisfy(value, [, max]) {
      if (isObject(value))
        for (const k of Object.keys(value)) if (codePoints(k) > Number(max)) delete value[k];
      return value;
    },
    violate(value, [, max], c) {
      if (!isObject(value) || !c.schema.additionalProperties) return undefined;
      const key = anyString(c.rng, Number(max) + 1);
      value[key] = c.gen(c.schema.additionalProperties, [...c.path, key]);
      return { value, what: `a key of ${Number(max) + 1} characters` };
    },
  },
  {
    rule: exact(MAX_UNAVAILABLE_RULE),
    generate: (_m, c) => (c.rng.chance(0.5) ? c.rng.intIn(1, 100_000) : `${c.rng.intIn(1, 100)}%`),
    satisfy(value, _m, c) {
      return maxUnavailableHolds(value) ? value : c.rng.chance(0.5) ? c.rng.intIn(1, 100_000) : "50%";
    },
    violate(_value, _m, c) {
      const value = c.rng.pick<Json>([0, -1, 100_001, "0%", "101%", "100", "5", "1.5%", "%", "", "50 %"]);
      return { value, what: `maxUnavailable ${JSON.stringify(value)}` };
    },
  },
];

interface BoundRule {
  handler: CelHandler;
  match: RegExpExecArray;
}

function rulesOf(schema: StructuralSchema, path: Path): BoundRule[] {
  return (schema["x-kubernetes-validations"] ?? []).map((rule) => {
    for (const handler of CEL_RULES) {
      const match = handler.rule.exec(rule.rule);
      if (match) return { handler, match };
    }
    throw new Error(
      `config-gen: no handler for the CEL rule ${rule.rule} at ${showPath(path)}: add it to CEL_RULES`,
    );
  });
}

// ---------------------------------------------------------------------------------------------------------
// Valid values from the schema

/** Integers for a field without bounds: the API server takes any int64. */
const UNBOUNDED_INTEGERS = [
  0,
  1,
  -1,
  42,
  3600,
  2 ** 31,
  -(2 ** 31),
  2 ** 53 - 1,
  -(2 ** 53 - 1),
  2 ** 62,
  -(2 ** 62),
];

class Generator {
  constructor(readonly rng: FuzzRng) {}

  /** A valid value for `schema`, its CEL rules satisfied. */
  gen(schema: StructuralSchema, path: Path): Json {
    const rules = rulesOf(schema, path);
    let value = this.raw(schema, path, rules);
    for (const { handler, match } of rules)
      value = handler.satisfy(value, match, this.ruleContext(schema, path, rules));
    return value;
  }

  ruleContext(schema: StructuralSchema, path: Path, rules: BoundRule[]): RuleContext {
    return {
      rng: this.rng,
      schema,
      path,
      gen: (s, p) => this.gen(s, p),
      fresh: () => this.raw(schema, path, rules),
    };
  }

  private raw(schema: StructuralSchema, path: Path, rules: BoundRule[]): Json {
    const { rng } = this;
    if (schema["x-kubernetes-int-or-string"]) {
      const source = rules.find((r) => r.handler.generate !== undefined);
      if (!source)
        throw new Error(`config-gen: int-or-string at ${showPath(path)} has no generating CEL rule`);
      return source.handler.generate!(source.match, this.ruleContext(schema, path, rules));
    }
    if (schema.enum) return clone(rng.pick(schema.enum) as Json);
    switch (schema.type) {
      case "string":
        return this.string(schema, path, rng.length(schema.minLength ?? 0, schema.maxLength ?? 40));
      case "integer":
        return this.integer(schema);
      case "number":
        return rng.intIn(schema.minimum ?? -1000, schema.maximum ?? 1000) + (rng.chance(0.5) ? 0.5 : 0);
      case "boolean":
        return rng.chance(0.5);
      case "array": {
        const min = schema.minItems ?? 0;
        const n = rng.intIn(min, Math.min(schema.maxItems ?? min + 3, min + 3));
        return Array.from({ length: n }, (_, i) => this.gen(schema.items!, [...path, i]));
      }
      case "object":
        return this.object(schema, path);
      default:
        throw new Error(`config-gen: no type at ${showPath(path)}`);
    }
  }

  /** A valid string of exactly n code points where the pattern allows that length, else of another valid length. */
  string(schema: StructuralSchema, path: Path, n: number): string {
    if (schema.pattern === undefined) return anyString(this.rng, n);
    const entry = patternEntry(schema.pattern, path);
    const re = new RegExp(schema.pattern);
    const min = schema.minLength ?? 0;
    const max = schema.maxLength ?? 64;
    // The length asked for first, then every other length the schema allows, in a random order.
    const others = Array.from({ length: Math.min(max, 80) - min + 1 }, (_, i) => min + i);
    for (let i = others.length - 1; i > 0; i--) {
      const j = this.rng.int(i + 1);
      [others[i], others[j]] = [others[j]!, others[i]!];
    }
    for (const len of [n, ...others]) {
      const s = entry.valid(this.rng, len);
      if (s === undefined) continue;
      if (!re.test(s) || codePoints(s) < min || codePoints(s) > max) {
        throw new Error(
          `config-gen: PATTERNS gave ${JSON.stringify(s)} for ${schema.pattern} at ${showPath(path)}`,
        );
      }
      return s;
    }
    throw new Error(`config-gen: no valid string for ${schema.pattern} at ${showPath(path)}`);
  }

  integer(schema: StructuralSchema): number {
    const { rng } = this;
    if (schema.minimum === undefined && schema.maximum === undefined) return rng.pick(UNBOUNDED_INTEGERS);
    const lo = (schema.minimum ?? -(2 ** 53 - 1)) + (schema.exclusiveMinimum ? 1 : 0);
    const hi = (schema.maximum ?? 2 ** 53 - 1) - (schema.exclusiveMaximum ? 1 : 0);
    // A window near the bounds when they are far apart, so values are not all huge.
    if (hi - lo > 1_000_000 && rng.chance(0.7)) {
      return rng.chance(0.5) ? rng.intIn(lo, lo + 1000) : rng.intIn(hi - 1000, hi);
    }
    return rng.intIn(lo, hi);
  }

  private object(schema: StructuralSchema, path: Path): JsonObject {
    const { rng } = this;
    const out: JsonObject = {};
    if (schema.properties) {
      const required = new Set(schema.required ?? []);
      for (const [key, child] of Object.entries(schema.properties)) {
        if (required.has(key) || rng.chance(0.5)) out[key] = this.gen(child, [...path, key]);
      }
      return out;
    }
    if (schema.additionalProperties) {
      const keyMax = keyBound(schema) ?? 40;
      for (let i = rng.int(4); i > 0; i--) {
        const key = mapKey(rng, keyMax);
        out[key] = this.gen(schema.additionalProperties, [...path, key]);
      }
    }
    return out;
  }
}

/** The bound a `self.all(k, size(k) <= N)` rule puts on a map's keys. */
function keyBound(schema: StructuralSchema): number | undefined {
  for (const rule of schema["x-kubernetes-validations"] ?? []) {
    const m = /^self\.all\(k, size\(k\) <= (\d+)\)$/.exec(rule.rule);
    if (m) return Number(m[1]);
  }
  return undefined;
}

/** A map key: label-like most of the time (`feature.example/foo`), any text of a valid length otherwise. */
function mapKey(rng: FuzzRng, max: number): string {
  const r = rng.next();
  if (r < 0.6)
    return `${dnsSubdomain(rng, 3 + rng.int(12))}/${edged(rng, 1 + rng.int(10), ALNUM, `${ALNUM}-_.`)}`.slice(
      0,
      max,
    );
  if (r < 0.8) return edged(rng, 1 + rng.int(12), ALNUM, `${ALNUM}-_.`);
  if (r < 0.9) return anyString(rng, max);
  return anyString(rng, rng.int(Math.min(max, 20) + 1));
}

// ---------------------------------------------------------------------------------------------------------
// Schemas

const SPEC_SCHEMAS = new Map<FuzzVersion, StructuralSchema>();

/** The spec schema of a served version, from the CRD exactly as `make manifests` writes it. */
export function specSchema(version: FuzzVersion): StructuralSchema {
  let schema = SPEC_SCHEMAS.get(version);
  if (!schema) {
    const served = devicePluginConfigCrd().spec.versions.find((v) => v.name === version);
    schema = served?.schema.openAPIV3Schema.properties?.spec;
    if (!schema) throw new Error(`config-gen: the CRD serves no ${version} spec`);
    SPEC_SCHEMAS.set(version, schema);
  }
  return schema;
}

/**
 * Checks that the generator can write every node of both spec schemas: a valid string for every
 * `pattern` (PATTERNS), a way to satisfy every CEL rule (CEL_RULES) and values for every int-or-string.
 * Throws naming the first node it cannot; returns how many patterns and rules it saw.
 */
export function checkSchemaCoverage(): { patterns: number; rules: number } {
  const rng = new FuzzRng(mulberry32(1));
  const patterns = new Set<string>();
  let rules = 0;
  const walk = (s: StructuralSchema | undefined, path: Path): void => {
    if (!s) return;
    const bound = rulesOf(s, path);
    rules += bound.length;
    if (s.pattern !== undefined) {
      patterns.add(s.pattern);
      new Generator(rng).string(s, path, s.minLength ?? 1);
    }
    if (s["x-kubernetes-int-or-string"] && !bound.some((r) => r.handler.generate !== undefined)) {
      throw new Error(`config-gen: int-or-string at ${showPath(path)} has no generating CEL rule`);
    }
    for (const [k, child] of Object.entries(s.properties ?? {})) walk(child, [...path, k]);
    walk(s.items, [...path, 0]);
    walk(s.additionalProperties, [...path, "*"]);
  };
  for (const v of FUZZ_VERSIONS) walk(specSchema(v), ["spec"]);
  return { patterns: patterns.size, rules };
}

/** Every property name either version knows, for near-miss unknown fields (`devfs` in v1beta1). */
function allPropertyNames(): string[] {
  const names = new Set<string>();
  const walk = (s: StructuralSchema | undefined): void => {
    if (!s) return;
    for (const [k, child] of Object.entries(s.properties ?? {})) {
      names.add(k);
      walk(child);
    }
    walk(s.items);
    walk(s.additionalProperties);
  };
  for (const v of FUZZ_VERSIONS) walk(specSchema(v));
  return [...names].sort();
}

// ---------------------------------------------------------------------------------------------------------
// Sites and mutations

/** A place in the manifest: the value at `container[key]` and the schema that governs it. */
interface Site {
  path: Path;
  schema: StructuralSchema;
  container: JsonObject | Json[];
  key: string | number;
}

function siteValue(site: Site): Json | undefined {
  return (site.container as Record<string | number, Json | undefined>)[site.key];
}

function setSite(site: Site, value: Json): void {
  (site.container as Record<string | number, Json>)[site.key] = value;
}

/** Every present value under `site` whose schema is known (not inside unknown fields). */
function sitesUnder(site: Site, out: Site[] = []): Site[] {
  out.push(site);
  const value = siteValue(site);
  const { schema } = site;
  if (Array.isArray(value) && schema.items) {
    value.forEach((_, i) =>
      sitesUnder({ path: [...site.path, i], schema: schema.items!, container: value, key: i }, out),
    );
  } else if (isObject(value)) {
    for (const key of Object.keys(value)) {
      const child = schema.properties?.[key] ?? schema.additionalProperties;
      if (child) sitesUnder({ path: [...site.path, key], schema: child, container: value, key }, out);
    }
  }
  return out;
}

interface Mutator {
  name: string;
  applies(site: Site): boolean;
  /** Mutates the manifest at `site`; returns what it did, or undefined when it could not. */
  apply(site: Site, g: Generator): string | undefined;
}

const typeOfSchema = (s: StructuralSchema): string =>
  s["x-kubernetes-int-or-string"] ? "int-or-string" : (s.type ?? "?");

/** Values of every JSON type, for wrong-type mutations; null is among them (the API server prunes it). */
const WRONG_TYPED: { type: string; values: Json[] }[] = [
  { type: "string", values: ["x", "", "1", "true", "null"] },
  { type: "integer", values: [0, 7, -3] },
  { type: "number", values: [1.5, -0.25, 1e20] },
  { type: "boolean", values: [true, false] },
  { type: "object", values: [{}, { a: 1 }] },
  { type: "array", values: [[], [1], ["x"]] },
  { type: "null", values: [null] },
];

function acceptsType(schema: StructuralSchema, type: string): boolean {
  const t = typeOfSchema(schema);
  if (t === "int-or-string") return type === "integer" || type === "string";
  if (t === "number") return type === "number" || type === "integer";
  return t === type;
}

const MUTATORS: Mutator[] = [
  {
    name: "wrong type",
    applies: (site) => site.path.length > 1,
    apply(site, g) {
      const choices = WRONG_TYPED.filter((w) => !acceptsType(site.schema, w.type));
      const { values } = g.rng.pick(choices);
      const value = clone(g.rng.pick(values));
      setSite(site, value);
      return `${showPath(site.path)}: ${JSON.stringify(value)} (wrong type for ${typeOfSchema(site.schema)})`;
    },
  },
  {
    name: "integer out of range",
    applies: (site) => site.schema.type === "integer" || site.schema["x-kubernetes-int-or-string"] === true,
    apply(site, g) {
      const { minimum, maximum } = site.schema;
      const candidates: number[] = [1.5, -0.5, 1e20, -1e20, 2 ** 63, 2 ** 53];
      if (minimum !== undefined) candidates.push(minimum - 1, minimum - 1000, -(2 ** 53));
      if (maximum !== undefined) candidates.push(maximum + 1, maximum * 2 + 7);
      const value = g.rng.pick(candidates);
      setSite(site, value);
      return `${showPath(site.path)}: ${value} (range ${minimum ?? "-"}..${maximum ?? "-"})`;
    },
  },
  {
    name: "bad enum",
    applies: (site) => site.schema.enum !== undefined,
    apply(site, g) {
      const values = (site.schema.enum ?? []).map(String);
      const sample = g.rng.pick(values);
      const candidates = [
        "",
        sample.toLowerCase(),
        sample.toUpperCase(),
        `${sample} `,
        `${sample}x`,
        // The other version's spellings.
        "packed",
        "Spread",
        "balanced",
        "numa",
        "devfs",
        "GPU",
      ].filter((c) => !values.includes(c));
      const value = g.rng.pick(candidates);
      setSite(site, value);
      return `${showPath(site.path)}: ${JSON.stringify(value)} (not in ${values.join("|")})`;
    },
  },
  {
    name: "pattern mismatch",
    applies: (site) => site.schema.pattern !== undefined,
    apply(site, g) {
      const { pattern } = site.schema;
      const value = g.rng.pick(patternEntry(pattern!, site.path).invalid);
      if (new RegExp(pattern!).test(value))
        throw new Error(`config-gen: invalid sample ${value} matches ${pattern}`);
      setSite(site, value);
      return `${showPath(site.path)}: ${JSON.stringify(value)} (does not match ${pattern})`;
    },
  },
  {
    name: "string too long",
    applies: (site) => site.schema.type === "string" && site.schema.maxLength !== undefined,
    apply(site, g) {
      const n = site.schema.maxLength! + 1;
      // Matching the pattern where one of that length can: only the length is wrong then.
      const value =
        site.schema.pattern === undefined
          ? anyString(g.rng, n)
          : (patternEntry(site.schema.pattern, site.path).valid(g.rng, n) ?? "a".repeat(n));
      setSite(site, value);
      return `${showPath(site.path)}: ${n} characters (max ${site.schema.maxLength})`;
    },
  },
  {
    name: "string too short",
    applies: (site) => (site.schema.minLength ?? 0) > 0,
    apply(site) {
      setSite(site, "");
      return `${showPath(site.path)}: "" (min ${site.schema.minLength} characters)`;
    },
  },
  {
    name: "too many items",
    applies: (site) => site.schema.type === "array" && site.schema.maxItems !== undefined,
    apply(site, g) {
      const n = site.schema.maxItems! + 1;
      setSite(
        site,
        Array.from({ length: n }, (_, i) => g.gen(site.schema.items!, [...site.path, i])),
      );
      return `${showPath(site.path)}: ${n} items (max ${site.schema.maxItems})`;
    },
  },
  {
    name: "too few items",
    applies: (site) => (site.schema.minItems ?? 0) > 0,
    apply(site) {
      setSite(site, []);
      return `${showPath(site.path)}: [] (min ${site.schema.minItems} items)`;
    },
  },
  {
    name: "missing required",
    applies: (site) => (site.schema.required?.length ?? 0) > 0 && isObject(siteValue(site)),
    apply(site, g) {
      const key = g.rng.pick(site.schema.required!);
      const value = siteValue(site) as JsonObject;
      if (value[key] === undefined) return undefined;
      delete value[key];
      return `${showPath([...site.path, key])}: removed (required)`;
    },
  },
  {
    name: "unknown field",
    applies: (site) => site.schema.properties !== undefined && isObject(siteValue(site)),
    apply(site, g) {
      const value = siteValue(site) as JsonObject;
      const known = Object.keys(site.schema.properties!);
      const near = allPropertyNames().filter((n) => !known.includes(n));
      const sibling = g.rng.pick(known);
      const candidates = [
        ...near,
        "extra",
        `${sibling[0]!.toUpperCase()}${sibling.slice(1)}`,
        `${sibling}s`,
        "status",
        "apiVersion",
        "\u00fcnknown",
        "x-y",
      ].filter((n) => !known.includes(n));
      const key = g.rng.pick(candidates);
      value[key] = g.rng.pick<Json>(["x", 1, true, {}, [], { devices: 1 }]);
      return `${showPath([...site.path, key])}: unknown field`;
    },
  },
  {
    name: "CEL rule broken",
    applies: (site) =>
      (site.schema["x-kubernetes-validations"] ?? []).some((r) => r.rule !== "self == oldSelf"),
    apply(site, g) {
      const rules = rulesOf(site.schema, site.path).filter((r) => r.handler.violate !== undefined);
      if (rules.length === 0) return undefined;
      const { handler, match } = g.rng.pick(rules);
      const result = handler.violate!(
        siteValue(site) ?? null,
        match,
        g.ruleContext(site.schema, site.path, rules),
      );
      if (!result) return undefined;
      setSite(site, result.value);
      return `${showPath(site.path)}: ${result.what}`;
    },
  },
];

/** Adds a valid value for one absent optional property somewhere, so mutations reach absent blocks too. */
function materializeOptional(root: Site, g: Generator): string | undefined {
  const candidates = sitesUnder(root).flatMap((site) => {
    const value = siteValue(site);
    if (!isObject(value) || !site.schema.properties) return [];
    return Object.entries(site.schema.properties)
      .filter(([key]) => value[key] === undefined)
      .map(([key, schema]) => ({ site, key, schema }));
  });
  if (candidates.length === 0) return undefined;
  const { site, key, schema } = g.rng.pick(candidates);
  (siteValue(site) as JsonObject)[key] = g.gen(schema, [...site.path, key]);
  return `${showPath([...site.path, key])}: added`;
}

const BAD_NAMES = ["Upper", "a_b", "-a", "a-", "a..b", "", "a".repeat(254), "a b", "\u00e4"];

function parseJsonObject(text: string): JsonObject | undefined {
  try {
    const value = JSON.parse(text) as Json;
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Mutations of the v1alpha1 conversion annotation (the fields v1alpha1 cannot express). */
function mutateAnnotation(manifest: JsonObject, g: Generator): string {
  const metadata = manifest.metadata as JsonObject;
  const annotations = isObject(metadata.annotations) ? metadata.annotations : {};
  metadata.annotations = annotations;
  const current = annotations[LOST_FIELDS_ANNOTATION];
  const choices: [string, () => void][] = [
    ["not JSON", () => (annotations[LOST_FIELDS_ANNOTATION] = "{not json")],
    ["not an object", () => (annotations[LOST_FIELDS_ANNOTATION] = g.rng.pick(["[1]", '"x"', "null", "3"]))],
    [
      "restores an invalid field",
      () =>
        (annotations[LOST_FIELDS_ANNOTATION] = g.rng.pick([
          '{"spec":{"cdi":{"kind":"x"}}}',
          '{"spec":{"bogus":1}}',
          '{"spec":{"plugin":{"priorityClassName":5}}}',
          '{"spec":{"sharing":{"failRequestsGreaterThanOne":"yes"}}}',
        ])),
    ],
    [
      "contradicts the v1alpha1 fields",
      () =>
        (annotations[LOST_FIELDS_ANNOTATION] = g.rng.pick([
          '{"spec":{"resourceName":"other.example/x"}}',
          '{"spec":{"topology":{"allocationPolicy":"NUMAAligned"}}}',
          '{"spec":{"sharing":{"replicas":7,"strategy":"TimeSlicing"}}}',
        ])),
    ],
    ["removed", () => delete annotations[LOST_FIELDS_ANNOTATION]],
  ];
  const parsed = typeof current === "string" ? parseJsonObject(current) : undefined;
  if (parsed) {
    choices.push([
      "not canonical",
      () => (annotations[LOST_FIELDS_ANNOTATION] = JSON.stringify(parsed, null, 1)),
    ]);
  }
  const [what, apply] = g.rng.pick(choices);
  apply();
  return `metadata.annotations[${LOST_FIELDS_ANNOTATION}]: ${what}`;
}

// ---------------------------------------------------------------------------------------------------------
// Cases

/** The names of generated objects: unique per seed and index, so cases never collide on a cluster. */
export function caseName(seed: number, index: number): string {
  return `cf-${seed.toString(36)}-${index}`;
}

/** One random stream per case, so any case regenerates alone from (seed, index). */
function caseRng(seed: number, index: number): FuzzRng {
  let h = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return new FuzzRng(mulberry32((h ^ (h >>> 16)) >>> 0));
}

function manifestOf(version: FuzzVersion, name: string, spec: JsonObject): JsonObject {
  return { apiVersion: `${GROUP}/${version}`, kind: "DevicePluginConfig", metadata: { name }, spec };
}

/** A valid v1beta1 spec; `type` pins the backend. */
function betaSpec(g: Generator, type?: string): JsonObject {
  const schema = specSchema("v1beta1");
  for (;;) {
    const spec = g.gen(schema, ["spec"]) as JsonObject;
    if (type === undefined || (spec.backend as JsonObject).type === type) return spec;
  }
}

/**
 * A valid base manifest. v1alpha1 comes two ways: from its own schema (Mock, DevFS, PCI), or as the
 * conversion of a valid v1beta1 manifest, which carries what v1alpha1 cannot say (NVIDIA settings, cdi,
 * plugin resources, ...) in the conversion annotation; v1alpha1 NVIDIA configs exist only that way.
 */
function base(g: Generator, version: FuzzVersion, name: string): { manifest: JsonObject; origin: string } {
  if (version === "v1beta1") {
    const spec = betaSpec(g);
    return {
      manifest: manifestOf(version, name, spec),
      origin: `v1beta1 ${text((spec.backend as JsonObject).type)}`,
    };
  }
  if (g.rng.chance(0.5)) {
    const spec = g.gen(specSchema("v1alpha1"), ["spec"]) as JsonObject;
    if (spec.backend !== "NVIDIA") {
      return {
        manifest: manifestOf(version, name, spec),
        origin: `v1alpha1 ${text(spec.backend)} (schema)`,
      };
    }
  }
  const beta = manifestOf("v1beta1", name, betaSpec(g, g.rng.chance(0.4) ? "NVIDIA" : undefined));
  const alpha = toV1alpha1(beta as unknown as BetaObject) as unknown as JsonObject;
  const converted = alpha.metadata && isObject(alpha.metadata) && isObject(alpha.metadata.annotations);
  return {
    manifest: JSON.parse(JSON.stringify(alpha)) as JsonObject,
    origin: `v1alpha1 ${text((alpha.spec as JsonObject).backend)} (converted from v1beta1${converted ? ", with annotation" : ""})`,
  };
}

/**
 * Case `index` of a run: about a third valid as generated, the rest with one to three mutations. Pure:
 * the same (seed, index) always gives the same case.
 */
export function generateConfigCase(seed: number, index: number): ConfigCase {
  const g = new Generator(caseRng(seed, index));
  const { rng } = g;
  const version: FuzzVersion = rng.chance(0.5) ? "v1beta1" : "v1alpha1";
  const { manifest, origin } = base(g, version, caseName(seed, index));
  const mutations: string[] = [];
  const r = rng.next();
  const count = r < 0.33 ? 0 : r < 0.78 ? 1 : 2 + rng.int(2);
  const root: Site = { path: ["spec"], schema: specSchema(version), container: manifest, key: "spec" };
  for (let i = 0; i < count; i++) {
    const kind = rng.next();
    if (kind < 0.04) {
      const name = rng.pick(BAD_NAMES);
      (manifest.metadata as JsonObject).name = name;
      mutations.push(
        `metadata.name: ${JSON.stringify(name.length > 40 ? `${name.slice(0, 20)}...(${name.length})` : name)}`,
      );
      continue;
    }
    if (kind < 0.12 && version === "v1alpha1") {
      mutations.push(mutateAnnotation(manifest, g));
      continue;
    }
    if (rng.chance(0.3)) {
      const added = materializeOptional(root, g);
      if (added) mutations.push(added);
    }
    const sites = sitesUnder(root);
    for (let attempt = 0; attempt < 20; attempt++) {
      const mutator = rng.pick(MUTATORS);
      const applicable = sites.filter((s) => mutator.applies(s));
      if (applicable.length === 0) continue;
      const what = mutator.apply(rng.pick(applicable), g);
      if (what) {
        mutations.push(`${mutator.name}: ${what}`);
        break;
      }
    }
  }
  return { seed, index, version, manifest, origin, mutations };
}

/** Cases [from, from + count) of a run. */
export function generateConfigCases(seed: number, count: number, from = 0): ConfigCase[] {
  return Array.from({ length: count }, (_, i) => generateConfigCase(seed, from + i));
}
