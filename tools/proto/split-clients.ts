// Moves the @grpc/grpc-js clients out of each file ts-proto generated (tools/proto/generate.sh runs this on
// its output): api.ts keeps the messages, the service definitions (paths, streaming flags, serializers) and
// the typed server interfaces, and loads nothing at run time but the protobuf wire reader; clients.ts
// re-exports api.ts and adds the grpc-js client constructors. The plugin's own gRPC layer serves and calls
// from api.ts alone, so the plugin process never loads grpc-js (ADR 0008); tests and tools that talk to
// it as the kubelet does use the grpc-js clients from clients.ts.
// Usage: node --import tsx tools/proto/split-clients.ts <generated directory>
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The grpc-js import block ts-proto writes at the top of a file with services. */
const GRPC_IMPORT = /^import \{\n([^}]*)\} from "@grpc\/grpc-js";\n/m;

/** A top-level block from its first line to the next line that closes it at column 0 (`}` or `};`). */
function cutBlocks(source: string, start: RegExp): { rest: string; blocks: string[] } {
  const blocks: string[] = [];
  let rest = source;
  for (;;) {
    const m = start.exec(rest);
    if (m === null) return { rest, blocks };
    const end = /^\};?\n/m;
    end.lastIndex = 0;
    const tail = rest.slice(m.index);
    const close = end.exec(tail);
    if (close === null) throw new Error(`split-clients: no end for the block at ${JSON.stringify(m[0])}`);
    const length = close.index + close[0].length;
    blocks.push(tail.slice(0, length));
    // The blank line after the block goes with it.
    const after = rest.slice(m.index + length).replace(/^\n/, "");
    rest = rest.slice(0, m.index) + after;
  }
}

export function splitClients(source: string, header: string): { api: string; clients: string } | undefined {
  const imported = GRPC_IMPORT.exec(source);
  if (imported === null) return undefined;
  const names = imported[1]!
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((s) => ({ name: s.replace(/^type /, ""), typeOnly: s.startsWith("type ") }));
  const first = cutBlocks(source, /^export interface \w+Client extends Client \{$/m);
  const interfaces = first.blocks;
  const cut = cutBlocks(first.rest, /^export const \w+Client = makeGenericClientConstructor\($/m);
  const rest = cut.rest;
  const clientText = [...interfaces, ...cut.blocks].join("\n");
  const body = rest.replace(GRPC_IMPORT, "");
  const uses = (text: string, name: string): boolean => new RegExp(`\\b${name}\\b`).test(text);
  const apiTypes = names.filter((n) => uses(body, n.name)).map((n) => n.name);
  const api = rest.replace(
    GRPC_IMPORT,
    apiTypes.length === 0
      ? ""
      : `import type {\n${apiTypes.map((n) => `  ${n},\n`).join("")}} from "@grpc/grpc-js";\n`,
  );
  const clientImports = names
    .filter((n) => uses(clientText, n.name))
    .map((n) => `  ${n.typeOnly ? "type " : ""}${n.name},\n`);
  // The messages and services the clients name, from api.ts.
  const exported = [...api.matchAll(/^export (?:const|type|interface|enum) (\w+)/gm)].map((m) => m[1]!);
  const fromApi = [...new Set(exported)].filter((n) => uses(clientText, n)).sort();
  // The constructors take the service definitions as values; messages appear in the clients' types only.
  const services = new Set(cut.blocks.map((b) => /makeGenericClientConstructor\(\n\s*(\w+),/.exec(b)?.[1]));
  const clients =
    `${header}\n\n/* eslint-disable */\n` +
    `import {\n${clientImports.join("")}} from "@grpc/grpc-js";\n` +
    `import {\n${fromApi.map((n) => `  ${services.has(n) ? "" : "type "}${n},\n`).join("")}} from "./api.js";\n\n` +
    `export * from "./api.js";\n\n` +
    clientText;
  return { api, clients };
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : name === "api.ts" ? [path] : [];
  });
}

const dir = process.argv[2];
if (dir === undefined) {
  process.stderr.write("usage: split-clients.ts <generated directory>\n");
  process.exit(2);
}
for (const file of walk(dir)) {
  const source = readFileSync(file, "utf8");
  const header = source.split("\n").slice(0, 2).join("\n");
  const split = splitClients(source, header);
  if (split === undefined) continue;
  writeFileSync(file, split.api);
  writeFileSync(join(file, "..", "clients.ts"), split.clients);
}
