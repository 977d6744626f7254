// CEL_RULES: how to satisfy and how to break every `x-kubernetes-validations` rule of both schemas.
import {
  checkDefaultDriverName,
  DRA_DEFAULT_DRIVER_RULE,
  ENV_LOADER_RULE,
  ENV_RESERVED_RULE,
  isAnnotationKey,
  isLoaderEnvName,
  LOADER_ENV_NAMES,
  isReservedAnnotationKey,
  isReservedEnvName,
  POD_ANNOTATION_KEY_RULE,
  POD_ANNOTATION_RESERVED_RULE,
  RESERVED_ENV_NAMES,
  INTEGER_VALUE,
  ONE_INTEGER_RULE,
  VALUES_FORBIDDEN_RULE,
  VALUES_REQUIRED_RULE,
} from "../../../src/api/v1beta1/spec.js";
import type { StructuralSchema } from "../../../src/api/crd.js";
import type { FuzzRng } from "./fuzz-rng.js";
import { codePoints, isObject, showPath, text, type Json, type JsonObject, type Path } from "./json.js";
import { ALNUM, anyString, dnsSubdomain, edged, LOWER } from "./patterns.js";
import { DEVFS_GROUP_CEL_HANDLERS } from "./cel-rules-devfs.js";

export interface RuleContext {
  rng: FuzzRng;
  /** The schema node carrying the rule. */
  schema: StructuralSchema;
  path: Path;
  /** A valid value for a schema node (with its own rules satisfied). */
  gen(schema: StructuralSchema, path: Path): Json;
  /** A fresh valid value for the node carrying the rule, without its rules applied (strings). */
  fresh(): Json;
}

export interface CelHandler {
  /** The rule text; captures are handed to the functions. */
  rule: RegExp;
  /** Returns the value (changed in place or new) so that the rule holds. */
  satisfy: (value: Json, m: RegExpExecArray, c: RuleContext) => Json;
  /** Breaks the rule; returns the new value and what was done, or undefined where it cannot be broken here. */
  violate?: (value: Json, m: RegExpExecArray, c: RuleContext) => { value: Json; what: string } | undefined;
  /** Valid values for a node the structural schema cannot type (x-kubernetes-int-or-string). */
  generate?: (m: RegExpExecArray, c: RuleContext) => Json;
}

export function exact(rule: string): RegExp {
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
export const CEL_RULES: CelHandler[] = [
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
    // NVIDIA: kmsgPath or the deprecated dmesgPath, not both.
    rule: exact("!has(self.kmsgPath) || !has(self.dmesgPath)"),
    satisfy(value) {
      if (isObject(value) && value.kmsgPath !== undefined) delete value.dmesgPath;
      return value;
    },
    violate(value) {
      if (!isObject(value)) return undefined;
      value.kmsgPath = "/dev/kmsg";
      value.dmesgPath = "/usr/bin/dmesg";
      return { value, what: "both kmsgPath and dmesgPath" };
    },
  },
  {
    // A MIG profile only with strategy Mixed (ADR 0007).
    rule: exact("!has(self.profile) || (has(self.strategy) && self.strategy == 'Mixed')"),
    satisfy(value) {
      if (isObject(value) && value.profile !== undefined && value.strategy !== "Mixed") delete value.profile;
      return value;
    },
    violate(value) {
      if (!isObject(value)) return undefined;
      value.strategy = "Single";
      value.profile = "1g.10gb";
      return { value, what: "a MIG profile with strategy Single" };
    },
  },
  {
    // Mock ids: one per device (a takeover's ids); unique by the list's type (set).
    rule: exact("!has(self.ids) || size(self.ids) == self.devices"),
    satisfy(value) {
      if (!isObject(value) || !Array.isArray(value.ids)) return value;
      const devices = typeof value.devices === "number" ? value.devices : 0;
      if (value.ids.length !== devices) delete value.ids;
      return value;
    },
    violate(value) {
      if (!isObject(value) || typeof value.devices !== "number" || value.devices > 64) return undefined;
      value.ids = Array.from({ length: value.devices + 1 }, (_, i) => `Dev-${i}`);
      return { value, what: `${value.devices + 1} ids for ${value.devices} devices` };
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
    // spec.takeover stays as created (TAKEOVER_STAYS_RULE): a transition rule too.
    rule: exact("has(oldSelf.takeover) == has(self.takeover)"),
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
    // Pod annotation keys are qualified names: a bad key becomes a good one holding the same value.
    rule: exact(POD_ANNOTATION_KEY_RULE),
    satisfy(value, _m, c) {
      if (!isObject(value)) return value;
      for (const [k, v] of Object.entries(value)) {
        if (isAnnotationKey(k)) continue;
        delete value[k];
        value[
          `${dnsSubdomain(c.rng, 1 + c.rng.int(30))}/${edged(c.rng, 1 + c.rng.int(40), ALNUM, `${ALNUM}-_.`)}`
        ] = v;
      }
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value) || !c.schema.additionalProperties) return undefined;
      const key = c.rng.pick([
        "a b",
        "-x",
        "x-",
        "example.com/",
        "/x",
        "a/b/c",
        `example.com/${"n".repeat(64)}`,
      ]);
      value[key] = c.gen(c.schema.additionalProperties, [...c.path, key]);
      return { value, what: `the annotation key ${JSON.stringify(key)}` };
    },
  },
  {
    // ... outside the operator's own domain.
    rule: exact(POD_ANNOTATION_RESERVED_RULE),
    satisfy(value) {
      if (isObject(value))
        for (const k of Object.keys(value)) if (isReservedAnnotationKey(k)) delete value[k];
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value) || !c.schema.additionalProperties) return undefined;
      const key = c.rng.pick(["dpo.dev/config-hash", "dpo.dev/x", "upgrade.dpo.dev/y"]);
      value[key] = c.gen(c.schema.additionalProperties, [...c.path, key]);
      return { value, what: `the annotation key ${key}` };
    },
  },
  {
    // The plugin container's extra env names none the operator sets.
    rule: exact(ENV_RESERVED_RULE),
    satisfy(value, _m, c) {
      for (let i = 0; i < 200; i++) {
        if (!isObject(value) || typeof value.name !== "string" || !isReservedEnvName(value.name))
          return value;
        value.name = c.gen(c.schema.properties!.name!, [...c.path, "name"]);
      }
      throw new Error(`config-gen: cannot satisfy ${ENV_RESERVED_RULE} at ${showPath(c.path)}`);
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.name = c.rng.pick([...RESERVED_ENV_NAMES, "DPO_LOG_LEVEL", "DPO_X"]);
      return { value, what: `the env name ${value.name}` };
    },
  },
  {
    // ... and none that changes how the runtime loads code or whom it trusts.
    rule: exact(ENV_LOADER_RULE),
    satisfy(value, _m, c) {
      for (let i = 0; i < 200; i++) {
        if (!isObject(value) || typeof value.name !== "string" || !isLoaderEnvName(value.name)) return value;
        value.name = c.gen(c.schema.properties!.name!, [...c.path, "name"]);
      }
      throw new Error(`config-gen: cannot satisfy ${ENV_LOADER_RULE} at ${showPath(c.path)}`);
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.name = c.rng.pick([...LOADER_ENV_NAMES, "NODE_OPTIONS", "LD_PRELOAD", "NODE_EXTRA_CA_CERTS"]);
      return { value, what: `the env name ${value.name}` };
    },
  },
  {
    // A node selector requirement: In and NotIn take values...
    rule: exact(VALUES_REQUIRED_RULE),
    satisfy(value, _m, c) {
      if (!isObject(value) || (value.operator !== "In" && value.operator !== "NotIn")) return value;
      if (!Array.isArray(value.values) || value.values.length === 0)
        value.values = [edged(c.rng, 1 + c.rng.int(8), LOWER, LOWER)];
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.operator = c.rng.pick(["In", "NotIn"]);
      if (c.rng.chance(0.5)) delete value.values;
      else value.values = [];
      return { value, what: `operator ${text(value.operator)} without values` };
    },
  },
  {
    // ... Exists and DoesNotExist take none ...
    rule: exact(VALUES_FORBIDDEN_RULE),
    satisfy(value, _m, c) {
      if (!isObject(value) || (value.operator !== "Exists" && value.operator !== "DoesNotExist"))
        return value;
      if (Array.isArray(value.values) && value.values.length > 0) {
        if (c.rng.chance(0.5)) delete value.values;
        else value.values = [];
      }
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.operator = c.rng.pick(["Exists", "DoesNotExist"]);
      value.values = [edged(c.rng, 1 + c.rng.int(8), LOWER, LOWER)];
      return { value, what: `operator ${text(value.operator)} with values` };
    },
  },
  {
    // ... and Gt and Lt one integer.
    rule: exact(ONE_INTEGER_RULE),
    satisfy(value, _m, c) {
      if (!isObject(value) || (value.operator !== "Gt" && value.operator !== "Lt")) return value;
      const v = value.values;
      if (!Array.isArray(v) || v.length !== 1 || typeof v[0] !== "string" || !INTEGER_VALUE.test(v[0]))
        value.values = [String(c.rng.intIn(-1000, 1000))];
      return value;
    },
    violate(value, _m, c) {
      if (!isObject(value)) return undefined;
      value.operator = c.rng.pick(["Gt", "Lt"]);
      value.values = c.rng.pick<Json>([[], ["1", "2"], ["80Gi"], ["1234567890123456789"], ["+5"]]);
      return { value, what: `operator ${text(value.operator)} with values ${JSON.stringify(value.values)}` };
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
  ...DEVFS_GROUP_CEL_HANDLERS,
];

export interface BoundRule {
  handler: CelHandler;
  match: RegExpExecArray;
}

export function rulesOf(schema: StructuralSchema, path: Path): BoundRule[] {
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
