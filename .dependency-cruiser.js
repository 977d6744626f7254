// Which source folders may import which: the layers of src/, and no cycles in src/, tools/ or bench/,
// checked by `make lint` (depcruise src tools bench) and by test/unit/layers.test.ts, which also proves
// that each kind of rule fires.
//
// A layer imports only from layers of a lower rank, never from one beside it:
//   0  api, observability, version             the CRD schemas; metrics, health endpoints and logs; the build's
//                                               version
//   1  contract, kube, cdi                      what the operator and the plugin must agree on (names, formats
//                                               and counts of the API's objects); the controller machinery on
//                                               the API server; CDI specs
//   2  operator, plugin-runtime, webhook        the three programs' logic, none importing another's
//   3  cli                                      the entry points, which wire the programs together
// log.ts sits in observability, beside the metrics and health endpoints the same processes serve.
// version.ts stays at the root of src/: it finds package.json and dist/build-info.json relative to its
// own file, one level below the package root in src/, in dist/ and in the bundle alike.

/** @type {Record<string, { rank: number; path: string }>} */
const LAYERS = {
  api: { rank: 0, path: "^src/api/" },
  observability: { rank: 0, path: "^src/observability/" },
  version: { rank: 0, path: "^src/version\\.ts$" },
  contract: { rank: 1, path: "^src/contract/" },
  kube: { rank: 1, path: "^src/kube/" },
  cdi: { rank: 1, path: "^src/cdi/" },
  operator: { rank: 2, path: "^src/operator/" },
  "plugin-runtime": { rank: 2, path: "^src/plugin-runtime/" },
  webhook: { rank: 2, path: "^src/webhook/" },
  cli: { rank: 3, path: "^src/cli/" },
};

const layerPaths = Object.values(LAYERS).map((layer) => layer.path);

/** @type {import("dependency-cruiser").IForbiddenRuleType[]} */
const folderCycleRules = [
  {
    name: "no-folder-cycles",
    severity: "error",
    comment: "Folders, at every depth, import each other in one direction only.",
    scope: "folder",
    from: { path: "^src/" },
    to: { circular: true },
  },
  {
    name: "no-folder-cycles",
    severity: "error",
    comment:
      "Folders of tools/ and bench/ import each other in one direction only (a real node builds on " +
      "tools/cluster; the cluster stops it through the step it recorded, tools/cluster/stop-hooks.ts).",
    scope: "folder",
    from: { path: "^(tools|bench)/" },
    to: { circular: true },
  },
];

/** @type {import("dependency-cruiser").IForbiddenRuleType[]} */
const layerRules = Object.entries(LAYERS).map(([name, layer]) => {
  const below = Object.entries(LAYERS).filter(([, other]) => other.rank < layer.rank);
  return {
    name: `layer-${name}`,
    severity: "error",
    comment:
      below.length === 0
        ? `${name} is at the bottom: it imports nothing else of src/.`
        : `${name} imports only from ${below.map(([other]) => other).join(", ")}.`,
    from: { path: layer.path },
    to: { path: "^src/", pathNot: [layer.path, ...below.map(([, other]) => other.path)] },
  };
});

/** @type {import("dependency-cruiser").IConfiguration} */
export default {
  forbidden: [
    ...layerRules,
    {
      name: "not-in-a-layer",
      severity: "error",
      comment: "Every file under src/ belongs to a layer above; add a new folder to the table with its rank.",
      from: { path: "^src/", pathNot: layerPaths },
      to: {},
    },
    {
      name: "not-in-a-layer",
      severity: "error",
      comment: "Every file under src/ belongs to a layer above; add a new folder to the table with its rank.",
      from: {},
      to: { path: "^src/", pathNot: layerPaths },
    },
    ...folderCycleRules,
    {
      name: "no-circular",
      severity: "error",
      comment: "Modules import each other in one direction only; there are no cycles to keep.",
      from: { path: "^(src|tools|bench)/" },
      to: { circular: true },
    },
    {
      name: "rollout-core-siblings",
      severity: "error",
      comment:
        "The rollout core (ADR 0006): render, upgrade and status are siblings over operator/model and import " +
        "none of each other; the reconcile steps in operator/controllers wire them together.",
      from: { path: "^src/operator/(render|upgrade|status)/" },
      to: { path: "^src/operator/(render|upgrade|status|controllers)/", pathNot: "^src/operator/$1/" },
    },
    {
      name: "rollout-model-at-the-bottom",
      severity: "error",
      comment:
        "operator/model (the rollout's vocabulary and the targeting rule) imports nothing else of the operator.",
      from: { path: "^src/operator/model/" },
      to: { path: "^src/operator/", pathNot: "^src/operator/model/" },
    },
    {
      name: "rollout-blind-to-the-config",
      severity: "error",
      comment:
        "The rollout plans from a rendered revision (model/rollout.ts DesiredRevision) and the cluster's " +
        "objects, never from a DevicePluginConfig: what it needs of the spec is in the revision.",
      from: { path: "^src/operator/(upgrade|dra-switch)/" },
      to: { path: "^src/api/v1beta1/config\\.ts$" },
    },
    {
      name: "src-not-to-tooling",
      severity: "error",
      comment: "The product never imports its tests, benchmarks or build tools.",
      from: { path: "^src/" },
      to: { path: "^(test|tools|bench)/" },
    },
    {
      name: "tooling-not-to-tests",
      severity: "error",
      comment:
        "Benchmarks and tools import no test helper: what both need lives in tools/ (tools/upgrade-load), " +
        "so a change to a test cannot change what a benchmark measures.",
      from: { path: "^(tools|bench)/" },
      to: { path: "^test/" },
    },
    {
      name: "tools-not-to-bench",
      severity: "error",
      comment: "The benchmarks stand on tools/, never the other way round.",
      from: { path: "^tools/" },
      to: { path: "^bench/" },
    },
  ],
  options: {
    doNotFollow: { path: ["node_modules", "^test/"] },
    // Type-only imports count: a type the operator takes from the plugin is as much a dependency.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
  },
};
