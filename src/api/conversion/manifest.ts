// Converts the DevicePluginConfigs in a YAML manifest stream to another API version, for `dpo convert`:
// other documents are left byte for byte, converted ones keep their comments where the nodes survive.
import {
  isMap,
  isScalar,
  isSeq,
  parseAllDocuments,
  YAMLMap,
  type Document,
  type Node,
  type Pair,
  type ParsedNode,
} from "yaml";
import { validateAnyVersion, withoutNullFields, type FieldError } from "../validate.js";
import { documentTextExact } from "../yaml-text.js";
import type { V1ALPHA1_API_VERSION } from "../v1alpha1/config.js";
import { API_VERSION, GROUP, KIND } from "../v1beta1/config.js";
import { toV1alpha1, toV1beta1, type AlphaObject, type BetaObject } from "./convert.js";
import { isJsonObject } from "./merge-patch.js";

export type TargetApiVersion = typeof API_VERSION | typeof V1ALPHA1_API_VERSION;

/** A reason a document could not be converted, located by document index and field path. */
export interface DocumentProblem {
  /** Index of the document in the stream, counting empty ones, as `dpo validate` counts them. */
  document: number;
  path: string;
  message: string;
}

export type ConvertManifestsResult =
  | { ok: true; text: string; converted: number; documents: number; warnings: string[] }
  | { ok: false; documents: number; problems: DocumentProblem[] };

type Path = readonly string[];

/**
 * Where nodes move between the versions, so comments on them move too: [v1alpha1 path, v1beta1 path].
 * Values that change (policy names, sharedDevNum 1 → strategy None) are fixed afterwards by `reconcile`.
 */
const MOVES: readonly (readonly [Path, Path])[] = [
  [
    ["spec", "mock"],
    ["spec", "backend", "mock"],
  ],
  [
    ["spec", "devfs"],
    ["spec", "backend", "devFS"],
  ],
  [
    ["spec", "pci"],
    ["spec", "backend", "pci"],
  ],
  [
    ["spec", "sharedDevNum"],
    ["spec", "sharing", "replicas"],
  ],
  [
    ["spec", "preferredAllocationPolicy"],
    ["spec", "topology", "allocationPolicy"],
  ],
  [
    ["spec", "image"],
    ["spec", "plugin", "image"],
  ],
  [
    ["spec", "logLevel"],
    ["spec", "plugin", "logLevel"],
  ],
];

function keyOf(pair: Pair): unknown {
  return isScalar(pair.key) ? pair.key.value : pair.key;
}

function pairIn(map: YAMLMap, key: string): Pair | undefined {
  return map.items.find((p) => keyOf(p) === key);
}

function mapAt(root: unknown, path: Path): YAMLMap | undefined {
  let node: unknown = root;
  for (const key of path) {
    if (!isMap(node)) return undefined;
    node = pairIn(node, key)?.value;
  }
  return isMap(node) ? node : undefined;
}

/** Moves the pair at `from` to `to` (renaming its key), creating missing parent maps. */
function movePair(doc: Document, from: Path, to: Path): void {
  const source = mapAt(doc.contents, from.slice(0, -1));
  const pair = source && pairIn(source, from[from.length - 1] as string);
  if (!source || !pair) return;
  let target = doc.contents;
  for (const key of to.slice(0, -1)) {
    if (!isMap(target)) return;
    let child = pairIn(target, key);
    if (!child) {
      child = doc.createPair(key, new YAMLMap());
      target.items.push(child);
    }
    if (!isMap(child.value)) return;
    target = child.value;
  }
  if (!isMap(target) || pairIn(target, to[to.length - 1] as string)) return;
  source.items.splice(source.items.indexOf(pair), 1);
  if (isScalar(pair.key)) pair.key.value = to[to.length - 1];
  else pair.key = doc.createNode(to[to.length - 1]);
  target.items.push(pair);
}

/** v1alpha1's `backend: Mock` becomes v1beta1's `backend: {type: Mock}`, keeping the scalar's comment. */
function wrapBackendType(doc: Document): void {
  const spec = mapAt(doc.contents, ["spec"]);
  const backend = spec && pairIn(spec, "backend");
  if (!backend || !isScalar(backend.value)) return;
  const wrapped = new YAMLMap();
  wrapped.items.push(doc.createPair("type", null));
  (wrapped.items[0] as Pair).value = backend.value;
  backend.value = wrapped;
}

/** v1beta1's `backend: {type: Mock}` becomes `backend: Mock`, once the members have moved out. */
function unwrapBackendType(doc: Document): void {
  const spec = mapAt(doc.contents, ["spec"]);
  const backend = spec && pairIn(spec, "backend");
  const type = backend && isMap(backend.value) ? pairIn(backend.value, "type") : undefined;
  if (backend && type && isScalar(type.value)) backend.value = type.value;
}

/**
 * Makes a node hold `value`, keeping every node (and so every comment) whose place in the tree survives:
 * scalars change their value in place, maps drop the keys `value` lacks, gain the ones it has and follow
 * its key order, sequences are reconciled item by item.
 */
function reconcile(doc: Document, node: unknown, value: unknown): unknown {
  if (isJsonObject(value) && isMap(node)) {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined);
    const pairs = new Map<unknown, Pair>(node.items.map((p) => [keyOf(p), p]));
    node.items = keys.map((key) => {
      const pair = pairs.get(key);
      if (!pair) return doc.createPair(key, value[key]);
      pair.value = reconcile(doc, pair.value, value[key]);
      return pair;
    });
    return node;
  }
  if (Array.isArray(value) && isSeq(node)) {
    node.items = value.map((item, i) =>
      i < node.items.length ? reconcile(doc, node.items[i], item) : doc.createNode(item),
    );
    return node;
  }
  if (isScalar(node) && (value === null || typeof value !== "object")) {
    if (node.value !== value) node.value = value;
    return node;
  }
  const created = doc.createNode(value);
  if (isScalar(node) || isMap(node) || isSeq(node)) {
    created.commentBefore = node.commentBefore;
    created.comment = node.comment;
  }
  return created;
}

/** Rewrites a parsed document into `value`, moving the nodes that changed place between the versions. */
function rewrite(doc: Document, value: object, to: TargetApiVersion): void {
  if (to === API_VERSION) {
    wrapBackendType(doc);
    for (const [alpha, beta] of MOVES) movePair(doc, alpha, beta);
  } else {
    for (const [alpha, beta] of MOVES) movePair(doc, beta, alpha);
    unwrapBackendType(doc);
  }
  doc.contents = reconcile(doc, doc.contents, value) as Node;
}

function isDevicePluginConfig(value: unknown): boolean {
  if (!isJsonObject(value)) return false;
  return (
    value.kind === KIND && typeof value.apiVersion === "string" && value.apiVersion.startsWith(`${GROUP}/`)
  );
}

/**
 * Converts every dpo.dev DevicePluginConfig in a YAML stream to `to`. Documents of other kinds, and those
 * already in `to`, come out exactly as they went in. Every DevicePluginConfig (those already in `to` too)
 * is validated in its own version first: an invalid one fails the whole stream with field paths, so
 * nothing half-converted is ever printed.
 */
export function convertManifests(text: string, to: TargetApiVersion): ConvertManifestsResult {
  const docs = parseAllDocuments(text, { prettyErrors: true, uniqueKeys: true }) as Document<ParsedNode>[];
  const problems: DocumentProblem[] = [];
  const warnings: string[] = [];
  const chunks: string[] = [];
  let converted = 0;
  let offset = 0;
  docs.forEach((doc, index) => {
    const end = doc.range?.[2] ?? text.length;
    const original = text.slice(offset, index === docs.length - 1 ? text.length : end);
    offset = end;
    if (doc.errors.length > 0) {
      problems.push({
        document: index,
        path: "<document>",
        message: `YAML: ${doc.errors.map((e) => e.message).join("; ")}`,
      });
      return;
    }
    const raw: unknown = doc.toJS({ maxAliasCount: 100 });
    if (!isDevicePluginConfig(raw)) {
      chunks.push(original);
      return;
    }
    // Validated even when already in `to`, so a converted repository is also a checked one. Null fields
    // mean what they mean to the API server, nothing, and are left out of the conversion.
    const value = withoutNullFields(raw);
    const valid = validateAnyVersion(value);
    if (!valid.ok) {
      problems.push(...valid.errors.map((e: FieldError) => ({ document: index, ...e })));
      return;
    }
    if (valid.apiVersion === to) {
      chunks.push(original);
      return;
    }
    const result =
      to === API_VERSION
        ? toV1beta1(value as AlphaObject)
        : { ok: true as const, value: toV1alpha1(value as BetaObject), warnings: [] };
    if (!result.ok) {
      problems.push({ document: index, path: "<root>", message: result.error });
      return;
    }
    warnings.push(...result.warnings);
    rewrite(doc, result.value, to);
    chunks.push(documentTextExact(doc, { lineWidth: 0 }));
    converted++;
  });
  if (problems.length > 0) return { ok: false, documents: docs.length, problems };
  return { ok: true, text: chunks.join(""), converted, documents: docs.length, warnings };
}
