// The device-plugin runtime (runtime-core.ts) with its backend built from the config when the caller passes
// none, as tests and tools construct it. Building any backend loads them all (backends/index.ts); `dpo
// plugin` loads only the one its config names (backends/load.ts) and uses runtime-core.ts, so a device
// plugin holds one backend's code, not four (docs/benchmarks.md, bench-plugin).
import { createBackend, runtimeBackendOptions } from "./backends/index.js";
import { PluginRuntime as PluginRuntimeCore } from "./runtime-core.js";
import type { PluginRuntimeOptions } from "./runtime-types.js";

export type { PluginRuntimeEvents, PluginRuntimeOptions, RuntimeStatus } from "./runtime-types.js";

export class PluginRuntime extends PluginRuntimeCore {
  constructor(opts: PluginRuntimeOptions) {
    super({
      ...opts,
      backend:
        opts.backend ?? createBackend(opts.config.spec, runtimeBackendOptions(opts.config.spec, opts.logger)),
    });
  }
}
