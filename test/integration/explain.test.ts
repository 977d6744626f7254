// `kubectl explain` on a real API server: every field under a DevicePluginConfig's spec, in both served
// versions, has a description, as the API server publishes the CRD (OpenAPI v3) and as kubectl shows it.
import { beforeAll, describe, expect, it } from "vitest";
import { devicePluginConfigCrd, type StructuralSchema } from "../../src/api/crd.js";
import { installCrds, kubectl, waitFor } from "../cluster/helpers.js";
import { explainPaths } from "../cluster/explain-paths.js";

const crd = devicePluginConfigCrd();
const versions = crd.spec.versions.filter((v) => v.served).map((v) => v.name);
const RESOURCE = crd.spec.names.plural;

function specOf(version: string): StructuralSchema {
  const spec = crd.spec.versions.find((v) => v.name === version)?.schema.openAPIV3Schema.properties?.["spec"];
  if (!spec) throw new Error(`the CRD has no spec in ${version}`);
  return spec;
}

/** The DESCRIPTION section of `kubectl explain`'s output, empty when kubectl shows `<empty>`. */
function explainedDescription(output: string): string {
  const section =
    /^DESCRIPTION:\n([\s\S]*?)(?:\n(?:FIELDS|FIELD|GROUP|KIND|VERSION):|$)/m.exec(output)?.[1] ?? "";
  const text = section.trim();
  return text === "<empty>" ? "" : text;
}

interface OpenApiSchema {
  description?: string;
  properties?: Record<string, OpenApiSchema>;
  items?: OpenApiSchema;
  allOf?: OpenApiSchema[];
}

beforeAll(async () => {
  await installCrds("dpo-explain-test");
  // The API server publishes a CRD's OpenAPI a moment after it is Established; kubectl explain reads it.
  for (const version of versions) {
    await waitFor(
      `kubectl explain ${RESOURCE}.spec --api-version=${crd.spec.group}/${version}`,
      async (observe) => {
        const r = await kubectl(
          ["explain", `${RESOURCE}.spec`, `--api-version=${crd.spec.group}/${version}`],
          {
            allowFailure: true,
          },
        );
        observe(r.exitCode === 0 ? r.stdout.slice(0, 300) : r.stderr);
        return r.exitCode === 0 && explainedDescription(r.stdout) !== "";
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  }
});

describe.each(versions)("%s", (version) => {
  const apiVersion = `${crd.spec.group}/${version}`;
  const paths = explainPaths(specOf(version));

  it("the published OpenAPI v3 has a description on every field under spec", async () => {
    const raw = await kubectl(["get", "--raw", `/openapi/v3/apis/${apiVersion}`]);
    const doc = JSON.parse(raw.stdout) as { components: { schemas: Record<string, OpenApiSchema> } };
    const root = Object.entries(doc.components.schemas).find(([name]) =>
      name.endsWith(`.${version}.${crd.spec.names.kind}`),
    )?.[1];
    expect(root, Object.keys(doc.components.schemas).join(", ")).toBeDefined();
    const at = (path: string): OpenApiSchema | undefined => {
      let node: OpenApiSchema | undefined = root;
      for (const name of path.split(".")) {
        node = node?.items ?? node;
        node = node?.properties?.[name] ?? node?.allOf?.find((s) => s.properties)?.properties?.[name];
      }
      return node;
    };
    const missing = paths.filter((p) => (at(p.path)?.description ?? "").trim() === "").map((p) => p.path);
    expect(missing).toEqual([]);
  });

  it(`kubectl explain ${RESOURCE}.<path> shows a description for each of the fields`, async () => {
    const results: { path: string; exitCode: number; description: string; stderr: string }[] = [];
    // A few at a time: each kubectl reads the cached OpenAPI document and exits.
    const queue = [...paths];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let p = queue.shift(); p !== undefined; p = queue.shift()) {
          const r = await kubectl(["explain", `${RESOURCE}.${p.path}`, `--api-version=${apiVersion}`], {
            allowFailure: true,
          });
          results.push({
            path: p.path,
            exitCode: r.exitCode,
            description: explainedDescription(r.stdout),
            stderr: r.stderr.trim(),
          });
        }
      }),
    );
    expect(results).toHaveLength(paths.length);
    const failed = results.filter((r) => r.exitCode !== 0 || r.description === "");
    expect(failed).toEqual([]);
  });
});
