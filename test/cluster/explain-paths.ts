// The field paths `kubectl explain devicepluginconfigs.<path>` accepts under spec, read from a CRD version's
// schema: lists are transparent (tolerations.key), a map's values have no path of their own.
import type { StructuralSchema } from "../../src/api/crd.js";

export interface ExplainPath {
  /** `spec.tolerations.key`, as kubectl explain spells it. */
  path: string;
  schema: StructuralSchema;
}

/** `root` itself and every property below it, depth first, in the schema's order. */
export function explainPaths(root: StructuralSchema, rootPath = "spec"): ExplainPath[] {
  const out: ExplainPath[] = [{ path: rootPath, schema: root }];
  const walk = (schema: StructuralSchema, path: string): void => {
    // A list's item is explained at the list's own path: its properties hang below the list's name.
    const object = schema.items ?? schema;
    for (const [name, child] of Object.entries(object.properties ?? {})) {
      const childPath = `${path}.${name}`;
      out.push({ path: childPath, schema: child });
      walk(child, childPath);
    }
  };
  walk(root, rootPath);
  return out;
}
