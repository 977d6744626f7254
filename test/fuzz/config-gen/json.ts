// The generator's JSON: the values a manifest is made of, paths into it, and the small helpers on both.

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export type Path = (string | number)[];

/** `spec.backend.devFS.paths[0].glob`, for descriptions only. */
export function showPath(path: readonly (string | number)[]): string {
  let out = "";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : out === "" ? part : `.${part}`;
  return out;
}

/** A value in a description: strings as they are, anything else as JSON. */
export function text(value: Json | undefined): string {
  return typeof value === "string" ? value : (JSON.stringify(value) ?? "unset");
}

export function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function clone<T extends Json>(value: T): T {
  return structuredClone(value);
}

/** Length as the API server counts it (Go runes) and zod's `.max()` does: code points, not UTF-16 units. */
export function codePoints(s: string): number {
  return [...s].length;
}
