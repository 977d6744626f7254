# The dpo image: one Node.js program that runs as `dpo operator` (Deployment) and `dpo plugin` (DaemonSets).
# Build: docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD) -t ghcr.io/dpo-dev/dpo:0.1.0 .
# No native modules: the same Dockerfile builds every platform (docker buildx --platform linux/amd64,linux/arm64).
# Pinned to the release in .node-version (a test keeps the two in step).
ARG NODE_IMAGE=node:24.21.0-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY tools/bundle ./tools/bundle
# There is no .git in the build context; the commit comes in as an argument (shown by `dpo version`).
ARG GIT_COMMIT=unknown
RUN npx tsc -p tsconfig.build.json \
 && node --import tsx tools/bundle/bundle.ts \
 && printf '{"gitCommit":"%s"}\n' "${GIT_COMMIT}" > dist/build-info.json

FROM ${NODE_IMAGE} AS runtime-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
LABEL org.opencontainers.image.source="https://github.com/dpo-dev/dpo" \
      org.opencontainers.image.description="Kubernetes operator and bundled runtime for kubelet device plugins" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
COPY --from=runtime-deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
# No USER here: the manifests set it per workload (operator uid 65532, plugin uid 0 for the kubelet's
# root-owned socket directory). A small semi-space and V8 lite mode keep the per-node plugin's memory low.
# The semi-space is held at that size (min = max): V8's memory reducer would halve it in a quiet spell, and
# the first Allocates after one would then scavenge twice as often (p99 2.1 ms against 1.4 in bench-plugin).
# Lite mode leaves WebAssembly undefined, so the plugin must not load anything that needs it (Node's
# global fetch and undici do; the operator Deployment overrides the command without lite mode). Local time
# comes from the C library instead of ICU's time zone data, which the first Date a plugin formats (its log
# lines' ISO timestamps, the Date header of each gRPC response) would otherwise map in: 0.8 MiB of RSS.
ENTRYPOINT ["node", "--max-semi-space-size=1", "--min-semi-space-size=1", "--lite-mode", "--no-icu-timezone-data", "/app/dist/dpo.js"]
# V8's code cache for the plugin's modules, made once here under the ENTRYPOINT's flags: every plugin start
# reads it (a read-only root filesystem is fine) instead of compiling the bundle again.
ENV NODE_COMPILE_CACHE=/app/.compile-cache
RUN node --max-semi-space-size=1 --min-semi-space-size=1 --lite-mode --no-icu-timezone-data /app/dist/dpo.js plugin --help > /dev/null
CMD ["--help"]
