# Developer entry points. `make test` is what CI runs (.ci/run); every target installs what it needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
NODES ?= 3
# Node.js: the pinned release (.node-version) where the machine's is older, installed once into .local/toolchain.
NODE_BIN := $(shell tools/toolchain/node.sh)
ifeq ($(NODE_BIN),)
$(error could not find or install the pinned Node.js (see tools/toolchain/node.sh))
endif
export PATH := $(NODE_BIN):$(PATH):/usr/local/go/bin
KUBECTL = "$$(tools/cluster/build.sh)/kubectl"

.PHONY: all deps build lint typecheck format test test-clock test-lane-cluster test-lane-tiers test-run-unit test-run-protocol test-run-cluster \
	test-run-oldest test-run-node test-run-demo test-all-images oldest-cluster-tools test-unit test-protocol test-cluster test-cluster-oldest test-node \
	test-images node-tools proto manifests \
	cluster-tools gitops-health promlint promtool pod-security olm-validate bundle cluster-up cluster-down install run deploy undeploy demo \
	bench-plugin bench-operator bench-upgrade bench-dra fuzz fuzz-config chaos-upgrade chaos-failover chaos-kubelet chaos-api image \
	release version clean help

all: build

## Each documented target with what it does (the `##` comment above it in this Makefile).
help:
	@awk -f tools/make-help.awk Makefile

# npm ci only when the lock file changed since the last install.
node_modules/.install-stamp: package.json package-lock.json .node-version
	npm ci --no-audit --no-fund
	touch $@

## The npm packages (npm ci), again only when package.json, the lock file or .node-version changed.
deps: node_modules/.install-stamp

## dist/: the compiled sources and the one-file bundle dist/dpo.js that the image and the protocol tier run.
build: deps
	npx tsc -p tsconfig.build.json
	printf '{"gitCommit":"%s"}\n' "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" > dist/build-info.json
	node --import tsx tools/bundle/bundle.ts
	chmod +x dist/cli/main.js dist/dpo.js

## The dpo image as an OCI archive, .local/image/dpo-<version>.oci.tar, with no container engine: one index of
## linux/amd64 and linux/arm64, each the Dockerfile's final stage from the npm node package, Debian's libraries
## and the bundle (tools/image; the other architecture under qemu-user-static, which it installs; IMAGE_PLATFORMS=amd64
## builds one). `tools/image/build.sh test-images` builds the real-node tier's pause and busybox images the same way.
image: build
	tools/image/build.sh dpo

## A release in dist/release/ (docs/release.md): the image archive of `make image`, the chart packaged by helm
## (HELM, or the one cluster-tools keeps beside kubectl), the npm package of the dpo CLI (one bundle, no
## dependencies to fetch), the krew manifest of kubectl dpo with that package's sha256, and SHA256SUMS. Refuses to run while any place names another version than package.json.
release: image $(if $(HELM),,cluster-tools)
	HELM="$${HELM:-$$(tools/cluster/build.sh)/helm}" node --import tsx tools/release/release.ts

## `make version VERSION=x.y.z`: package.json, the lock file, the chart, config/default's image tag, the docs'
## image tags, remote bases and release files, and CHANGELOG.md's Unreleased section, all moved to x.y.z; then
## the OLM bundle (make manifests), whose CSV is named after the version and runs that image.
version: deps
	node --import tsx tools/release/bump.ts "$(VERSION)"
	npx tsx tools/manifests/generate.ts

## The TypeScript compiler over src/, test/, tools/ and bench/, emitting nothing.
typecheck: deps
	npx tsc -p tsconfig.json --noEmit

## Lint, formatting, the import rules (.dependency-cruiser.js): the layers of src/, no import cycle in src/,
## tools/ or bench/, and no test helper imported by tools/ or bench/; every relative link and #anchor of the
## committed Markdown resolves (tools/docs/check-links.ts); and the test tree's layout (tools/test-layout): no
## test source over 500 lines, and test/unit/ mirroring the source folders.
lint: deps typecheck
	npx eslint .
	npx prettier --check .
	npx depcruise --config .dependency-cruiser.js src tools bench
	node --import tsx tools/docs/check-links.ts
	node --import tsx tools/test-layout/check.ts

## Prettier over the whole tree, writing its changes.
format: deps
	npx prettier --write .

## Tests: unit (pure), protocol (the runtime over unix sockets), cluster (integration, kubelet-sim, e2e
## against a real control plane built from the upstream Go modules; the first run builds it), the cluster tier's
## core against the oldest supported control plane, and node (a real kubelet and containerd; needs root).
## The tiers run in two lanes at once, since most of their time is spent waiting on control planes: the
## cluster tier, the longest, in one; lint, unit, protocol, the oldest control plane, the real node and the
## `make demo` test (which joins the real node too) in the other. What a tier needs is built by the same
## `make -j` as the tiers, so a cold build of one control plane runs while the tiers that do not need it do.
## A failing tier stops the rest of its own lane only. Ends with each tier's tests and when it ran
## (tools/test-report).
test: test-clock deps
	@status=0; $(MAKE) --no-print-directory -j$(TEST_JOBS) -k --output-sync=target test-lane-cluster test-lane-tiers \
		|| status=$$?; node --import tsx tools/test-report/print.ts .local/test-results; exit $$status

# Jobs of `make test` at once: the two lanes, and a build beside them while a lane waits on a control plane.
TEST_JOBS ?= 3

# The lanes: each tier a target with the tier before it in its lane as prerequisite, and what it needs built;
# --output-sync prints a tier's output whole when it ends. The builds come first in each list, so that the
# longest (a control plane's binaries from the module proxy, when the cache is cold) start first.
test-lane-cluster: test-run-cluster
test-lane-tiers: test-run-demo
test-run-cluster: cluster-tools build gitops-health promlint
	$(VITEST_CLUSTER) --exclude $(DEMO_TEST)
test-run-unit: lint gitops-health promlint promtool pod-security olm-validate
	$(VITEST_UNIT)
test-run-protocol: build test-all-images promlint test-run-unit
	$(VITEST_PROTOCOL)
test-run-oldest: oldest-cluster-tools build gitops-health promlint test-run-protocol
	$(VITEST_CLUSTER_OLDEST)
test-run-node: node-tools cluster-tools oldest-cluster-tools test-all-images test-run-oldest
	$(VITEST_NODE)
test-run-demo: test-run-node
	npx vitest run --project cluster $(DEMO_TEST) $(call VITEST_REPORT,demo)

# On a cold cache the oldest release is built after the pinned one (order only, and in the lanes alone: `make
# test-cluster-oldest` alone never builds the pinned release): two Kubernetes builds at once on two cores
# slowed the first to 19 min, and the cluster tier waits for that one. The Go harnesses, containerd and the
# images start beside it, since the other lane's unit and protocol tiers wait for them.
ifneq ($(filter test-lane-cluster,$(MAKECMDGOALS)),)
oldest-cluster-tools: | cluster-tools
endif

# The dpo image and the real node's images in one build, so that two builds never run at once.
test-all-images: build
	tools/image/build.sh dpo test-images

# The cluster tier's test of `make demo`: as root it joins the real node, which is one per machine.
DEMO_TEST = test/e2e/demo.test.ts

# When `make test` started, for the summary's times; a tier run alone leaves it as the last full run wrote it.
test-clock:
	@mkdir -p .local/test-results && rm -f .local/test-results/*.json && date +%s%3N > .local/test-results/started-at

# Each tier also writes a JSON report to .local/test-results/, which .ci/run sums up.
VITEST_REPORT = --reporter=default --reporter=json --outputFile.json=.local/test-results/$(1).json

## The unit tier (test/unit): pure functions, the manifests, the Makefile itself; no cluster, no sockets.
VITEST_UNIT = npx vitest run --project unit $(call VITEST_REPORT,unit)
test-unit: deps gitops-health promlint promtool pod-security olm-validate
	$(VITEST_UNIT)

## The protocol tier (test/protocol): the built plugin over real unix sockets against the kubelet simulator.
VITEST_PROTOCOL = npx vitest run --project protocol $(call VITEST_REPORT,protocol)
test-protocol: build promlint
	$(VITEST_PROTOCOL)

## The cluster tier (test/integration, test/e2e): real control planes with simulated kubelets, CLUSTER_WORKERS
## of them (1 by default), each running one test file at a time. Two halve the tier on a machine with cores to
## spare; on two cores they slow the other lane as much (docs/benchmarks.md).
CLUSTER_WORKERS ?= 1
VITEST_CLUSTER = DPO_TEST_CLUSTERS=$(CLUSTER_WORKERS) npx vitest run --project cluster $(call VITEST_REPORT,cluster)
test-cluster: build cluster-tools gitops-health promlint
	$(VITEST_CLUSTER)

## The oldest supported control plane (KUBERNETES_OLDEST_VERSION in tools/cluster/versions.env): the CRDs,
## admission, the operator and the plugin against it. `make test-cluster K8S_VERSION=...` runs the whole tier on
## any release with a wrapper module in tools/cluster/k8s/.
OLDEST_K8S_VERSION = $(shell sed -n 's/^KUBERNETES_OLDEST_VERSION=//p' tools/cluster/versions.env)
OLDEST_TESTS = test/integration/cluster.test.ts test/integration/crd-admission.test.ts \
	test/integration/dra-control-plane.test.ts test/e2e/operator.test.ts test/e2e/dra.test.ts test/e2e/dra-sharing.test.ts
VITEST_CLUSTER_OLDEST = K8S_VERSION=$(OLDEST_K8S_VERSION) npx vitest run --project cluster $(OLDEST_TESTS) \
	$(call VITEST_REPORT,cluster-oldest)
test-cluster-oldest: build oldest-cluster-tools gitops-health promlint
	$(VITEST_CLUSTER_OLDEST)

# The oldest supported control plane's binaries, built once into the cache like cluster-tools (`make test`
# builds it after the pinned one: two Kubernetes builds at once on two cores slowed the first to 19 min).
oldest-cluster-tools:
	@K8S_VERSION=$(OLDEST_K8S_VERSION) tools/cluster/build.sh >/dev/null

## The real node: a kubelet and containerd built from the Go module proxy, the dpo image from `make image`.
## Root only (the kubelet owns /var/lib/kubelet); one real node per machine.
VITEST_NODE = npx vitest run --project node $(call VITEST_REPORT,node)
test-node: image test-images cluster-tools node-tools promlint
	$(VITEST_NODE)

## The real node's pause, busybox and sample device plugin images (tools/image), beside the dpo image.
test-images: deps
	tools/image/build.sh test-images

## containerd 2.x from the Go module proxy and the node's Debian packages (runc, CNI plugins, iptables).
node-tools:
	@tools/real-node/build.sh >/dev/null

## What kstatus (Flux) and Argo CD make of DevicePluginConfigs: a Go harness built once into the cache
## (tools/gitops-health), used by test/unit/tools/gitops-health/health.test.ts and test/e2e/gitops-health.test.ts.
gitops-health:
	@tools/gitops-health/build.sh >/dev/null

## Prometheus' own metrics linter (promlint from client_golang), a Go harness built once into the cache
## (tools/promlint); every test tier lints dpo's /metrics with it.
promlint:
	@tools/promlint/build.sh >/dev/null

## Prometheus' promtool (github.com/prometheus/prometheus/cmd/promtool from the Go module proxy), built once
## into the cache (tools/promtool); test/unit/prometheus-rules.test.ts runs `promtool check rules` and
## `promtool test rules` on config/components/prometheus-rules with it.
promtool:
	@tools/promtool/build.sh >/dev/null

## The Pod Security Standards checks of k8s.io/pod-security-admission, a Go harness built once into the
## cache (tools/pod-security); test/unit/operator/render/pod-security.test.ts judges the plugin and operator
## pods with it.
pod-security:
	@tools/pod-security/build.sh >/dev/null

## The operator framework's own bundle checks (github.com/operator-framework/api's validators, those of
## operator-sdk's `bundle validate`), a Go harness built once into the cache (tools/olm-validate);
## test/unit/tools/manifests/olm-bundle.test.ts judges bundle/ with it.
olm-validate:
	@tools/olm-validate/build.sh >/dev/null

## The OLM bundle (bundle/: the CSV, the CRDs, metadata/annotations.yaml, bundle.Dockerfile), written with the
## other generated manifests from the same sources, then judged by the operator framework's validators.
bundle: deps olm-validate
	npx tsx tools/manifests/generate.ts
	k8s="$$(sed -n 's/^KUBERNETES_VERSION=v\([0-9]*\.[0-9]*\).*/\1/p' tools/cluster/versions.env)"; \
	report="$$("$$(tools/olm-validate/build.sh)" --k8s-version "$$k8s" bundle)" || { echo "$$report"; exit 1; }; \
	echo "bundle/: no errors from the operator framework's validators at Kubernetes $$k8s"

## The TypeScript of the kubelet's gRPC protos (src/plugin-runtime/proto/gen/, committed).
proto: deps
	tools/proto/generate.sh

## The CRDs (crds/), the chart's generated templates and the OLM bundle (bundle/) from the zod schemas and
## config/ (tools/manifests), committed.
manifests: deps
	npx tsx tools/manifests/generate.ts

## Seeded gRPC fuzzing of the built plugin over its sockets: FUZZ_SEED replays a run (random and printed
## otherwise), FUZZ_REQUESTS sets the size (10,000 by default). The protocol tier runs a 2,000-case slice.
fuzz: build
	node --import tsx test/fuzz/run.ts

## Config fuzzing at full size against a real control plane: seeded manifests derived from the CRD schemas
## and mutated, each judged by dpo validate, the API server (dry runs) and the plugin's loader, which must
## agree (test/fuzz/config-judges.ts). CONFIG_FUZZ_SEED replays a run (random and printed otherwise),
## CONFIG_FUZZ_MANIFESTS sets the size (5,000 by default). make test runs 150 of a fixed seed and 150 of a random one.
fuzz-config: build cluster-tools
	CONFIG_FUZZ_MANIFESTS=$${CONFIG_FUZZ_MANIFESTS:-5000} npx vitest run --project cluster test/integration/config-fuzz.test.ts

## The local control plane: its binaries (kube-apiserver, etcd, kwok, kubectl, helm, …) built once into the cache
## from the Go module proxy.
cluster-tools:
	@tools/cluster/build.sh

## Starts the local control plane with NODES KWOK nodes (3 by default).
cluster-up: deps cluster-tools
	tools/cluster/up.sh --nodes $(NODES)

## Stops the local control plane and removes its state.
cluster-down: deps
	tools/cluster/down.sh

## Against the current kubeconfig ($$KUBECONFIG or ~/.kube/config): the CRDs of config/local, whose conversion webhook
## `make run` serves on 127.0.0.1.
install: cluster-tools
	$(KUBECTL) apply --server-side -k config/local

## The operator from this tree, against the current kubeconfig, on 127.0.0.1 ports.
run: build install
	node dist/dpo.js operator --namespace "$${POD_NAMESPACE:-dpo-system}" --metrics-addr 127.0.0.1:8080 --health-addr 127.0.0.1:8081 --webhook-addr 127.0.0.1:9443 --webhook-hosts 127.0.0.1

## config/default (the operator Deployment and everything it needs) applied to the current kubeconfig.
deploy: cluster-tools
	$(KUBECTL) apply --server-side -k config/default

## What deploy applied, deleted.
undeploy: cluster-tools
	$(KUBECTL) delete --ignore-not-found -k config/default

## The product in one command: control plane, simulated device nodes, operator, two sample configs; as root
## also a real node (kubelet and containerd) running the dpo image, with the sample workload on it.
DEMO_REAL_NODE := $(if $(filter 0,$(shell id -u)),image test-images node-tools,)
demo: build cluster-tools $(DEMO_REAL_NODE)
	node --import tsx tools/demo/demo.ts

## Full-size chaos: a plugin upgrade over 50 simulated nodes while the operator's leader is SIGKILLed
## every 10 s (make test runs the same test on 3 nodes with shorter terms).
chaos-upgrade: build cluster-tools
	DPO_TEST_NODES=50 DPO_CHAOS_KILLS=1000 DPO_CHAOS_LEAD_MS=10000 npx vitest run --project cluster test/e2e/upgrade-chaos.test.ts

## Full-size failover chaos: the leader SIGKILLed at each step of a Replace, of a Surge and of a takeover
## from an incumbent plugin, each config deleted at a random point (also while no operator runs), every
## combination twice (102 rounds); every node must end unfenced and unmarked, or served by one plugin, and a
## takeover's incumbent given back or parked (make test runs 3). DPO_FAILOVER_SEED replays a run.
chaos-failover: build cluster-tools
	DPO_FAILOVER_ROUNDS=$${DPO_FAILOVER_ROUNDS:-102} npx vitest run --project cluster test/e2e/failover-chaos.test.ts

## Full-size kubelet restarts: 100 in a row, then 20 with Allocates in flight, against the real plugin
## process; checks each re-registration against the 1 s target (make test runs 20 and 5, reporting only).
chaos-kubelet: build
	DPO_KUBELET_RESTARTS=100 DPO_KUBELET_RESTARTS_WITH_ALLOCATES=20 DPO_KUBELET_RESTART_TARGET_MS=1000 npx vitest run --project protocol test/protocol/kubelet-restart-chaos.test.ts

## API faults: the operator's and the plugins' API traffic through a fault-injecting proxy for 60 s
## (drops, resets, delays, 409s, an etcd compaction and an API server restart), then every status must be
## the truth within 10 s (make test runs a 20 s window). DPO_API_FAULT_SEED replays a run.
chaos-api: build cluster-tools
	DPO_API_FAULT_SECONDS=$${DPO_API_FAULT_SECONDS:-60} npx vitest run --project cluster test/e2e/api-faults.test.ts

## Benchmarks (numbers go to docs/benchmarks.md). bench-plugin runs the upstream Go sample device plugin
## (built once into the cache by tools/cluster/build-sample-device-plugin.sh) beside dpo under the same load.
bench-plugin: build
	node --expose-gc --import tsx bench/plugin.bench.ts

## bench-operator: the operator at 100 and 5000 KWOK nodes (BENCH_NODES=5000 for the second alone), each
## node's DeviceNodeState written by the plugin's report writer; see docs/benchmarks.md for the knobs.
bench-operator: build cluster-tools
	node --expose-gc --import tsx bench/operator.bench.ts

## A plugin upgrade on DPO_BENCH_NODES simulated nodes (100 by default; one real plugin process per node,
## two on a node in flight): dpo Surge, dpo Replace and a plain RollingUpdate DaemonSet, in one run.
bench-upgrade: build cluster-tools
	node --import tsx bench/upgrade.bench.ts

## bench-dra: DRA at 100 simulated nodes (DPO_BENCH_NODES): slice-taint latency, NodePrepareResources, and the
## DevicePlugin<->DRA switch with pods through the scheduler.
bench-dra: build cluster-tools
	node --import tsx bench/dra.bench.ts

## Removes dist/ and .local/ (the test reports, the image, the toolchain).
clean:
	rm -rf dist .local
